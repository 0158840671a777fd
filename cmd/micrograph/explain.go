package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/micrograph/micrograph/data/rdkit"
	"github.com/micrograph/micrograph/internal/atomicfile"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/infer"
	"github.com/micrograph/micrograph/trainer/report"
	"github.com/micrograph/micrograph/trainer/runenv"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

func runExplain(args []string) error {
	fs := newFlags("explain", "--data CSV|DIR --out FILE.csv|FILE.jsonl [--page FILE.html] [--model NAME|model.pt | --run RUNDIR] [flags]",
		"Says which of a pre-trained model's motifs each atom of your molecules belongs to\n"+
			"(docs/method.md §14): per molecule, in input row order, each atom's motif (RDKit atom order)\n"+
			"and its confidence, the motif-like subgraphs (connected pieces of atoms of one motif) with\n"+
			"their SMILES, and the molecule's motif profile (K shares summing to 1: a descriptor). .jsonl\n"+
			"writes one JSON object per molecule; .csv the columns row, smiles, atom_motifs, pieces,\n"+
			"fragments, p_0 … p_{K-1}, error. --page draws the first molecules with their atoms coloured\n"+
			"by motif, under a legend naming each motif by its commonest pieces. Without --model or --run\n"+
			"the shipped model "+defaultModel+" explains (docs/model-card.md). Rows RDKit rejects are listed\n"+
			"on stderr by line and kept, with their reason in error. The input streams, so memory does not\n"+
			"grow with it.")
	ref := fs.String("model", "", "motif model: a shipped model's name or a .pt file from micrograph export --motifs (default "+defaultModel+")")
	run := fs.String("run", "", "pre-training run folder: its newest readable checkpoint, instead of --model")
	page := fs.String("page", "", "HTML page drawing the first molecules, with the legend")
	pageMolecules := fs.Int("page-molecules", 60, "molecules drawn on --page")
	var s scoreFlags
	s.register(fs, "output file, .csv or .jsonl by its extension")
	if err := parseFlags(fs, args, "data", "out"); err != nil {
		return err
	}
	if *ref != "" && *run != "" {
		return usageError{fmt.Errorf("give at most one of --model and --run")}
	}
	if *ref == "" && *run == "" {
		*ref = defaultModel
	}
	if *page != "" && !strings.HasSuffix(*page, ".html") {
		return usageError{fmt.Errorf("--page %s: want an .html file", *page)}
	}
	if *pageMolecules < 0 {
		return usageError{fmt.Errorf("--page-molecules %d must not be negative", *pageMolecules)}
	}
	checkOut := func() error {
		_, err := infer.ExplanationFormat(s.out)
		if err != nil {
			return fmt.Errorf("--out %w", err)
		}
		return nil
	}
	if err := checkOut(); err != nil {
		return usageError{err}
	}
	var inputs []input
	if *ref != "" {
		var err error
		if _, inputs, err = modelRef("--model", *ref, true); err != nil {
			return err
		}
	}
	inputs = append(inputs, input{"--run", *run, false})
	if *page != "" {
		if err := checkOutput("--page", *page, append(inputs, input{"--data", s.data, true}, input{"--out", s.out, false})...); err != nil {
			return err
		}
	}
	opt, env, err := s.options(fs, checkOut, inputs...)
	if err != nil {
		return err
	}
	m, name, legend, err := openMotifModel(*ref, *run, env)
	if err != nil {
		return err
	}
	defer m.Free()
	if *page != "" {
		if err := rdkit.Load(); err != nil {
			logf("molecules are not drawn on the page: %v", err)
		}
	}
	drawn := 0
	if *page != "" {
		drawn = *pageMolecules
	}
	rep, err := infer.Explain(m, infer.ExplainOptions{Options: opt, PageMolecules: drawn}, env, s.out)
	if err != nil {
		return flagError(fs, &s, err)
	}
	if *page != "" {
		p := report.ExplanationPage{Model: name, Objective: m.Config.Objective(), Data: filepath.Base(s.data), Rows: rep.Rows,
			Invalid: rep.Invalid, Molecules: rep.Page, Usage: rep.Usage, Legend: legend.Legend, LegendData: legend.Data}
		// Rendered in memory first, so that a failure leaves no partial file.
		var b bytes.Buffer
		if err := report.WriteExplanations(&b, p); err != nil {
			return fmt.Errorf("rendering the page: %w", err)
		}
		if err := atomicfile.WriteFile(*page, b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	mols := rep.Rows - rep.Invalid
	printf("explained %d of %d rows of %s with %s into %s (%d invalid, kept with their reason) in %.2fs: featurisation %.2fs, model %.2fs (%.0f molecules/s)",
		mols, rep.Rows, filepath.Base(s.data), name, s.out, rep.Invalid, rep.Seconds, rep.FeaturizeSeconds, rep.ModelSeconds,
		float64(mols)/max(rep.ModelSeconds, 1e-9))
	if !rep.Fragments {
		logf("pieces are not named by their SMILES: RDKit is not available or the input has no SMILES")
	}
	if *page != "" {
		printf("page: %s (%d molecules drawn)", *page, len(rep.Page))
	}
	return nil
}

// openMotifModel loads the motif model of --model (a name or a file) or
// --run (the newest readable checkpoint) where env says, with its name for
// the reader and what its description says of its pre-training data.
func openMotifModel(ref, run string, env runenv.Env) (m *model.MotifModel, name string, info model.MotifModelInfo, err error) {
	defer torch.Recover(&err)
	if run == "" {
		m, info, err = model.LoadMotifModel(ref, env.Device)
		return m, ref, info, err
	}
	ck, _, err := runfolder.LatestCheckpoint(run)
	if err != nil {
		return nil, "", info, err
	}
	defer ck.Free()
	if m, err = ck.MotifModel(env.Device); err != nil {
		return nil, "", info, err
	}
	return m, fmt.Sprintf("%s (step %d)", ck.Path, ck.Step), info, nil
}
