package runfolder_test

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// A checkpoint reads back what was saved: its step, data position, world
// size and thread count (each a value of its own, so that no field can be
// read in another's place: the threads of a one-process, one-thread run
// equal its world size), its configuration and every tensor bit for bit. A
// file from before the world size and the threads were recorded reads as
// one process of unknown threads.
func TestCheckpointMetadataRoundTrip(t *testing.T) {
	cfg := runfolder.DefaultConfig()
	cfg.Data, cfg.Seed = "/data/mols.csv", 9
	cfg.Model.Encoder.Hidden, cfg.Model.Encoder.Layers, cfg.Model.Motifs = 8, 2, 3
	m, err := model.New(cfg.Model, torch.CPU, torch.Float32)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	rng, err := torch.RNGStates()
	if err != nil {
		t.Fatal(err)
	}
	defer torch.FreeNamed(rng)
	run := t.TempDir()
	saved := runfolder.Checkpoint{Step: 1234, Position: feed.Position{Epoch: 3, Batch: 17}, Config: cfg, World: 2, Threads: 5,
		Model: m.Store.State(), RNG: rng}
	path, err := runfolder.SaveCheckpoint(run, saved)
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(run, "checkpoints", "step-000001234.pt") {
		t.Errorf("saved as %s", path)
	}
	ck, err := runfolder.LoadCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Free()
	if ck.Path != path || ck.Step != 1234 || ck.Position != saved.Position || ck.World != 2 || ck.Threads != 5 {
		t.Errorf("read back step %d at %v, world %d, threads %d; saved 1234 at %v, world 2, threads 5", ck.Step, ck.Position, ck.World, ck.Threads, saved.Position)
	}
	if !reflect.DeepEqual(ck.Config, cfg) {
		t.Errorf("configuration read back\n%+v\nsaved\n%+v", ck.Config, cfg)
	}
	same := func(what string, got, want []torch.Named) {
		if len(got) != len(want) {
			t.Fatalf("%s: %d tensors, saved %d", what, len(got), len(want))
		}
		for i := range want {
			g, w := got[i].Tensor, want[i].Tensor
			if got[i].Name != want[i].Name || !slices.Equal(g.Shape(), w.Shape()) || g.DType() != w.DType() || bitsOf(t, g) != bitsOf(t, w) {
				t.Errorf("%s: %s read back differs from %s as saved", what, got[i].Name, want[i].Name)
			}
		}
	}
	same("model", ck.Model, saved.Model)
	same("rng", ck.RNG, saved.RNG)

	// A file of the format's first version: no meta.world, no meta.threads.
	old := filepath.Join(t.TempDir(), "old.pt")
	meta := map[string]string{"meta.format": runfolder.CheckpointFormat, "meta.step": "7", "meta.epoch": "1", "meta.batch": "2"}
	if b, err := jsonOf(cfg); err != nil {
		t.Fatal(err)
	} else {
		meta["meta.config"] = b
	}
	var state []torch.Named
	for _, n := range m.Store.State() {
		state = append(state, torch.Named{Name: "model." + n.Name, Tensor: n.Tensor})
	}
	if err := torch.Save(old, state, meta); err != nil {
		t.Fatal(err)
	}
	ck2, err := runfolder.LoadCheckpoint(old)
	if err != nil {
		t.Fatal(err)
	}
	defer ck2.Free()
	if ck2.Step != 7 || ck2.Position != (feed.Position{Epoch: 1, Batch: 2}) || ck2.World != 1 || ck2.Threads != 0 {
		t.Errorf("an old file reads as step %d at %v, world %d, threads %d; want 7 at {1 2}, world 1, threads 0", ck2.Step, ck2.Position, ck2.World, ck2.Threads)
	}
}

// bitsOf is a tensor's values as their bits, in a comparable form.
func bitsOf(t *testing.T, x *torch.Tensor) string {
	switch x.DType() {
	case torch.Float32:
		var b []uint32
		for _, v := range torch.ToSlice[float32](x) {
			b = append(b, math.Float32bits(v))
		}
		return fmt.Sprint(b)
	case torch.Int64:
		return fmt.Sprint(torch.ToSlice[int64](x))
	case torch.Uint8:
		return fmt.Sprint(torch.ToSlice[uint8](x))
	}
	t.Fatalf("no comparison for %v", x.DType())
	return ""
}

// jsonOf is v as JSON.
func jsonOf(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
