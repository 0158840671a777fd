package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// checkEncoderFile refuses, as misuse of flag, an encoder path that is a
// pre-training checkpoint or run folder rather than an exported encoder,
// saying how to export one; anything else, including a missing file, is
// left to the loader, whose errors name the file. It reads the file only
// when the encoder's description (the .json beside it) is absent.
func checkEncoderFile(flag, path string) error {
	if path == "" {
		return nil
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil
	}
	if st.IsDir() {
		if _, err := os.Stat(runfolder.ConfigPath(path)); err == nil {
			return usageError{fmt.Errorf("%s %s is a pre-training run folder, not an exported encoder: export its encoder first (micrograph export --run %s --out enc.pt) and give enc.pt", flag, path, path)}
		}
		return usageError{fmt.Errorf("%s %s is a folder; want an exported encoder (.pt with its .json)", flag, path)}
	}
	if _, err := os.Stat(model.EncoderInfoPath(path)); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if isCheckpoint(path) {
		return usageError{fmt.Errorf("%s %s is a pre-training checkpoint, not an exported encoder: export its encoder first (micrograph export --checkpoint %s --out enc.pt) and give enc.pt", flag, path, path)}
	}
	return nil
}

// isCheckpoint tells whether path is a pre-training checkpoint: it lies in
// a run's checkpoints folder, or its content names the checkpoint format
// (torch.save stores the meta strings uncompressed).
func isCheckpoint(path string) bool {
	dir := filepath.Dir(path)
	if run := filepath.Dir(dir); dir == runfolder.CheckpointDir(run) {
		if _, err := os.Stat(runfolder.ConfigPath(run)); err == nil {
			return true
		}
	}
	blob, err := os.ReadFile(path)
	return err == nil && bytes.Contains(blob, []byte(runfolder.CheckpointFormat))
}

// checkNotCorpus refuses, as misuse of flag, a --data path that is a
// pre-training corpus (featurize --shard-rows), which only pretrain reads:
// the other commands need SMILES, labels or a split, which a corpus does
// not keep.
func checkNotCorpus(flag, path string) error {
	if path != "" && data.IsCorpus(path) {
		return usageError{fmt.Errorf("%s %s is a pre-training corpus (featurize --shard-rows), which only pretrain reads: give the CSV it was made from, or an OGB dataset folder", flag, path)}
	}
	return nil
}
