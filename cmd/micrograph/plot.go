package main

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/micrograph/micrograph/internal/atomicfile"
	"github.com/micrograph/micrograph/trainer/report"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

func runPlot(args []string) error {
	fs := newFlags("plot", "--run RUNDIR --out curves.svg",
		"Draws each part of a run's pre-training loss (RUNDIR/log.jsonl) over the steps, and the\n"+
			"subgraphs per batch, as one SVG of small multiples: every logged value faint, a moving\n"+
			"average solid, gaps where a value is not finite, dashed lines where an epoch begins.")
	run := fs.String("run", "", "run folder")
	out := fs.String("out", "", "SVG file to write")
	perEpoch := fs.Bool("per-epoch", false, "draw each epoch's mean instead of every logged step (a small file for long runs)")
	if err := parseFlags(fs, args, "run", "out"); err != nil {
		return err
	}
	if !strings.HasSuffix(*out, ".svg") {
		return usageError{fmt.Errorf("--out %s: want an .svg file", *out)}
	}
	if err := checkOutput("--out", *out, input{"--run", *run, false}, input{"--run", runfolder.LogPath(*run), false}); err != nil {
		return err
	}
	records, err := runfolder.ReadLog(*run)
	if err != nil {
		return err
	}
	if len(records) == 0 {
		return fmt.Errorf("%s has no records yet", runfolder.LogPath(*run))
	}
	title := "micrograph pre-training: " + *run
	if *perEpoch {
		records, title = report.EpochMeans(records), title+" (epoch means)"
	}
	var svg bytes.Buffer
	if err := report.WriteLossPlot(&svg, records, title); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(*out, svg.Bytes(), 0o644); err != nil {
		return err
	}
	printf("%d logged steps of %s drawn in %s", len(records), *run, *out)
	return nil
}
