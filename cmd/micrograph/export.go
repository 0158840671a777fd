package main

import (
	"fmt"
	"strings"

	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

func runExport(args []string) error {
	fs := newFlags("export", "(--run RUNDIR | --checkpoint FILE) --out encoder.pt",
		"Writes the pre-trained encoder's weights (PyTorch state_dict names, loadable with\n"+
			"torch.load(path, weights_only=True)) to --out, and its architecture to the .json next to it.")
	run := fs.String("run", "", "run folder: its newest readable checkpoint")
	checkpoint := fs.String("checkpoint", "", "a checkpoint file")
	out := fs.String("out", "", "encoder file to write (.pt); the description goes to the same name with .json")
	if err := parseFlags(fs, args, "out"); err != nil {
		return err
	}
	if (*run == "") == (*checkpoint == "") {
		return usageError{fmt.Errorf("give exactly one of --run and --checkpoint")}
	}
	if !strings.HasSuffix(*out, ".pt") {
		return usageError{fmt.Errorf("--out %s: want a .pt file", *out)}
	}
	inputs := []input{{"--checkpoint", *checkpoint, false}}
	if err := checkOutput("--out", *out, inputs...); err != nil {
		return err
	}
	// The description is written beside the weights: refused now, not after them.
	if err := checkOutput("--out "+*out+": its description", model.EncoderInfoPath(*out), inputs...); err != nil {
		return err
	}
	var ck *runfolder.Checkpoint
	var err error
	if *run != "" {
		ck, _, err = runfolder.LatestCheckpoint(*run)
	} else {
		ck, err = runfolder.LoadCheckpoint(*checkpoint)
	}
	if err != nil {
		return err
	}
	defer ck.Free()
	state := model.EncoderTensors(ck.Model)
	if err := model.SaveEncoder(*out, ck.Config.Model.Encoder, state, ck.Path, ck.Step); err != nil {
		return err
	}
	printf("encoder of %s (step %d): %d tensors in %s, architecture in %s", ck.Path, ck.Step, len(state), *out, model.EncoderInfoPath(*out))
	return nil
}
