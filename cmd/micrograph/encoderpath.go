package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/internal/inputfile"
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
