package runfolder

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/internal/inputfile"
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
//	                rng.cuda:N for each GPU (a file may hold only the
//	                GPU the run was on); in a data-parallel run these are
//	                rank 0's, and rng.rank<r>/<device> rank r's
//	meta.*          format, step, epoch, data position (global: of the
//	                whole batch sequence), config, world size and the
//	                libtorch threads of the process that wrote it, as strings
//
// named RUNDIR/checkpoints/step-<step>.pt and written atomically.

// Checkpoint is a run's state after a step, as SaveCheckpoint writes it
// and LoadCheckpoint reads it back (with its tensors on the CPU).
type Checkpoint struct {
	Path     string        // the file; set when read
	Step     int64         // optimiser steps done
	Position feed.Position // the next batch of the data sequence
	Config   Config
	World    int // processes of the run that wrote it (1 when the file does not say)
	// Threads is libtorch's intra-op threads in the process that wrote it
	// (0 when the file does not say, as before it was recorded): on the CPU
	// a resume is bit-identical to an uninterrupted run only with as many.
	Threads int
	Model   []torch.Named // model.* without the prefix
	Optim   []torch.Named // optim.* without the prefix
	RNG     []torch.Named // rng.* without the prefix: "cpu", "cuda:0", …; every rank's (see pretrain's gatherRNG)
}

// Free releases the checkpoint's tensors.
func (c *Checkpoint) Free() {
	for _, group := range [][]torch.Named{c.Model, c.Optim, c.RNG} {
		for _, n := range group {
			n.Tensor.Free()
		}
	}
}

func CheckpointDir(run string) string { return filepath.Join(run, "checkpoints") }

func checkpointPath(run string, step int64) string {
	return filepath.Join(CheckpointDir(run), fmt.Sprintf("step-%09d.pt", step))
}

// SaveCheckpoint writes ck (its Path ignored) atomically as the run's
// checkpoint at ck.Step, keeps only the newest ck.Config.Keep checkpoints,
// and returns the file's path. ck.RNG holds every generator, not only the
// run device's: whatever a step draws from (see pretrain's restore), and a
// state costs a few bytes (a GPU's is 16).
func SaveCheckpoint(run string, ck Checkpoint) (string, error) {
	var state []torch.Named
	for _, group := range []struct {
		prefix  string
		tensors []torch.Named
	}{{"model.", ck.Model}, {"optim.", ck.Optim}, {"rng.", ck.RNG}} {
		for _, n := range group.tensors {
			state = append(state, torch.Named{Name: group.prefix + n.Name, Tensor: n.Tensor})
		}
	}
	cfgJSON, err := json.Marshal(ck.Config)
	if err != nil {
		return "", err
	}
	meta := map[string]string{
		"meta.format":  CheckpointFormat,
		"meta.step":    strconv.FormatInt(ck.Step, 10),
		"meta.epoch":   strconv.Itoa(ck.Position.Epoch),
		"meta.batch":   strconv.Itoa(ck.Position.Batch),
		"meta.config":  string(cfgJSON),
		"meta.torch":   torch.Version(),
		"meta.world":   strconv.Itoa(ck.World),
		"meta.threads": strconv.Itoa(ck.Threads),
	}
	if err := os.MkdirAll(CheckpointDir(run), 0o755); err != nil {
		return "", err
	}
	path := checkpointPath(run, ck.Step)
	if err := torch.Save(path, state, meta); err != nil {
		return "", err
	}
	remember(path, nil) // written whole and synced
	return path, pruneCheckpoints(run, ck.Config.Keep)
}

// CheckpointFile is a file of a run's checkpoint folder named as a
// checkpoint: step-<step>.pt.
type CheckpointFile struct {
	Path string
	Step int64
}

// ListCheckpoints is the one place that lists a run's checkpoint files:
// every file named step-<step>.pt, newest step first, readable or not. A
// missing folder holds none.
func ListCheckpoints(run string) ([]CheckpointFile, error) {
	entries, err := os.ReadDir(CheckpointDir(run))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var files []CheckpointFile
	for _, e := range entries {
		digits, ok := strings.CutPrefix(e.Name(), "step-")
		if digits, ok = strings.CutSuffix(digits, ".pt"); !ok || e.IsDir() {
			continue
		}
		step, err := strconv.ParseInt(digits, 10, 64)
		if err != nil || step < 0 {
			continue
		}
		files = append(files, CheckpointFile{filepath.Join(CheckpointDir(run), e.Name()), step})
	}
	slices.SortFunc(files, func(a, b CheckpointFile) int { return cmp.Compare(b.Step, a.Step) })
	return files, nil
}

// verified remembers, by path, the checkpoint files this process found
// readable or not (or wrote), with the size and time they had then, so that
// each save does not read the kept checkpoints again.
var verified sync.Map // path → verdict

type verdict struct {
	size    int64
	modTime time.Time
	err     error // nil: readable
}

// remember records what a read of path found (err nil: readable).
func remember(path string, err error) {
	if st, statErr := os.Stat(path); statErr == nil {
		verified.Store(path, verdict{st.Size(), st.ModTime(), err})
	}
}

