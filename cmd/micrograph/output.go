package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/micrograph/micrograph/internal/inputfile"
	"github.com/micrograph/micrograph/internal/samefile"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// input is a path a command reads, with the flag that named it; dataset
// says that a folder there is a dataset, which is only read, outputs included.
type input struct {
	flag, path string
	dataset    bool
}

// The outputs' rule, one check for every command that writes: no output
// lands on a run folder's own files (config.json, log.jsonl, lock and
// checkpoints/, which pretrain alone writes: beside them is fine), on any
// input of the same command (the same file under any name), or inside an
// input dataset folder. checkOutput applies it to a file, checkOutputFolder
// to a folder the command writes files into.

// checkOutput is the one check of every output file before any work: the
// path flag names must not be a folder, a device, a FIFO or any other
// non-regular file, must be no run's own file, must not be one of inputs
// nor lie inside an input dataset folder, and its folder must exist and
// take new files. Each refusal is a usage error that names the flag. Inputs
// with an empty path are skipped.
func checkOutput(flag, path string, inputs ...input) error {
	if st, err := os.Stat(path); err == nil {
		switch {
		case st.IsDir():
			return usageError{fmt.Errorf("%s %s is a folder; want a file name", flag, path)}
		case !st.Mode().IsRegular():
			return usageError{fmt.Errorf("%s %s is not a regular file (%s): want a file name", flag, path, inputfile.Kind(st.Mode()))}
		}
	}
	if err := checkPlace(flag, path, inputs); err != nil {
		return err
	}
	return checkWritableFolder(flag, path, filepath.Dir(path))
}

// checkOutputFolder is checkOutput for a folder that flag names and the
// command writes files into (whether it may exist is the command's to say):
// no run's own file or folder, no input, nothing inside an input dataset
// folder. An empty path is skipped.
func checkOutputFolder(flag, dir string, inputs ...input) error {
	if dir == "" {
		return nil
	}
	return checkPlace(flag, dir, inputs)
}

// checkPlace refuses an output path that is a run's own file (runfolder.Owning)
// or one of inputs, or lies inside an input dataset folder.
func checkPlace(flag, path string, inputs []input) error {
	if run, what := runfolder.Owning(path); run != "" {
		return usageError{fmt.Errorf("%s %s is %s of the pre-training run %s, which only pretrain writes: choose a place outside the run's config.json, log.jsonl, lock and checkpoints/", flag, path, what, run)}
	}
	for _, in := range inputs {
		if in.path == "" {
			continue
		}
		if samefile.Same(path, in.path) {
			return usageError{fmt.Errorf("%s %s is the input %s %s: writing it would replace what is read; choose another file", flag, path, in.flag, in.path)}
		}
		if in.dataset && samefile.Within(path, in.path) {
			return usageError{fmt.Errorf("%s %s is inside the input folder %s %s, which is only read; choose another place", flag, path, in.flag, in.path)}
		}
	}
	return nil
}

// checkRunInputs refuses, for pretrain --run run, an input that is the
// run folder itself or one of its own files: the run writes them.
func checkRunInputs(run string, inputs ...input) error {
	r := samefile.Resolve(run)
	for _, in := range inputs {
		if in.path == "" {
			continue
		}
		p := samefile.Resolve(in.path)
		if p == r {
			return usageError{fmt.Errorf("%s %s is the run folder --run %s, which the run writes", in.flag, in.path, run)}
		}
		if rel, err := filepath.Rel(r, p); err == nil {
			if what := runfolder.OwnFile(rel); what != "" {
				return usageError{fmt.Errorf("%s %s is %s of the run --run %s, which the run writes", in.flag, in.path, what, run)}
			}
		}
	}
	return nil
}
