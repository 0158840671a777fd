package pretrain

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
)

// CheckpointFormat names the layout of checkpoint files.
const CheckpointFormat = "micrograph-checkpoint/1"

// A checkpoint is one torch.save file (loadable in PyTorch with
// weights_only=True) holding
//
//	model.<name>    every parameter and buffer of the model
//	optim.<name>.*  Adam's moments and step counts
//	rng.<device>    every default generator's state: rng.cpu, and
//	                rng.cuda:N for each GPU (earlier files hold only the
//	                GPU the run was on)
//	meta.*          format, step, epoch, data position and config, as strings
//
// named RUNDIR/checkpoints/step-<step>.pt and written atomically.

// Checkpoint is what a checkpoint file holds, with its tensors on the CPU.
type Checkpoint struct {
	Path     string
	Step     int64         // optimiser steps done
	Position data.Position // the next batch of the data sequence
	Config   Config
	Model    []torch.Named // model.* without the prefix
	Optim    []torch.Named // optim.* without the prefix
	RNG      []torch.Named // rng.* without the prefix: "cpu", "cuda:0", …
}

// Free releases the checkpoint's tensors.
func (c *Checkpoint) Free() {
	for _, group := range [][]torch.Named{c.Model, c.Optim, c.RNG} {
		for _, n := range group {
			n.Tensor.Free()
		}
	}
}

func checkpointDir(run string) string { return filepath.Join(run, "checkpoints") }

func checkpointPath(run string, step int64) string {
	return filepath.Join(checkpointDir(run), fmt.Sprintf("step-%09d.pt", step))
}

// saveCheckpoint writes the run's state at step atomically and keeps only the
// newest keep checkpoints.
func saveCheckpoint(run string, step int64, pos data.Position, cfg Config, m *model.MicroGraph, opt interface{ State() []torch.Named }) (string, error) {
	var state []torch.Named
	for _, n := range m.Store.State() {
		state = append(state, torch.Named{Name: "model." + n.Name, Tensor: n.Tensor})
	}
	for _, n := range opt.State() {
		state = append(state, torch.Named{Name: "optim." + n.Name, Tensor: n.Tensor})
	}
	// Every generator, not only the run device's: whatever a step draws from
	// (see restore), and a state costs a few bytes (a GPU's is 16).
	rngs, err := torch.RNGStates()
	if err != nil {
		return "", err
	}
	defer func() {
		for _, n := range rngs {
			n.Tensor.Free()
		}
	}()
	for _, n := range rngs {
		state = append(state, torch.Named{Name: "rng." + n.Name, Tensor: n.Tensor})
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return "", err
	}
	meta := map[string]string{
		"meta.format": CheckpointFormat,
		"meta.step":   strconv.FormatInt(step, 10),
		"meta.epoch":  strconv.Itoa(pos.Epoch),
		"meta.batch":  strconv.Itoa(pos.Batch),
		"meta.config": string(cfgJSON),
		"meta.torch":  torch.Version(),
	}
	if err := os.MkdirAll(checkpointDir(run), 0o755); err != nil {
		return "", err
	}
	path := checkpointPath(run, step)
	if err := torch.Save(path, state, meta); err != nil {
		return "", err
	}
	return path, pruneCheckpoints(run, cfg.Keep)
}

// listCheckpoints is the run's checkpoint files, newest first.
func listCheckpoints(run string) ([]string, error) {
	entries, err := os.ReadDir(checkpointDir(run))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "step-") && strings.HasSuffix(e.Name(), ".pt") {
			paths = append(paths, filepath.Join(checkpointDir(run), e.Name()))
		}
	}
	slices.Sort(paths) // zero-padded steps sort by step
	slices.Reverse(paths)
	return paths, nil
}

// pruneCheckpoints deletes all but the newest keep checkpoints, and the
// temporary files of writes a crash interrupted.
func pruneCheckpoints(run string, keep int) error {
	paths, err := listCheckpoints(run)
	if err != nil {
		return err
	}
	for _, p := range paths[min(keep, len(paths)):] {
		if err := os.Remove(p); err != nil {
			return err
		}
	}
	stale, _ := filepath.Glob(filepath.Join(checkpointDir(run), ".step-*.tmp-*"))
	for _, p := range stale {
		os.Remove(p)
	}
	return nil
}

// LatestCheckpoint loads the newest checkpoint of a run that reads back whole
// (every record's checksum is verified). Unreadable newer files are reported
// in skipped; none at all is an error.
func LatestCheckpoint(run string) (ck *Checkpoint, skipped []string, err error) {
	paths, err := listCheckpoints(run)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range paths {
		ck, err := LoadCheckpoint(p)
		if err == nil {
			return ck, skipped, nil
		}
		skipped = append(skipped, err.Error())
	}
	if len(paths) == 0 {
		return nil, nil, fmt.Errorf("%s has no checkpoints", checkpointDir(run))
	}
	return nil, skipped, fmt.Errorf("no readable checkpoint in %s: %s", checkpointDir(run), strings.Join(skipped, "; "))
}

// LoadCheckpoint reads one checkpoint file.
func LoadCheckpoint(path string) (*Checkpoint, error) {
	state, meta, err := torch.Load(path, torch.CPU)
	if err != nil {
		return nil, err
	}
	ck := &Checkpoint{Path: path}
	fail := func(format string, args ...any) (*Checkpoint, error) {
		for _, n := range state {
			n.Tensor.Free()
		}
		return nil, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...))
	}
	if meta["meta.format"] != CheckpointFormat {
		return fail("format %q, want %q", meta["meta.format"], CheckpointFormat)
	}
	if err := json.Unmarshal([]byte(meta["meta.config"]), &ck.Config); err != nil {
		return fail("config: %v", err)
	}
	var errs []error
	number := func(key string) int64 {
		n, err := strconv.ParseInt(meta[key], 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", key, err))
		}
		return n
	}
	ck.Step = number("meta.step")
	ck.Position = data.Position{Epoch: int(number("meta.epoch")), Batch: int(number("meta.batch"))}
	if len(errs) > 0 {
		return fail("%v", errs[0])
	}
	groups := map[string]*[]torch.Named{"model.": &ck.Model, "optim.": &ck.Optim, "rng.": &ck.RNG}
	for _, n := range state {
		placed := false
		for _, prefix := range slices.Sorted(maps.Keys(groups)) {
			if name, ok := strings.CutPrefix(n.Name, prefix); ok {
				*groups[prefix] = append(*groups[prefix], torch.Named{Name: name, Tensor: n.Tensor})
				placed = true
				break
			}
		}
		if !placed {
			return fail("unexpected entry %q", n.Name)
		}
	}
	return ck, nil
}

// NewModel builds the checkpoint's model on dev with its weights.
func (c *Checkpoint) NewModel(dev torch.Device) (*model.MicroGraph, error) {
	m, err := model.New(c.Config.Model, dev, torch.Float32)
	if err != nil {
		return nil, err
	}
	if err := torch.LoadState(m.Store.State(), c.Model); err != nil {
		m.Free()
		return nil, fmt.Errorf("%s: %w", c.Path, err)
	}
	return m, nil
}