// checkReadable is nil when path is a checkpoint that reads back whole, else
// why not; it reads the file unless this process has already, unchanged.
func checkReadable(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if v, ok := verified.Load(path); ok {
		if v := v.(verdict); v.size == st.Size() && v.modTime.Equal(st.ModTime()) {
			return v.err
		}
	}
	ck, err := LoadCheckpoint(path)
	if ck != nil {
		ck.Free()
	}
	remember(path, err)
	return err
}

// ReadableCheckpoints is the run's checkpoints that read back whole, newest
// first; report (when not nil) hears of each unreadable one, which is left
// alone and counted nowhere: not among those kept, not for resume.
func ReadableCheckpoints(run string, report func(path string, err error)) ([]string, error) {
	files, err := ListCheckpoints(run)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, f := range files {
		if err := checkReadable(f.Path); err != nil {
			if report != nil {
				report(f.Path, err)
			}
			continue
		}
		paths = append(paths, f.Path)
	}
	return paths, nil
}

// pruneCheckpoints deletes all but the newest keep readable checkpoints,
// and the temporary files of writes a crash interrupted. An unreadable file
// is never counted among the kept, nor deleted: a step-000000099.pt that
// cannot be read would otherwise win by its name and have every good
// checkpoint deleted. It is said once on stderr.
func pruneCheckpoints(run string, keep int) error {
	paths, err := ReadableCheckpoints(run, reportUnreadable)
	if err != nil {
		return err
	}
	for _, p := range paths[min(keep, len(paths)):] {
		if err := os.Remove(p); err != nil {
			return err
		}
		verified.Delete(p)
	}
	stale, _ := filepath.Glob(filepath.Join(CheckpointDir(run), ".step-*.tmp-*"))
	for _, p := range stale {
		os.Remove(p)
	}
	return nil
}

// reported is the unreadable checkpoints already said on stderr.
var reported sync.Map

// reportUnreadable says once on stderr that path is unreadable and left alone.
func reportUnreadable(path string, err error) {
	if _, done := reported.LoadOrStore(path, true); !done {
		fmt.Fprintf(os.Stderr, "micrograph: leaving the unreadable checkpoint %s alone, not counted among those kept nor resumed from: %v\n", path, err)
	}
}

// LatestCheckpoint loads the newest checkpoint of a run that reads back whole
// (every record's checksum is verified). Unreadable newer files are reported
// in skipped; none at all is an error.
func LatestCheckpoint(run string) (ck *Checkpoint, skipped []string, err error) {
	files, err := ListCheckpoints(run)
	if err != nil {
		return nil, nil, err
	}
	for _, f := range files {
		ck, err := LoadCheckpoint(f.Path)
		remember(f.Path, err)
		if err == nil {
			return ck, skipped, nil
		}
		reported.Store(f.Path, true) // said in skipped, which Prepare reports
		skipped = append(skipped, err.Error())
	}
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("%s has no checkpoints", CheckpointDir(run))
	}
	return nil, skipped, fmt.Errorf("no readable checkpoint in %s: %s", CheckpointDir(run), strings.Join(skipped, "; "))
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
		return fail("format %s, want %q", inputfile.Quote(meta["meta.format"]), CheckpointFormat)
	}
	if ck.Config, err = decodeConfig([]byte(meta["meta.config"])); err != nil {
		return fail("meta.config: %v", err)
	}
	var errs []error
	number := func(key string) int64 {
		n, err := strconv.ParseInt(meta[key], 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s is not an integer", key, inputfile.Quote(meta[key])))
		}
		return n
	}
	ck.Step = number("meta.step")
	ck.World = 1
	if _, ok := meta["meta.world"]; ok {
		ck.World = int(number("meta.world"))
	}
	if _, ok := meta["meta.threads"]; ok {
		ck.Threads = int(number("meta.threads"))
	}
	ck.Position = feed.Position{Epoch: int(number("meta.epoch")), Batch: int(number("meta.batch"))}
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
			return fail("unexpected entry %s", inputfile.Quote(n.Name))
		}
	}
	// Before anything is built from the configuration (NewModel, export).
	if err := ck.Config.Model.CheckSizes(ck.Model); err != nil {
		return fail("meta.config: %v", err)
	}
	return ck, nil
}

// NewModel builds the checkpoint's model on dev with its weights, once its
// configuration is found valid.
func (c *Checkpoint) NewModel(dev torch.Device) (*model.MicroGraph, error) {
	if err := c.Config.Model.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", c.Path, field.Within("model", err))
	}
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

// MotifModel builds the motif model of the checkpoint's model on dev
// (model.MotifModel: its encoder, motif table and assignment head), with
// their weights.
func (c *Checkpoint) MotifModel(dev torch.Device) (*model.MotifModel, error) {
	m, err := model.NewMotifModel(c.Config.Model, dev)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Path, err)
	}
	if err := m.Load(c.Model); err != nil {
		m.Free()
		return nil, fmt.Errorf("%s: %w", c.Path, err)
	}
	return m, nil
}

// IsCheckpoint tells whether path is a pre-training checkpoint: it lies in
// the checkpoints folder of a run, or its content names CheckpointFormat
// (torch.save stores the meta strings uncompressed).
func IsCheckpoint(path string) bool {
	dir := filepath.Dir(path)
	if run := filepath.Dir(dir); dir == CheckpointDir(run) && IsRun(run) {
		return true
	}
	f, err := inputfile.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	return holds(f, []byte(CheckpointFormat))
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
