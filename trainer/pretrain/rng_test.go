package pretrain

import (
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/optim"
	"github.com/micrograph/micrograph/torch/testdevice"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

var stepData struct {
	once sync.Once
	ds   *data.Dataset
	err  error
}

// stepDataset is a small synthetic dataset, made once per test binary.
func stepDataset(t *testing.T) *data.Dataset {
	t.Helper()
	stepData.once.Do(func() {
		dir, err := os.MkdirTemp("", "micrograph-rng-")
		if err != nil {
			stepData.err = err
			return
		}
		path := filepath.Join(dir, "synth")
		if _, err := synthetic.Write(path, synthetic.Options{Molecules: 200, Seed: 3}); err != nil {
			stepData.err = err
			return
		}
		stepData.ds, stepData.err = data.Open(path, data.OpenOptions{CacheDir: filepath.Join(dir, "cache")})
	})
	if stepData.err != nil {
		t.Fatal(stepData.err)
	}
	return stepData.ds
}

// stepRun is a pre-training run's state in memory: model, optimiser and
// data stream, driven by the trainer's own step.
type stepRun struct {
	*pretrainer
	indices []int32
}

// newStepRun builds the model and optimiser of cfg as Run does (seeded,
// then initialised); its batches start at start.
func newStepRun(t *testing.T, cfg runfolder.Config, dev torch.Device, start feed.Position) *stepRun {
	t.Helper()
	ds := stepDataset(t)
	torch.ManualSeed(cfg.Seed)
	m, err := model.New(cfg.Model, dev, torch.Float32)
	if err != nil {
		t.Fatal(err)
	}
	adam := optim.NewAdam(m.Store.Trainable(), cfg.LR)
	indices, _ := data.PretrainFilter(ds, ds.All(), cfg.Model.Eta)
	loader, err := feed.NewLoader(feed.LoaderConfig{
		Dataset: ds, Indices: indices, BatchSize: cfg.BatchSize, Shuffle: true, Seed: cfg.Seed,
		DropLast: true, Start: start, Workers: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &stepRun{pretrainer: &pretrainer{cfg: cfg, dev: dev, procs: alone{}, model: m, adam: adam, loader: loader}, indices: indices}
	t.Cleanup(func() {
		loader.Close()
		adam.Free()
		m.Free()
	})
	return r
}

// checkpoint is the run's state after step, as a single process saves it.
func (r *stepRun) checkpoint(cfg runfolder.Config, step int64, rng []torch.Named) runfolder.Checkpoint {
	return runfolder.Checkpoint{Step: step, Position: r.loader.Position(), Config: cfg, World: 1,
		Model: r.model.Store.State(), Optim: r.adam.State(), RNG: rng}
}

// outcome is everything a step leaves behind, as bits: its losses, every
// parameter's gradient, and the model's state after the update (parameters
// and batch-norm statistics).
type outcome []namedBits

type namedBits struct {
	name string
	bits []uint64
}

// run takes the next batch and does one pre-training step.
func (r *stepRun) run(t *testing.T) outcome {
	t.Helper()
	b, err := r.loader.Next()
	if err != nil {
		t.Fatal(err)
	}
	values, _, err := r.step(b, false)
	if err != nil {
		t.Fatal(err)
	}
	r.loader.Release(b)
	s := torch.NewScope()
	defer s.Close()
	var out outcome
	add := func(name string, x *torch.Tensor) {
		var bits []uint64
		if x != nil {
			for _, v := range torch.ToSlice[float64](x.ToDType(torch.Float64).To(torch.CPU, false)) {
				bits = append(bits, math.Float64bits(v))
			}
		}
		out = append(out, namedBits{name, bits})
	}
	add("losses", values)
	values.Free()
	for _, v := range r.model.Store.Trainable() {
		add("grad "+v.Name, v.Tensor.Grad())
	}
	for _, n := range r.model.Store.State() {
		add(n.Name, n.Tensor)
	}
	return out
}

// diff names the first entry in which two outcomes differ ("" if none).
func (o outcome) diff(p outcome) string {
	for i := range o {
		if o[i].name != p[i].name || !slices.Equal(o[i].bits, p[i].bits) {
			return o[i].name
		}
	}
	return ""
}

// stepConfigs exercise every random draw a pre-training step can make:
// dropout, the motif sampler's perturbations, and the two ablation samplers.
func stepConfigs() []struct {
	name string
	set  func(*model.Config)
} {
	return []struct {
		name string
		set  func(*model.Config)
	}{
		{"dropout only", func(c *model.Config) { c.Encoder.Dropout, c.PDrop, c.PAdd = 0.3, 0, 0 }},
		{"motif perturbations only", func(c *model.Config) { c.Encoder.Dropout, c.PDrop, c.PAdd = 0, 0.2, 0.2 }},
		{"random-walk sampler", func(c *model.Config) {
			c.Encoder.Dropout, c.Sampler, c.SubgraphsPerGraph = 0, model.SamplerRandomWalk, 2
		}},
		{"k-hop sampler", func(c *model.Config) { c.Encoder.Dropout, c.Sampler, c.SubgraphsPerGraph = 0, model.SamplerKHop, 2 }},
	}
}

// smallStepConfig is a pre-training configuration of a few milliseconds a
// step.
func smallStepConfig(dev torch.Device) runfolder.Config {
	cfg := runfolder.DefaultConfig()
	cfg.Model.Encoder.Hidden, cfg.Model.Encoder.Layers, cfg.Model.Motifs = 16, 2, 4
	cfg.Data, cfg.BatchSize, cfg.Seed = "synth", 16, 11 // Data: a name only; stepDataset is the data
	return cfg
}

// A checkpoint carries every generator a pre-training step draws from: a
// step run after saving one, and the same step run after resuming from it
// in a new model, give bit-identical losses, gradients and parameters, for
// every random part of the method. Advancing any one generator the step
// draws from changes the step, so each one matters and is restored; and a
// stateful source of randomness the checkpoint missed would make the replay
// differ.
func TestCheckpointReplaysEveryRandomDrawOfAStep(t *testing.T) {
	dev := testdevice.Get(t)
	testdevice.Deterministic(t)
	for _, tc := range stepConfigs() {
		t.Run(tc.name, func(t *testing.T) {
			cfg := smallStepConfig(dev)
			tc.set(&cfg.Model)
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			r := newStepRun(t, cfg, dev, feed.Position{})
			r.run(t) // Adam's moments and the generators move off their start
			path, err := runfolder.SaveCheckpoint(dir, r.checkpoint(cfg, 1, processRNG(t)))
			if err != nil {
				t.Fatal(err)
			}
			want := r.run(t)

			// resume builds a new run from the checkpoint as Run does.
			resume := func() *stepRun {
				ck, err := runfolder.LoadCheckpoint(path)
				if err != nil {
					t.Fatal(err)
				}
				defer ck.Free()
				var names []string
				for _, n := range ck.RNG {
					names = append(names, n.Name)
				}
				var generators []string
				for _, d := range torch.Generators() {
					generators = append(generators, d.String())
				}
				if !slices.Equal(names, generators) {
					t.Fatalf("the checkpoint holds generators %v, want %v", names, generators)
				}
				s := newStepRun(t, cfg, dev, ck.Position)
				missing, err := restore(ck, s.model, s.adam, dev, 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(missing) > 0 {
					t.Fatalf("restore found no state for %v", missing)
				}
				return s
			}
			if d := resume().run(t).diff(want); d != "" {
				t.Fatalf("the resumed step differs in %s", d)
			}

			drawnFrom := 0
			for _, g := range torch.Generators() {
				s := resume()
				torch.Rand([]int64{1}, torch.Options{DType: torch.Float32, Device: g}).Free()
				d := s.run(t).diff(want)
				if d != "" {
					drawnFrom++
				}
				switch {
				case g == dev && d == "":
					t.Errorf("advancing the %s generator left the step unchanged: its draws come from elsewhere", g)
				case g != dev && d != "":
					t.Logf("the step also draws from the %s generator (%s changed)", g, d)
				}
			}
			if drawnFrom == 0 {
				t.Error("the step draws from no generator")
			}
		})
	}
}

// Checkpoints from other machines or older versions resume: states of GPUs
// this process lacks are skipped, and generators the checkpoint has no state
// for are reported (they continue from the run's seed); a malformed state is an
// error naming the file and the generator.
func TestRestoreToleratesForeignAndMissingGenerators(t *testing.T) {
	dev := testdevice.Get(t)
	cfg := smallStepConfig(dev)
	r := newStepRun(t, cfg, dev, feed.Position{})
	path, err := runfolder.SaveCheckpoint(t.TempDir(), r.checkpoint(cfg, 0, processRNG(t)))
	if err != nil {
		t.Fatal(err)
	}
	absentGPU := fmt.Sprintf("cuda:%d", torch.CUDADeviceCount()+3)
	stepGenerators := []string{"cpu"}
	if dev.IsCUDA() {
		stepGenerators = append(stepGenerators, dev.String())
	}
	tests := []struct {
		name        string
		edit        func(states []torch.Named) []torch.Named
		wantMissing []string
		wantErr     string
	}{
		{"as saved", func(s []torch.Named) []torch.Named { return s }, nil, ""},
		{"no generator states", func([]torch.Named) []torch.Named { return nil }, stepGenerators, ""},
		{"a GPU this process lacks", func(s []torch.Named) []torch.Named {
			return append(s, torch.Named{Name: absentGPU, Tensor: s[0].Tensor})
		}, nil, ""},
		{"a malformed state", func(s []torch.Named) []torch.Named {
			return append([]torch.Named{{Name: "cpu", Tensor: torch.Zeros([]int64{3}, torch.Options{DType: torch.Uint8})}}, s[1:]...)
		}, nil, "generator cpu"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			scope := torch.NewScope()
			defer scope.Close()
			ck, err := runfolder.LoadCheckpoint(path)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Free()
			saved := ck.RNG
			ck.RNG = tc.edit(slices.Clone(saved))
			defer func() { ck.RNG = saved }() // Free releases the loaded tensors
			s := newStepRun(t, cfg, dev, ck.Position)
			missing, err := restore(ck, s.model, s.adam, dev, 0)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), path) {
					t.Fatalf("error %v, want one naming %s and %q", err, path, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(missing, tc.wantMissing) {
				t.Errorf("missing %v, want %v", missing, tc.wantMissing)
			}
		})
	}
}

// randomSources are the places in the code that draw random numbers, each
// with why the checkpoint replays it. Adding one fails
// TestEveryRandomSourceIsCaptured until it is listed here, after checking
// that what it draws from is in the checkpoint (torch.RNGStates, or the data
// position).
var randomSources = map[string]string{
	// Go packages of math/rand or crypto/rand, by file.
	"data/feed/loader.go":             "each epoch's shuffle is a function of --seed and the epoch; the checkpoint's data position replays it",
	"data/split.go":                   "dataset splits, made once from a seed; not in a pre-training step",
	"data/synthetic/synthetic.go":     "the synthetic dataset, made once from a seed; not in a pre-training step",
	"trainer/evaluate/labels.go":      "linear evaluation's label subsets, drawn from the run's seed; not in a pre-training step",
	"trainer/evaluate/linearprobe.go": "the fine-tuning probe's held-out tenth, drawn from the run's seed; not in a pre-training step",
	"trainer/diagnose/diagnose.go":    "the diagnosis's molecule sample, drawn once from --seed; not in a pre-training step",
	"trainer/evaluate/downstream.go":  "cross-validation folds, made once from a seed; not in a pre-training step",
	"internal/testenv/ports.go":       "the tests' choice of a port for their jobs; never in the program",
	"model/released.go":               "the released objective's host draws: a PCG seeded each step by two torch.Rand draws on the CPU generator (rng.cpu)",
	"model/sampler.go":                "host samplers draw only from the *rand.Rand they are given (SampleInput.RNG: model/released.go's)",
	"ops/sample/sample.go":            "walks and balls, drawn only from the *rand.Rand they are given (model/released.go's)",
	"ops/sample/spectral.go":          "k-means starts, drawn only from the *rand.Rand they are given (model/released.go's)",

	// libtorch random ops and generator calls in the shims, by file and call.
	"torch/shim/kernels/dropout.cpp: defaultGenerator(": "the CPU dropout kernel's seed, drawn from the CPU generator (rng.cpu)",
	"torch/shim/kernels/dropout.cpp: check_generator<":  "the same draw",
	"torch/shim/kernels/dropout.cpp: random64(":         "the same draw",
	"torch/shim/train.cpp: at::dropout":                 "dropout elsewhere (GPU: the GPU's Philox state, rng.cuda:N)",
	"torch/shim/tensor.cpp: at::rand":                   "torch.Rand, on its device's generator",
	"torch/shim/tensor.cpp: .uniform_(":                 "FillUniform (initialisation), on its device's generator",
	"torch/shim/tensor.cpp: .normal_(":                  "FillNormal (initialisation), on its device's generator",
	"torch/shim/train.cpp: defaultGenerator(":           "reading and setting the default generators' states",
	"torch/shim/train.cpp: at::bernoulli":               "torch.Bernoulli (the motif sampler's perturbations), on its device's generator",
}

// shimDraw matches libtorch random ops and generator calls in C++ and CUDA.
var shimDraw = regexp.MustCompile(`\b(defaultGenerator\(|getDefaultCUDAGenerator\(|check_generator<|random64\(|mt19937\w*|minstd_rand\w*|random_device|curand\w*|[Pp]hilox\w*|s?rand\(|at::(rand|randn|randint|randperm|bernoulli|dropout|native_dropout|multinomial|normal|poisson|rrelu)\b)|\.(uniform_|normal_|bernoulli_|random_|exponential_|geometric_|cauchy_|log_normal_)\(`)

// Every place in the code that draws random numbers is one the checkpoint
// replays: Go files importing a random package, and shim calls into
// libtorch's generators or generators of their own, are listed in
// randomSources with the reason, and nothing else draws.
func TestEveryRandomSourceIsCaptured(t *testing.T) {
	root := "../.." // go test runs in the package folder
	if _, err := os.Stat(filepath.Join(root, "trainer", "pretrain", "rng_test.go")); err != nil {
		t.Skipf("the source tree is not at %s (a test binary run elsewhere): %v", root, err)
	}
	found := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if name := d.Name(); rel != "." && (strings.HasPrefix(name, ".") || name == "third_party" || name == "build") {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			// A link to a folder (build/ on another disk, say) is not
			// walked, as go build ./... does not walk it; nor is a
			// dangling link read.
			if info, err := os.Stat(path); err != nil || info.IsDir() {
				return nil
			}
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		switch ext := filepath.Ext(path); {
		case ext == ".go" && !strings.HasSuffix(path, "_test.go"):
			for _, pkg := range []string{`"math/rand"`, `"math/rand/v2"`, `"crypto/rand"`} {
				if strings.Contains(string(src), pkg) {
					found[filepath.ToSlash(rel)] = true
				}
			}
		case strings.Contains(filepath.ToSlash(rel), "/shim/") && slices.Contains([]string{".cpp", ".cu", ".h", ".cuh"}, ext):
			for _, line := range strings.Split(string(src), "\n") {
				if code, _, _ := strings.Cut(line, "//"); code != "" {
					for _, m := range shimDraw.FindAllString(code, -1) {
						found[fmt.Sprintf("%s: %s", filepath.ToSlash(rel), m)] = true
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range slices.Sorted(maps.Keys(found)) {
		if _, ok := randomSources[s]; !ok {
			t.Errorf("new random source %q: make sure its state is in the checkpoint (torch.RNGStates or the data position), then list it in randomSources", s)
		}
	}
	for s := range randomSources {
		if !found[s] {
			t.Errorf("randomSources lists %q, which is no longer in the code: remove it", s)
		}
	}
}

// processRNG is this process's generator states, freed with the test.
func processRNG(t *testing.T) []torch.Named {
	t.Helper()
	states, err := torch.RNGStates()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range states {
			n.Tensor.Free()
		}
	})
	return states
}

// rankOf is the processes of rank r of a job, for what depends on the rank
// alone (seeding).
type rankOf struct {
	alone
	r int
}

func (p rankOf) Rank() int { return p.r }

// Each rank of a data-parallel run draws the stream docs/method.md §3.3
// names, not merely one that differs from the others': rank 0's generator
// is where a one-process run's is once its model is built (it draws what
// one process draws), and rank r's is a fresh generator seeded --seed +
// r·0x9E3779B97F4A7C15, whatever the model's initialisation drew before.
func TestRanksDrawTheirDocumentedStreams(t *testing.T) {
	cfg := smallStepConfig(torch.CPU)
	cfg.Model.Encoder.Dropout = 0.3
	state := func(procs processes) []uint8 {
		se := &session{cfg: cfg, dev: torch.CPU, procs: procs}
		m, adam, err := se.newModel()
		if err != nil {
			t.Fatal(err)
		}
		defer m.Free()
		defer adam.Free()
		for _, n := range processRNG(t) {
			if n.Name == "cpu" {
				return torch.ToSlice[uint8](n.Tensor)
			}
		}
		t.Fatal("no CPU generator")
		return nil
	}
	fresh := func(seed uint64) []uint8 {
		torch.ManualSeed(seed)
		for _, n := range processRNG(t) {
			if n.Name == "cpu" {
				return torch.ToSlice[uint8](n.Tensor)
			}
		}
		return nil
	}
	one := state(alone{})
	if got := state(rankOf{r: 0}); !slices.Equal(got, one) {
		t.Error("rank 0's generator is not where one process's is once the model is built")
	}
	if slices.Equal(one, fresh(cfg.Seed)) {
		t.Fatal("building the model drew nothing: the test cannot tell rank 0 from a reseeded generator")
	}
	for r := 1; r <= 2; r++ {
		if got := state(rankOf{r: r}); !slices.Equal(got, fresh(cfg.Seed+uint64(r)*0x9E3779B97F4A7C15)) {
			t.Errorf("rank %d's generator is not a fresh one seeded --seed + %d·0x9E3779B97F4A7C15", r, r)
		}
	}
}
