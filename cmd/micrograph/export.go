package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/infer"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

func runExport(args []string) error {
	fs := newFlags("export", "(--run RUNDIR | --checkpoint FILE | --model NAME) --out FILE.pt [--motifs] [flags]",
		"Writes a pre-trained encoder's weights (PyTorch state_dict names, loadable with\n"+
			"torch.load(path, weights_only=True)) to --out, and its architecture to the .json next to it.\n"+
			"With --motifs it writes a motif model instead (docs/method.md §14): the encoder, the motif\n"+
			"table and the assignment head, which explain reads; from a run, its description lists each\n"+
			"motif's commonest pieces in the run's dataset (or --data). The source is a run's newest\n"+
			"readable checkpoint, a checkpoint file, or a shipped model ("+strings.Join(model.ShippedModels(), ", ")+").")
	run := fs.String("run", "", "run folder: its newest readable checkpoint")
	checkpoint := fs.String("checkpoint", "", "a checkpoint file")
	shipped := fs.String("model", "", "a shipped model's name")
	out := fs.String("out", "", "file to write (.pt); the description goes to the same name with .json")
	motifs := fs.Bool("motifs", false, "write a motif model (encoder, motif table, assignment head) instead of the encoder alone")
	name := fs.String("name", "", "with --motifs: the model's name, recorded in its description")
	legendData := fs.String("data", "", "with --motifs from a run or checkpoint: the molecules whose commonest pieces name the motifs\n"+
		"(OGB folder or CSV of SMILES; default: the run's own dataset)")
	var rt runtimeFlags
	rt.register(fs, false)
	if err := parseFlags(fs, args, "out"); err != nil {
		return err
	}
	sources := 0
	for _, s := range []string{*run, *checkpoint, *shipped} {
		if s != "" {
			sources++
		}
	}
	switch {
	case sources != 1:
		return usageError{fmt.Errorf("give exactly one of --run, --checkpoint and --model")}
	case !strings.HasSuffix(*out, ".pt"):
		return usageError{fmt.Errorf("--out %s: want a .pt file", *out)}
	case !*motifs && (*name != "" || *legendData != ""):
		return usageError{fmt.Errorf("--name and --data belong to --motifs")}
	case *shipped != "" && (*name != "" || *legendData != ""):
		return usageError{fmt.Errorf("--name and --data describe a model made from a run: a shipped model has its own")}
	}
	if *shipped != "" {
		ref, _, err := modelRef("--model", *shipped, *motifs)
		if err != nil {
			return err
		}
		if !ref.Shipped {
			return usageError{fmt.Errorf("--model %s: export --model takes a shipped model's name (%s), not a file: a .pt from export is exported already, and a checkpoint goes with --checkpoint",
				*shipped, strings.Join(model.ShippedModels(), ", "))}
		}
	}
	inputs := []input{{"--run", *run, false}, {"--checkpoint", *checkpoint, false}, {"--data", *legendData, true}}
	// The description is written beside the weights: refused now, not after them.
	if err := checkOutput("--out "+*out+": its description", model.EncoderInfoPath(*out), inputs...); err != nil {
		return err
	}
	if err := checkOutput("--out", *out, inputs...); err != nil {
		return err
	}
	if err := rt.checkCache(inputs...); err != nil {
		return err
	}
	env, err := rt.parse(fs, nil)
	if err != nil {
		return err
	}
	if *shipped != "" {
		return exportShipped(*shipped, *out, *motifs)
	}
	var ck *runfolder.Checkpoint
	if *run != "" {
		ck, _, err = runfolder.LatestCheckpoint(*run)
	} else {
		ck, err = runfolder.LoadCheckpoint(*checkpoint)
	}
	if err != nil {
		return err
	}
	defer ck.Free()
	if !*motifs {
		state := model.EncoderTensors(ck.Model)
		if err := model.SaveEncoder(*out, ck.Config.Model.Encoder, state, ck.Path, ck.Step); err != nil {
			return err
		}
		printf("encoder of %s (step %d): %d tensors in %s, architecture in %s", ck.Path, ck.Step, len(state), *out, model.EncoderInfoPath(*out))
		return nil
	}
	m, err := ck.MotifModel(env.Device)
	if err != nil {
		return err
	}
	defer m.Free()
	data := *legendData
	if data == "" {
		data = ck.Config.Data
	}
	usage, err := infer.MotifUsage(m, infer.Options{Data: data}, env)
	if err != nil {
		return fmt.Errorf("naming the motifs by their pieces in %s: %w (give the molecules with --data)", data, err)
	}
	info := model.MotifModelInfo{Name: *name, Source: ck.Path, Step: ck.Step, Data: filepath.Base(data), Legend: usage}
	if err := model.SaveMotifModel(*out, m, info); err != nil {
		return err
	}
	printf("motif model of %s (step %d, %s objective, K %d): %s, description and legend (from %s) in %s",
		ck.Path, ck.Step, m.Config.Objective(), m.Config.Motifs, *out, data, model.MotifModelInfoPath(*out))
	return nil
}

// exportShipped writes the shipped model name's encoder, or with motifs its
// motif model, to out.
func exportShipped(name, out string, motifs bool) (err error) {
	defer torch.Recover(&err)
	if motifs {
		m, info, err := model.LoadMotifModel(name, torch.CPU)
		if err != nil {
			return err
		}
		defer m.Free()
		if err := model.SaveMotifModel(out, m, info); err != nil {
			return err
		}
		printf("motif model %s: %s, description in %s", name, out, model.MotifModelInfoPath(out))
		return nil
	}
	info, state, err := model.LoadEncoder(name)
	if err != nil {
		return err
	}
	defer torch.FreeNamed(state)
	if err := model.SaveEncoder(out, info.Encoder, state, name, info.Step); err != nil {
		return err
	}
	printf("encoder of %s: %d tensors in %s, architecture in %s", name, len(state), out, model.EncoderInfoPath(out))
	return nil
}
