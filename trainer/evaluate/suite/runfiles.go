package suite

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/micrograph/micrograph/internal/atomicfile"
	"github.com/micrograph/micrograph/internal/inputfile"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/trainer/evaluate"
)

// runFileFormat names the layout of a suite's run files.
const runFileFormat = "micrograph-suite-run/1"

// runFile is one finished run as a suite keeps it (Options.RunFiles): what
// the run is and what it gave.
type runFile struct {
	Format string          `json:"format"`
	Run    runIdentity     `json:"run"`
	Result json.RawMessage `json:"result"`
}

// runIdentity is everything a run's result depends on: its benchmark's data
// by content (data.ContentKey), the pre-trained encoder by content
// (model.EncoderKey; none for a random one), and the run's settings, seed
// and split (evaluate.RunSpec.Identity), the evaluation and protocol among
// them. The program that made the run is not part of it.
type runIdentity struct {
	Benchmark string           `json:"benchmark"`
	Data      string           `json:"data"`
	Encoder   string           `json:"encoder,omitempty"`
	Spec      evaluate.RunSpec `json:"spec"`
}

// runStore is the folder of a suite's run files; nil keeps none.
type runStore struct {
	dir      string
	encoders []string          // model.EncoderKey of each encoder, by replicate
	data     map[string]string // data.ContentKey by benchmark
}

// newRunStore is the folder dir, made with its first file, for a suite of
// the encoders encoderPaths on data (content keys by benchmark); nil when
// dir is empty.
func newRunStore(dir string, encoderPaths []string, data map[string]string) (*runStore, error) {
	if dir == "" {
		return nil, nil
	}
	s := &runStore{dir: dir, data: data}
	for _, path := range encoderPaths {
		key, err := model.EncoderKey(path)
		if err != nil {
			return nil, err
		}
		s.encoders = append(s.encoders, key)
	}
	return s, nil
}

// file is the run's identity and its file: the run in words, then the
// identity's SHA-256.
func (s *runStore) file(spec evaluate.RunSpec, e Entry) (runIdentity, string) {
	id := runIdentity{Benchmark: e.Benchmark, Data: s.data[e.Benchmark], Spec: spec.Identity()}
	side := "random"
	if e.Pretrained {
		id.Encoder, side = s.encoders[e.Replicate], "pretrained"
	}
	b, _ := json.Marshal(id)
	sum := sha256.Sum256(b)
	name := fmt.Sprintf("%s-%s-%s-%s-seed%d-split%d-%x.json", e.Benchmark, e.Evaluation, e.Protocol, side, spec.Seed, spec.Split, sum[:8])
	return id, filepath.Join(s.dir, name)
}

// read is the kept result of the run spec of entry e, or nil when the
// folder has none. A file of the run's name that holds another run is an
// error naming it.
func (s *runStore) read(spec evaluate.RunSpec, e Entry) (json.RawMessage, error) {
	if s == nil {
		return nil, nil
	}
	id, path := s.file(spec, e)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	var f runFile
	if err := inputfile.ReadJSON(path, &f); err != nil {
		return nil, err
	}
	want, _ := json.Marshal(id)
	got, _ := json.Marshal(f.Run)
	if f.Format != runFileFormat || string(got) != string(want) || len(f.Result) == 0 {
		return nil, fmt.Errorf("%s is not the run its name says (seed %d, split %d): it was edited or is another program's; remove it, and the run is made again",
			path, spec.Seed, spec.Split)
	}
	if err := spec.CheckResult(f.Result); err != nil {
		return nil, fmt.Errorf("%s: %w: it was edited or is another program's; remove it, and the run is made again", path, err)
	}
	return f.Result, nil
}

// write keeps the result of the run spec of entry e, atomically.
func (s *runStore) write(spec evaluate.RunSpec, e Entry, result json.RawMessage) error {
	if s == nil {
		return nil
	}
	id, path := s.file(spec, e)
	b, err := json.Marshal(runFile{Format: runFileFormat, Run: id, Result: result})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(b, '\n'), 0o644)
}
