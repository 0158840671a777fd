package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/micrograph/micrograph/data"
)

func runFeaturize(args []string) error {
	fs := newFlags("featurize", "--csv FILE --out DIR [flags]",
		"Featurises the SMILES of a CSV file (gzip-compressed or not) with RDKit exactly as OGB's\n"+
			"smiles2graph does and writes OGB's dataset layout (raw/, split/, mapping/) into the new\n"+
			"folder DIR. Rows RDKit rejects are skipped and listed in DIR/"+data.RejectFile+".")
	csvPath := fs.String("csv", "", "input CSV file with a header row")
	out := fs.String("out", "", "output folder; must not exist; appears only when complete")
	smilesCol := fs.String("smiles-col", "smiles", "SMILES column (case ignored)")
	labelCols := fs.String("label-cols", "", "label columns, comma-separated, CSV quoting for names with commas\n(default: all but the SMILES and mol_id columns)")
	split := fs.String("split", "scaffold", "split to write: scaffold (OGB's Bemis-Murcko split), random (80/10/10) or none")
	seed := fs.Uint64("seed", 0, "seed of a random split")
	var limits data.Limits
	limitFlags(fs, &limits)
	if err := parseFlags(fs, args, "csv", "out"); err != nil {
		return err
	}
	if err := limits.Validate(); err != nil {
		return flagError(fs, &limits, err)
	}
	var labels []string
	if fs.Changed("label-cols") {
		r := csv.NewReader(strings.NewReader(*labelCols))
		rec, err := r.Read()
		if err != nil && err != io.EOF {
			return usageError{fmt.Errorf("--label-cols: %v", err)}
		}
		labels = append([]string{}, rec...)
	}
	switch *split {
	case "scaffold", "random", "none":
	default:
		return usageError{fmt.Errorf("--split %q: want scaffold, random or none", *split)}
	}
	start := time.Now()
	table, err := data.ReadTable(*csvPath, *smilesCol, labels)
	if err != nil {
		return err
	}
	rep, err := data.Featurize(table, *out, data.FeaturizeOptions{Split: *split, Seed: *seed, Limits: limits})
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
