package main

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/micrograph/micrograph/internal/atomicfile"
	"github.com/micrograph/micrograph/internal/inputfile"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/trainer/diagnose"
	"github.com/micrograph/micrograph/trainer/report"
	"github.com/spf13/pflag"
)

func runDiagnose(args []string) error {
	opt := diagnose.Options{Molecules: 4096, BatchSize: 512, ProbeSeeds: 3, Seed: 1}
	random := model.DefaultConfig()
	var isRandom bool
	var out string
	fs := newFlags("diagnose", "--checkpoint C.pt|--encoder E.pt|--random [architecture flags] --data DIR --out diag.json [flags]",
		"Measures what an encoder makes of a seeded sample of molecules, in evaluation mode and\n"+
			"batches of --batch-size: effective rank, alignment and uniformity of the graph embeddings e\n"+
			"(and W_e·e), how much of the node embeddings' variance the molecule explains, motif usage\n"+
			"(Sinkhorn and raw argmax), subgraph sizes against molecule sizes (motif-like subgraphs\n"+
			"without perturbation, and random walks), saturation of Q, P and the contrast's softmax,\n"+
			"the encoder gradient of each loss part on one training-mode batch, batch-norm running\n"+
			"statistics against the sample's, the effect of dropout, and linear probes (--probe) on e\n"+
			"and on W_e·e. An exported encoder has no projections or motifs: those figures are absent.")
	fs.StringVar(&opt.Checkpoint, "checkpoint", "", "pre-training checkpoint (.pt): the whole model")
	fs.StringVar(&opt.Encoder, "encoder", "", encoderHelp)
	fs.BoolVar(&isRandom, "random", false, "a freshly initialised model (from --seed) with the architecture and objective flags")
	before := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) { before[f.Name] = true })
	objectiveFlags(fs, &random)
	var modelFlags []string
	fs.VisitAll(func(f *pflag.Flag) {
		if !before[f.Name] {
			modelFlags = append(modelFlags, f.Name)
		}
	})
	fs.StringVar(&opt.Data, "data", "", "OGB dataset folder or CSV file of SMILES to sample")
	fs.IntVar(&opt.Molecules, "molecules", opt.Molecules, "molecules sampled (seeded) from those pre-training can use")
	fs.IntVar(&opt.BatchSize, "batch-size", opt.BatchSize, "molecules per forward pass")
	fs.StringArrayVar(&opt.Probes, "probe", nil, "labelled dataset (OGB folder with a split) for linear probes on e and W_e·e; repeatable")
	fs.IntVar(&opt.ProbeSeeds, "probe-seeds", opt.ProbeSeeds, "classifier seeds per probe (--seed, --seed+1, …)")
	fs.StringVar(&out, "out", "", "result file (JSON), written atomically; its folder must exist")
	seedFlag(fs, &opt.Seed)
	var rt runtimeFlags
	rt.register(fs, false)
	if err := parseFlags(fs, args, "data", "out"); err != nil {
		return err
	}
	if isRandom {
		opt.Random = &random
	} else {
		for _, name := range modelFlags {
			if fs.Changed(name) {
				return usageError{fmt.Errorf("--%s: only --random takes the model from flags", name)}
			}
		}
	}
	if err := opt.Validate(); errors.Is(err, diagnose.ErrSource) {
		return usageError{errors.New("want exactly one of --checkpoint, --encoder and --random")}
	} else if err != nil {
		return flagError(fs, &opt, err)
	}
	env, err := rt.parse(fs, nil)
	if err != nil {
		return err
	}
	inputs, err := optionalEncoder(opt.Encoder)
	if err != nil {
		return err
	}
	if err := checkNotCorpus("--data", opt.Data); err != nil {
		return err
	}
	inputs = append(inputs, input{"--checkpoint", opt.Checkpoint, false}, input{"--data", opt.Data, true})
	for _, p := range opt.Probes {
		inputs = append(inputs, input{"--probe", p, true})
	}
	if err := checkOutput("--out", out, inputs...); err != nil {
		return err
	}
	if err := rt.checkCache(inputs...); err != nil {
		return err
	}
	r, err := diagnose.Run(opt, env)
	var objective *diagnose.ObjectiveError
	if errors.As(err, &objective) {
		return fmt.Errorf("%w (export its encoder with micrograph export and diagnose that with --encoder)", err)
	}
	if err != nil {
		return err
	}
	if err := atomicfile.WriteJSON(out, r); err != nil {
		return err
	}
	printf("diagnose %s on %d molecules of %s: effective rank of e %.1f, uniformity %.2f, between-molecule share of node variance %.3f (%.1fs); result in %s",
		r.Source, r.Molecules, r.Data, float64(r.Graph.EffectiveRank), float64(r.Graph.Uniformity), float64(r.Nodes.BetweenGraphShare), r.Seconds, out)
	return nil
}

func runDiagnosePlot(args []string) error {
	fs := newFlags("diagnose-plot", "--out figures.svg NAME=diag.json …",
		"Draws chosen figures of several diagnose results side by side as an SVG of bar charts, one\n"+
			"bar per result, named and ordered as given.")
	out := fs.String("out", "", "SVG file to write")
	title := fs.String("title", "micrograph diagnose", "heading of the figure")
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if !fs.Changed("out") {
		return usageError{errMissing("--out")}
	}
	if !strings.HasSuffix(*out, ".svg") {
		return usageError{fmt.Errorf("--out %s: want an .svg file", *out)}
	}
	if fs.NArg() == 0 {
		return usageError{errors.New("no NAME=diag.json to draw")}
	}
	var names, paths []string
	var inputs []input
	for _, arg := range fs.Args() {
		name, path, ok := strings.Cut(arg, "=")
		if !ok || name == "" {
			return usageError{fmt.Errorf("%q: want NAME=diag.json", arg)}
		}
		names, paths = append(names, name), append(paths, path)
		inputs = append(inputs, input{"argument", path, false})
	}
	if err := checkOutput("--out", *out, inputs...); err != nil {
		return err
	}
	var ds []*diagnose.Diagnosis
	for _, path := range paths {
		var d diagnose.Diagnosis
		if err := inputfile.ReadJSON(path, &d); err != nil {
			return err
		}
		ds = append(ds, &d)
	}
	var svg bytes.Buffer
	if err := report.WriteDiagnosisPlot(&svg, names, ds, *title); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(*out, svg.Bytes(), 0o644); err != nil {
		return err
	}
	printf("%d diagnoses drawn in %s", len(ds), *out)
	return nil
}
