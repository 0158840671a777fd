package main

import (
	"bytes"
	"fmt"
	"math"
	"strings"

	"github.com/micrograph/micrograph/data/rdkit"
	"github.com/micrograph/micrograph/internal/atomicfile"
	"github.com/micrograph/micrograph/trainer/report"
)

func runMotifs(args []string) error {
	fs := newFlags("motifs", "--run RUNDIR --out motifs.html [flags]",
		"Writes a self-contained HTML report of what a run's newest checkpoint makes of a dataset's\n"+
			"molecules (docs/method.md §3–§4): the atoms per motif, and per motif its\n"+
			"subgraphs, their mean size and the ones closest to it, drawn by RDKit with their atoms\n"+
			"highlighted. On the synthetic dataset it also names each motif's dominant planted group\n"+
			"and the NMI between motifs and groups, after pre-training and for the model the run\n"+
			"started from (its seed, no step taken). The model runs in evaluation mode, without the\n"+
			"subgraph perturbation.")
	opt := report.MotifReportOptions{Molecules: 2000, PerMotif: 6}
	var out string
	fs.StringVar(&opt.Run, "run", "", "run folder: its newest readable checkpoint")
	fs.StringVar(&opt.Data, "data", "", "OGB dataset folder or CSV file of SMILES (default: the run's own dataset)")
	fs.StringVar(&out, "out", "", "HTML file to write")
	fs.IntVar(&opt.PerMotif, "per-motif", opt.PerMotif, "closest subgraphs drawn per motif")
	fs.IntVar(&opt.Molecules, "molecules", opt.Molecules, "molecules analysed: the first ones pre-training can use (0: all)")
	fs.IntVar(&opt.BatchSize, "batch-size", 0, "molecules per forward pass; Sinkhorn balances motifs over each (default: the run's)")
	var rt runtimeFlags
	rt.register(fs, false)
	if err := parseFlags(fs, args, "run", "out"); err != nil {
		return err
	}
	if !strings.HasSuffix(out, ".html") {
		return usageError{fmt.Errorf("--out %s: want an .html file", out)}
	}
	if err := opt.Validate(); err != nil {
		return flagError(fs, &opt, err)
	}
	inputs := []input{{"--run", opt.Run, false}, {"--data", opt.Data, true}}
	if err := checkOutput("--out", out, inputs...); err != nil {
		return err
	}
	if err := rt.checkCache(inputs...); err != nil {
		return err
	}
	env, err := rt.parse(fs, nil)
	if err != nil {
		return err
	}

	r, err := report.BuildMotifReport(opt, env)
	if err != nil {
		return flagError(fs, &opt, err)
	}
	if err := rdkit.Load(); err != nil && r.SMILES {
		logf("molecules are not drawn: %v", err)
	}
	// Rendered in memory first, so that a failure leaves no partial file.
	var page bytes.Buffer
	if err := r.WriteHTML(&page); err != nil {
		return fmt.Errorf("rendering the report: %w", err)
	}
	if err := atomicfile.WriteFile(out, page.Bytes(), 0o644); err != nil {
		return err
	}
	empty := 0
	for _, s := range r.Motifs {
		if s.Subgraphs == 0 {
			empty++
		}
	}
	printf("motifs of %s (step %d) on %d molecules of %s: %d atoms, %d subgraphs, %d of %d motifs without subgraphs",
		r.Checkpoint, r.Step, r.Molecules, r.Data, r.Atoms, len(r.Subgraphs), empty, len(r.Motifs))
	for _, s := range r.Motifs {
		if len(s.Fragments) == 0 {
			continue
		}
		var top []string
		for _, f := range s.Fragments {
			top = append(top, fmt.Sprintf("%s %.0f%%", f.SMILES, 100*f.Share))
		}
		printf("motif %d: %d subgraphs of %.1f atoms; most frequent fragments: %s", s.Motif, s.Subgraphs, s.MeanSize, strings.Join(top, ", "))
	}
	if !math.IsNaN(r.NMI) {
		printf("NMI between motifs and planted groups: %.3f after pre-training, %.3f before (the run's initial model)", r.NMI, r.UntrainedNMI)
	}
	printf("report: %s", out)
	return nil
}
