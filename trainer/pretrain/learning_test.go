package pretrain_test

import (
	"path/filepath"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/metrics"
	"github.com/micrograph/micrograph/trainer/pretrain"
	"github.com/micrograph/micrograph/trainer/report"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// A short pre-training on the synthetic dataset lowers the total loss and
// every part, and its atom-to-motif assignment agrees with the planted
// functional groups better than a randomly initialised model's (normalised
// mutual information over the atoms of planted groups).
func TestPretrainingLearnsPlantedGroups(t *testing.T) {
	dir := t.TempDir()
	folder := filepath.Join(dir, "synth")
	if _, err := synthetic.Write(folder, synthetic.Options{Molecules: 1200, Seed: 2}); err != nil {
		t.Fatal(err)
	}
	cfg := runfolder.DefaultConfig()
	cfg.Data = folder
	cfg.Model.Encoder.Hidden, cfg.Model.Encoder.Layers, cfg.Model.Motifs = 64, 3, 16
	cfg.BatchSize, cfg.Epochs, cfg.CheckpointEvery = 64, 6, 1000
	cfg.Seed = 1
	env := testEnv(t)
	env.Threads = 2
	run := filepath.Join(dir, "run")
	if _, err := pretrain.Run(run, cfg, env, pretrain.Options{}); err != nil {
		t.Fatal(err)
	}
	records, err := runfolder.ReadLog(run)
	if err != nil {
		t.Fatal(err)
	}
	mean := func(rs []runfolder.LogRecord, part func(runfolder.LogRecord) metrics.Value) float64 {
		var s float64
		for _, r := range rs {
			s += float64(part(r))
		}
		return s / float64(len(rs))
	}
	first, last := records[:10], records[len(records)-10:]
	for _, p := range []struct {
		name string
		get  func(runfolder.LogRecord) metrics.Value
	}{
		{"loss", func(r runfolder.LogRecord) metrics.Value { return r.Loss }},
		{"node_mot", func(r runfolder.LogRecord) metrics.Value { return r.Part("node_mot") }},
		{"mot_sub", func(r runfolder.LogRecord) metrics.Value { return r.Part("mot_sub") }},
		{"reg", func(r runfolder.LogRecord) metrics.Value { return r.Part("reg") }},
		{"contra", func(r runfolder.LogRecord) metrics.Value { return r.Part("contra") }},
	} {
		a, b := mean(first, p.get), mean(last, p.get)
		t.Logf("%s: first 10 steps %.4f, last 10 steps %.4f", p.name, a, b)
		if !(b < a) {
			t.Errorf("%s did not decrease: %.4f → %.4f", p.name, a, b)
		}
	}

	ds, _, err := data.Load(folder, data.LoadOptions{CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	graphs := ds.All()[:400]
	var groups []int
	for _, g := range graphs {
		for a := ds.NodePtr[g]; a < ds.NodePtr[g+1]; a++ {
			groups = append(groups, int(ds.AtomGroup[a]))
		}
	}
	agreement := func(m *model.MicroGraph) float64 {
		motifs, err := report.AtomMotifs(m, ds, graphs, 128, env.Device)
		if err != nil {
			t.Fatal(err)
		}
		var a, b []int
		for i, g := range groups {
			if g >= 0 { // linker atoms belong to no group
				a, b = append(a, motifs[i]), append(b, g)
			}
		}
		return metrics.NMI(a, b)
	}
	ck, _, err := runfolder.LatestCheckpoint(run)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Free()
	trained, err := ck.NewModel(env.Device)
	if err != nil {
		t.Fatal(err)
	}
	defer trained.Free()
	torch.ManualSeed(99)
	random, err := model.New(cfg.Model, env.Device, torch.Float32)
	if err != nil {
		t.Fatal(err)
	}
	defer random.Free()
	nmiTrained, nmiRandom := agreement(trained), agreement(random)
	t.Logf("NMI of atom motifs with planted groups: trained %.4f, random initialisation %.4f", nmiTrained, nmiRandom)
	if nmiTrained < nmiRandom+0.05 {
		t.Errorf("pre-training did not improve motif/group agreement enough: %.4f vs %.4f", nmiTrained, nmiRandom)
	}
}
