package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/internal/inputfile"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// defaultModel is the shipped model embed and explain use without --encoder
// or --model.
const defaultModel = "micrograph-molhiv-v1"

// encoderHelp describes --encoder wherever a pre-trained encoder is taken.
const encoderHelp = "pre-trained encoder: a shipped model's name (" + defaultModel + ", docs/model-card.md), or a .pt file\n" +
	"from micrograph export with its .json beside it (an encoder or a motif model)"

// encoderInputs are the files an encoder reference names, for checkOutput:
// none for a shipped model's name.
func encoderInputs(ref string) []input {
	if ref == "" || model.IsModelName(ref) {
		return nil
	}
	return []input{{"--encoder", ref, false}, {"--encoder", model.EncoderInfoPath(ref), false}}
}

// encoderError makes a reference to no shipped model misuse of flag (exit
// 2), naming the known ones; other errors are the file's.
func encoderError(flag string, err error) error {
	var unknown *model.UnknownModelError
	if errors.As(err, &unknown) {
		return usageError{fmt.Errorf("%s %w", flag, err)}
	}
	return err
}

// checkEncoderFile refuses, as misuse of flag, an encoder path that is a
// pre-training checkpoint or run folder rather than an exported encoder,
// saying how to export one; anything else, including a missing file, is
// left to the loader, whose errors name the file. It reads the file only
// when the encoder's description (the .json beside it) is absent.
func checkEncoderFile(flag, path string) error {
	if path == "" || model.IsModelName(path) {
		return encoderError(flag, checkModelName(path))
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil
	}
	if st.IsDir() {
		if runfolder.IsRun(path) {
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

// checkModelName is nil for no reference or a shipped model's name.
func checkModelName(ref string) error {
	if ref == "" || slices.Contains(model.ShippedModels(), ref) {
		return nil
	}
	return &model.UnknownModelError{Name: ref}
}

// isCheckpoint tells whether path is a pre-training checkpoint: it lies in
// a run's checkpoints folder, or its content names the checkpoint format
// (torch.save stores the meta strings uncompressed).
func isCheckpoint(path string) bool {
	dir := filepath.Dir(path)
	if run := filepath.Dir(dir); dir == runfolder.CheckpointDir(run) && runfolder.IsRun(run) {
		return true
	}
	f, err := inputfile.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	return holds(f, []byte(runfolder.CheckpointFormat))
}

// holds tells whether r's bytes contain s, reading them in pieces.
func holds(r io.Reader, s []byte) bool {
	buf := make([]byte, 1<<20+len(s))
	kept := 0 // bytes of the previous piece kept, where s may begin
	for {
		n, err := io.ReadFull(r, buf[kept:])
		if bytes.Contains(buf[:kept+n], s) {
			return true
		}
		if err != nil {
			return false
		}
		kept = copy(buf, buf[kept+n-(len(s)-1):kept+n])
	}
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
