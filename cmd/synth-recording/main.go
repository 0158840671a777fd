// Command synth-recording writes RDKit's featurisations of the synthetic
// datasets' molecules to a recording (rdkit.RecordingEnv), for a machine
// without RDKit whose tests featurise synthetic datasets: the GPU check's
// (scripts/gpu-check.sh). It records the first -molecules molecules of every
// seed from 1 to -seeds; a synthetic dataset of n molecules is the first n
// of its seed's sequence, whatever its noise, so every dataset of at most
// that size with such a seed is covered. -smiles adds the molecules of a
// file, one SMILES a line (the pinned ones of model's tests).
//
//	go run ./cmd/synth-recording -out FILE [-seeds 16] [-molecules 2000] [-smiles FILE]
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/micrograph/micrograph/data/rdkit"
	"github.com/micrograph/micrograph/data/synthetic"
)

func main() {
	out := flag.String("out", "", "the recording to write")
	seeds := flag.Int("seeds", 16, "record seeds 1 to this")
	molecules := flag.Int("molecules", 2000, "molecules per seed")
	extra := flag.String("smiles", "", "also record the SMILES of this file, one a line")
	flag.Parse()
	if *out == "" || *seeds < 1 || *molecules < 1 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: synth-recording -out FILE [-seeds N] [-molecules M] [-smiles FILE]")
		os.Exit(2)
	}
	var smiles []string
	for seed := range *seeds {
		t := synthetic.Table(synthetic.Options{Molecules: *molecules, Seed: uint64(seed + 1)})
		smiles = append(smiles, t.SMILES...)
	}
	synthesised := len(smiles)
	if *extra != "" {
		b, err := os.ReadFile(*extra)
		if err != nil {
			fmt.Fprintln(os.Stderr, "synth-recording:", err)
			os.Exit(1)
		}
		smiles = append(smiles, strings.Fields(string(b))...)
	}
	if err := rdkit.Record(*out, smiles); err != nil {
		fmt.Fprintln(os.Stderr, "synth-recording:", err)
		os.Exit(1)
	}
	info, err := os.Stat(*out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "synth-recording:", err)
		os.Exit(1)
	}
	fmt.Printf("synth-recording: %d molecules (seeds 1-%d, %d each, and %d from %q) in %s, %d bytes\n",
		len(smiles), *seeds, *molecules, len(smiles)-synthesised, *extra, *out, info.Size())
}
