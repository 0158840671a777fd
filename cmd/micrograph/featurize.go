package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/corpus"
)

func runFeaturize(args []string) error {
	fs := newFlags("featurize", "--csv FILE --out DIR [flags]",
		"Featurises the SMILES of a CSV file (gzip-compressed or not) with RDKit exactly as OGB's\n"+
			"smiles2graph does and writes OGB's dataset layout (raw/, split/, mapping/) into the new\n"+
			"folder DIR. Rows RDKit rejects are skipped and listed in DIR/"+data.RejectFile+".\n\n"+
			"With --shard-rows it writes a pre-training corpus instead (molecules without labels or split,\n"+
			"for files of millions of rows): shards of that many rows, each written atomically and recorded\n"+
			"in DIR/"+data.CorpusManifestFile+"; run again after an interruption, it keeps the complete shards\n"+
			"and continues. Give DIR to pretrain --data: the shards stay on disk, memory-mapped.")
	csvPath := fs.String("csv", "", "input CSV file with a header row")
	out := fs.String("out", "", "output folder; must not exist; appears only when complete")
	var cols data.Columns
	columnFlags(fs, &cols)
	split := fs.String("split", "scaffold", "split to write: scaffold (OGB's Bemis-Murcko split), random (80/10/10) or none")
	seed := fs.Uint64("seed", 0, "seed of a random split")
	workers := fs.Int("rdkit-workers", 0, "goroutines featurising rows with RDKit (default: one per CPU)")
	shardRows := fs.Int("shard-rows", 0, fmt.Sprintf("write a sharded pre-training corpus, this many input rows per shard (e.g. %d)", corpus.DefaultShardRows))
	var limits data.Limits
	limitFlags(fs, &limits)
	if err := parseFlags(fs, args, "csv", "out"); err != nil {
		return err
	}
	if err := limits.Validate(); err != nil {
		return flagError(fs, &limits, err)
	}
	if err := checkOutputFolder("--out", *out, input{"--csv", *csvPath, false}); err != nil {
		return err
	}
	if err := cols.Validate(); err != nil {
		return flagError(fs, &cols, err)
	}
	switch *split {
	case "scaffold", "random", "none":
	default:
		return usageError{fmt.Errorf("--split %q: want scaffold, random or none", *split)}
	}
	if *workers < 0 {
		return usageError{fmt.Errorf("--rdkit-workers %d: want 0 (one per CPU) or more", *workers)}
	}
	if fs.Changed("shard-rows") {
		for _, name := range []string{"target-columns", "ignore-columns", "split", "seed"} {
			if fs.Changed(name) {
				return usageError{fmt.Errorf("--%s: a corpus (--shard-rows) has no labels and no split", name)}
			}
		}
		if *shardRows < 1 {
			return usageError{fmt.Errorf("--shard-rows %d: want at least 1", *shardRows)}
		}
		return flagError(fs, &cols, featurizeCorpus(*csvPath, *out, corpus.Options{SMILESColumn: cols.SMILES, ShardRows: *shardRows, Workers: *workers, Limits: limits}))
	}
	start := time.Now()
	table, err := data.ReadTable(*csvPath, cols)
	if err != nil {
		return flagError(fs, &cols, err)
	}
	if table.Note != "" {
		fmt.Fprintf(notes, "micrograph: %s\n", table.Note)
	}
	rep, err := data.Featurize(table, *out, data.FeaturizeOptions{Split: *split, Seed: *seed, Workers: *workers, Limits: limits})
	if err != nil {
		return err
	}
	printReport(rep, *csvPath, *out, time.Since(start))
	return nil
}

// printReport is the summary of a featurisation, one rejected row per line.
func printReport(rep *data.FeaturizeReport, source, out string, took time.Duration) {
	fmt.Fprintf(stdout, "%s: %d of %d rows featurised into %s in %.1fs: %d atoms, %d bonds\n",
		filepath.Base(source), rep.Molecules, rep.Rows, out, took.Seconds(), rep.Atoms, rep.Bonds)
	if rep.Split != nil {
		fmt.Fprintf(stdout, "%s split: %d train, %d valid, %d test\n",
			rep.Split.Name, len(rep.Split.Train), len(rep.Split.Valid), len(rep.Split.Test))
	}
	fmt.Fprintf(stdout, "%d rows rejected (listed in %s)\n", len(rep.Rejected), filepath.Join(out, data.RejectFile))
	for _, r := range rep.Rejected {
		smiles := r.SMILES
		if len(smiles) > 80 {
			smiles = smiles[:80] + "..."
		}
		fmt.Fprintf(stdout, "  row %d (line %d) %q: %s\n", r.Row, r.Line, smiles, r.Reason)
	}
}

// featurizeCorpus writes or resumes a sharded corpus, a line per shard.
func featurizeCorpus(src, out string, opt corpus.Options) error {
	start := time.Now()
	molecules := 0
	opt.Progress = func(s corpus.ShardInfo) {
		molecules += s.Molecules
		fmt.Fprintf(stdout, "%s: rows %d..%d: %d molecules, %d rejected (%.0f molecules/s so far)\n",
			s.File, s.FirstRow, s.FirstRow+int64(s.Rows)-1, s.Molecules, s.Rejected, float64(molecules)/time.Since(start).Seconds())
	}
	rep, err := corpus.Featurize(src, out, opt)
	if err != nil {
		return err
	}
	if rep.Note != "" {
		fmt.Fprintf(notes, "micrograph: %s\n", rep.Note)
	}
	if rep.Damaged != "" {
		fmt.Fprintf(stdout, "%s: featurised again from that shard on\n", rep.Damaged)
	}
	rows, mols, atoms, bonds, rejected, bytes := rep.Manifest.Totals()
	fmt.Fprintf(stdout, "%s: %d of %d rows featurised into %s in %.1fs (%d shards, %d kept from an earlier run): %d atoms, %d bonds, %.1f MB\n",
		filepath.Base(src), mols, rows, out, time.Since(start).Seconds(), len(rep.Manifest.Shards), rep.Resumed, atoms, bonds, float64(bytes)/1e6)
	fmt.Fprintf(stdout, "%d rows rejected (listed in %s)\n", rejected, filepath.Join(out, data.RejectFile))
	return nil
}
