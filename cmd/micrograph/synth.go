package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/micrograph/micrograph/data/synthetic"
)

func runSynth(args []string) error {
	fs := newFlags("synth", "--out DIR [flags]",
		"Writes micrograph's built-in synthetic dataset into the new folder DIR: molecules assembled\n"+
			"from functional groups ("+strings.Join(synthetic.Groups, ", ")+")\n"+
			"joined by carbon linkers, with tasks defined by the groups present ("+strings.Join(synthetic.Tasks, ", ")+")\n"+
			"and some label noise. raw/node_group.csv.gz records each atom's group (-1: linker).")
	out := fs.String("out", "", "output folder; must not exist; appears only when complete")
	molecules := fs.Int("molecules", 2000, "number of molecules")
	seed := fs.Uint64("seed", 0, "the same seed gives the same dataset")
	if err := parseFlags(fs, args, "out"); err != nil {
		return err
	}
	if *molecules < 1 {
		return usageError{fmt.Errorf("--molecules %d: want at least 1", *molecules)}
	}
	if err := checkOutputFolder("--out", *out); err != nil {
		return err
	}
	start := time.Now()
	rep, err := synthetic.Write(*out, synthetic.Options{Molecules: *molecules, Seed: *seed})
	if err != nil {
		return err
	}
	printReport(rep, "synthetic", *out, time.Since(start))
	return nil
}
