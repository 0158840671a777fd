package model_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
)

// CheckSizes passes every model's own weights, for each shape of encoder
// (MLPs of 1 and 3 layers, a learned temperature, a bond encoder per layer),
// and names the setting whenever one size differs from the weights: it
// reads the sizes from the tensors NewDeeperGCN, New and NewClassifier
// make, so a change of their layout that it does not follow fails here.
func TestCheckSizes(t *testing.T) {
	scope(t)
	encoders := []model.EncoderConfig{
		{Hidden: 8, Layers: 1, MLPLayers: 1, T: 1},
		{Hidden: 6, Layers: 3, MLPLayers: 3, T: 1, LearnT: true},
		{Hidden: 4, Layers: 2, MLPLayers: 2, T: 1, BondPerLayer: true},
	}
	for _, enc := range encoders {
		cfg := model.DefaultConfig()
		cfg.Encoder, cfg.Motifs = enc, 5
		m, err := model.New(cfg, torch.CPU, torch.Float32)
		if err != nil {
			t.Fatal(err)
		}
		clf, err := model.NewClassifier(enc, 3, torch.CPU, torch.Float32)
		if err != nil {
			t.Fatal(err)
		}
		state, clfState := m.Store.State(), clf.Store.State()
		if err := cfg.CheckSizes(state); err != nil {
			t.Errorf("%+v: its own model: %v", enc, err)
		}
		if err := enc.CheckSizes(m.EncoderState(), ""); err != nil {
			t.Errorf("%+v: its own encoder: %v", enc, err)
		}
		if err := model.CheckClassifierSizes(enc, 3, clfState); err != nil {
			t.Errorf("%+v: its own classifier: %v", enc, err)
		}
		wrong := []struct {
			change func(*model.Config)
			want   string
		}{
			{func(c *model.Config) { c.Encoder.Hidden++ }, "encoder.hidden"},
			{func(c *model.Config) { c.Encoder.Layers++ }, "encoder.layers"},
			{func(c *model.Config) { c.Encoder.Layers-- }, "encoder.layers"},
			{func(c *model.Config) { c.Encoder.MLPLayers++ }, "encoder.mlp_layers"},
			{func(c *model.Config) { c.Encoder.LearnT = !c.Encoder.LearnT }, fmt.Sprintf("encoder.learn_t %v differs from the weights, which hold", !enc.LearnT)},
			{func(c *model.Config) { c.Encoder.BondPerLayer = !c.Encoder.BondPerLayer }, fmt.Sprintf("encoder.bond_per_layer %v differs from the weights, which hold", !enc.BondPerLayer)},
			{func(c *model.Config) { c.Motifs = 1000000 }, "motifs 1000000 differs from the weights, which have 5 (motif_embeddings is"},
		}
		for _, w := range wrong {
			c := cfg
			w.change(&c)
			if err := c.CheckSizes(state); err == nil || !strings.HasPrefix(err.Error(), w.want) {
				t.Errorf("%+v changed to %+v: %v, want %q", enc, c.Encoder, err, w.want)
			}
			if c.Motifs != cfg.Motifs {
				continue
			}
			if err := model.CheckClassifierSizes(c.Encoder, 3, clfState); err == nil || !strings.HasPrefix(err.Error(), w.want) {
				t.Errorf("classifier %+v: %v, want %q", c.Encoder, err, w.want)
			}
		}
		if err := model.CheckClassifierSizes(enc, 4, clfState); err == nil || !strings.HasPrefix(err.Error(), "tasks 4 differs from the weights, which have 3") {
			t.Errorf("4 tasks: %v", err)
		}
		m.Free()
		clf.Free()
	}
}

// A model whose weights cannot be allocated is an error naming the size
// setting at fault (it used to be libtorch's message alone, "CPU memory
// pool: out of memory allocating 481036337152 bytes" for a hidden size of
// 10⁹), and what was made of it is freed.
func TestOutOfMemoryNamesTheSetting(t *testing.T) {
	scope(t)
	const huge = 1 << 50 // more bytes than any address space maps, times 4
	small := model.EncoderConfig{Hidden: 8, Layers: 2, MLPLayers: 1, T: 1}
	tests := []struct {
		name  string
		build func() error
		want  string
	}{
		{"hidden", func() error {
			cfg := model.DefaultConfig()
			cfg.Encoder.Hidden = huge
			_, err := model.New(cfg, torch.CPU, torch.Float32)
			return err
		}, "encoder.hidden 1125899906842624 makes weights that do not fit in memory ("},
		{"motifs", func() error {
			cfg := model.DefaultConfig()
			cfg.Encoder, cfg.Motifs = small, huge
			_, err := model.New(cfg, torch.CPU, torch.Float32)
			return err
		}, "motifs 1125899906842624 makes weights that do not fit in memory ("},
		{"classifier hidden", func() error {
			c := small
			c.Hidden = huge
			_, err := model.NewClassifier(c, 2, torch.CPU, torch.Float32)
			return err
		}, "encoder.hidden 1125899906842624 makes weights that do not fit in memory ("},
		{"tasks", func() error {
			_, err := model.NewClassifier(small, huge, torch.CPU, torch.Float32)
			return err
		}, "tasks 1125899906842624 makes weights that do not fit in memory ("},
	}
	// Live handles and leaked ones together: another test's leak that the
	// collector frees meanwhile moves one from the first count to the second.
	handles := func() int64 { return torch.LiveTensors() + torch.LeakedTensors() }
	for _, tc := range tests {
		before := handles()
		err := tc.build()
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		if after := handles(); after != before {
			t.Errorf("%s: %d tensor handles live or leaked after the failure, %d before", tc.name, after, before)
		}
	}
}

// A motif model's description whose sizes are not its weights' is refused
// naming the file and the setting, by LoadMotifModel and by LoadEncoder,
// before a model of those sizes is built.
func TestMotifModelDescriptionSizes(t *testing.T) {
	scope(t)
	cfg := model.DefaultConfig()
	cfg.Encoder.Hidden, cfg.Encoder.Layers, cfg.Motifs = 8, 1, 4
	mm, err := model.NewMotifModel(cfg, torch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer mm.Free()
	path := filepath.Join(t.TempDir(), "m.pt")
	if err := model.SaveMotifModel(path, mm, model.MotifModelInfo{Name: "test-v0"}); err != nil {
		t.Fatal(err)
	}
	desc := model.MotifModelInfoPath(path)
	original, err := os.ReadFile(desc)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		edit func(m map[string]any)
		want string
	}{
		{func(m map[string]any) { m["encoder"].(map[string]any)["layers"] = 1000000 }, "model.encoder.layers 1000000 differs from the weights, which have 1"},
		{func(m map[string]any) { m["motifs"] = 1000000 }, "model.motifs 1000000 differs from the weights, which have 4"},
	} {
		var info map[string]any
		if err := json.Unmarshal(original, &info); err != nil {
			t.Fatal(err)
		}
		tc.edit(info["model"].(map[string]any))
		b, _ := json.Marshal(info)
		if err := os.WriteFile(desc, b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err := model.LoadMotifModel(path, torch.CPU)
		if err == nil || !strings.HasPrefix(err.Error(), desc+": "+tc.want) {
			t.Errorf("LoadMotifModel: %v, want %q", err, desc+": "+tc.want)
		}
		if strings.Contains(tc.want, "encoder") {
			_, state, err := model.LoadEncoder(path)
			torch.FreeNamed(state)
			if err == nil || !strings.HasPrefix(err.Error(), desc+": "+tc.want) {
				t.Errorf("LoadEncoder: %v, want %q", err, desc+": "+tc.want)
			}
		}
	}
}
