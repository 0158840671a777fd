package suite_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/internal/testenv"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/trainer/evaluate"
	"github.com/micrograph/micrograph/trainer/evaluate/suite"
	"github.com/micrograph/micrograph/trainer/metrics"
)

// fakeEntry is a suite entry of one replicate with the given runs' test
// ROC-AUC, on the scaffold protocol unless protocol says otherwise.
func fakeEntry(benchmark, evaluation string, pretrained bool, runs ...float64) suite.Entry {
	e := suite.Entry{Benchmark: benchmark, Evaluation: evaluation, Protocol: evaluate.ProtocolScaffold, Pretrained: pretrained}
	for _, r := range runs {
		e.RunTests = append(e.RunTests, metrics.Value(r))
	}
	return e
}

// The table of a suite run on three benchmarks, written out by hand. Measured
// averages are the means of the cells' means ± the std of the per-run
// averages, e.g. fine-tune pre-trained: runs average (70+90+60)/3 = 73.33
// and (80+80+70)/3 = 76.67, std 1.67; the paper's averages cover the same
// three benchmarks: (77.22+84.38+77.02)/3 = 79.54. Δ rows pair the runs by
// seed: fine-tune bace Δ = 10, 20 points, t = 3 with 1 degree of freedom, p =
// 1 − 2·atan(3)/π = 0.205; bbbp and clintox (feature extraction) have
// constant Δ, so p = 0; feature extraction's average Δ per pair is
// (15+25+15)/3 = 18.33 and (5+15+15)/3 = 11.67: mean 15, se 3.33, t = 4.5,
// p = 0.139, interval 15 ± 12.706·3.33 = [−27.35, +57.35].
func TestSuiteMarkdown(t *testing.T) {
	const ft, lin = suite.EvaluationFinetune, suite.EvaluationLinear
	recipe := evaluate.DefaultFinetuneConfig()
	recipe.Epochs, recipe.Patience = 20, 5
	res := &suite.Result{
		Config: suite.Config{Evaluations: []string{lin, ft}, Protocols: []evaluate.Protocol{evaluate.ProtocolScaffold}, Finetune: recipe},
		Entries: []suite.Entry{
			fakeEntry("clintox", ft, true, 0.60, 0.70),
			fakeEntry("bace", ft, true, 0.70, 0.80),
			fakeEntry("bbbp", ft, true, 0.90, 0.80),
			fakeEntry("bace", ft, false, 0.60, 0.60),
			fakeEntry("bbbp", ft, false, 0.80, 0.70),
			fakeEntry("clintox", ft, false, 0.50, 0.70),
			fakeEntry("bace", lin, true, 0.65, 0.65),
			fakeEntry("bbbp", lin, true, 0.85, 0.75),
			fakeEntry("clintox", lin, true, 0.55, 0.65),
			fakeEntry("bace", lin, false, 0.50, 0.60),
			fakeEntry("bbbp", lin, false, 0.60, 0.60),
			fakeEntry("clintox", lin, false, 0.40, 0.50),
		},
	}
	want := `| Evaluation | Protocol | Model | bace | bbbp | clintox | hiv | sider | tox21 | toxcast | Average |
| :-- | :-- | :-- | --: | --: | --: | --: | --: | --: | --: | --: |
| Fine-tune | scaffold | micrograph pre-trained | 75.00 ± 5.00 | 85.00 ± 5.00 | 65.00 ± 5.00 | — | — | — | — | 75.00 ± 1.67* |
| Fine-tune | scaffold | no pre-training | 60.00 ± 0.00 | 75.00 ± 5.00 | 60.00 ± 10.00 | — | — | — | — | 65.00 ± 1.67* |
| Fine-tune | scaffold | Δ (p) | +15.00 (p=0.205) | +10.00 (p<0.001)† | +5.00 (p=0.500) | — | — | — | — | +10.00 [+10.00, +10.00]†* |
| Fine-tune | paper's | paper MICRO-Graph | 77.22 | 84.38 | 77.02 | (75.07) | (56.67) | (77.04) | (65.23) | 79.54* |
| Fine-tune | paper's | paper Non-Pretrain | 72.80 | 82.13 | 74.98 | (73.38) | (55.65) | (76.10) | (63.34) | 76.64* |
| Feature extraction | scaffold | micrograph pre-trained | 65.00 ± 0.00 | 80.00 ± 5.00 | 60.00 ± 5.00 | — | — | — | — | 68.33 ± 0.00* |
| Feature extraction | scaffold | no pre-training | 55.00 ± 5.00 | 60.00 ± 0.00 | 45.00 ± 5.00 | — | — | — | — | 53.33 ± 3.33* |
| Feature extraction | scaffold | Δ (p) | +10.00 (p=0.295) | +20.00 (p=0.156) | +15.00 (p<0.001)† | — | — | — | — | +15.00 [-27.35, +57.35]* |
| Feature extraction | paper's | paper MICRO-Graph | 70.83 | 82.97 | 73.49 | (73.34) | (57.32) | (71.82) | (59.46) | 75.76* |
| Feature extraction | paper's | paper Non-Pretrain | — | — | — | — | — | — | — | — |

Test ROC-AUC (%), mean ± std over 2 runs (encoders × seeds × folds). No pre-training: the same architecture randomly initialised, fine-tuned from scratch or frozen.
scaffold: OGB's scaffold split, epoch or λ chosen on valid. cvK: K-fold cross-validation (the paper's cv10), epoch or λ chosen on the test ROC-AUC averaged over the folds, which is optimistic.
Δ: pre-trained − no pre-training, in points; p: two-sided paired t-test, pairs by seed; † p < 0.05. Average Δ: mean over the benchmarks [95 % t interval over the pairs].
One pre-trained encoder: its p-values count the evaluation's variance, not pre-training's; evaluate several, from pre-training runs with different seeds.
Paper rows: the paper's Tables 1 and 2; it reports no Non-Pretrain feature extraction, and its stated feature-extraction average (69.73) is not the mean of its seven figures (69.89).
Fine-tune: 20 epochs, batch 32, lr 0.001, patience 5; patience stopped 2 of 3 runs early (the earliest after 9 epochs).
\* Average over the benchmarks run here (bace, bbbp, clintox), the paper's rows included; paper figures in parentheses are for benchmarks not run.
`
	// Three fine-tuning runs of an entry, two stopped early by patience.
	res.Entries[0].Finetune = &evaluate.FinetuneResult{Runs: []evaluate.FinetuneRun{{StoppedAt: 12}, {}, {StoppedAt: 9}}}
	if got := res.Markdown(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}

	// All seven benchmarks, fine-tuning only: no stars, the paper's stated
	// averages, no feature-extraction rows.
	res = &suite.Result{Config: suite.Config{Evaluations: []string{ft}, Protocols: []evaluate.Protocol{evaluate.ProtocolScaffold}}}
	for _, b := range suite.Benchmarks {
		res.Entries = append(res.Entries, fakeEntry(b, ft, true, 0.7, 0.7), fakeEntry(b, ft, false, 0.6, 0.6))
	}
	got := res.Markdown()
	for _, line := range []string{
		"| Fine-tune | scaffold | micrograph pre-trained | 70.00 ± 0.00 | 70.00 ± 0.00 | 70.00 ± 0.00 | 70.00 ± 0.00 | 70.00 ± 0.00 | 70.00 ± 0.00 | 70.00 ± 0.00 | 70.00 ± 0.00 |\n",
		"| Fine-tune | paper's | paper MICRO-Graph | 77.22 | 84.38 | 77.02 | 75.07 | 56.67 | 77.04 | 65.23 | 73.23 |\n",
		"| Fine-tune | paper's | paper Non-Pretrain | 72.80 | 82.13 | 74.98 | 73.38 | 55.65 | 76.10 | 63.34 | 71.19 |\n",
	} {
		if !strings.Contains(got, line) {
			t.Errorf("table lacks %q:\n%s", line, got)
		}
	}
	if strings.Contains(got, "*") || strings.Contains(got, "Feature extraction |") {
		t.Errorf("all benchmarks, fine-tuning only:\n%s", got)
	}
}

// The gains of pre-training, computed by hand. One encoder, four seeds:
// bace Δ = 10, 0, 30, 10 points is TestPairedTTestHandComputed's case (p =
// 0.141, not significant); bbbp Δ = 10, 11, 9, 10: mean 10, sd 0.8165, t =
// 24.49 with 3 degrees of freedom, p = 0.000149 (significant). Their
// average per seed is 10, 5.5, 19.5, 10: mean 11.25, sd 5.895, t = 3.817, p
// = 0.0316, interval 11.25 ± 3.1824·2.9475 = [1.870, 20.630]. A cv protocol
// pairs by seed and fold; three encoders pair by encoder, each side the
// mean of its runs.
func TestSuiteGains(t *testing.T) {
	const lin = suite.EvaluationLinear
	res := &suite.Result{
		Config: suite.Config{Evaluations: []string{lin}, Protocols: []evaluate.Protocol{evaluate.ProtocolScaffold}},
		Entries: []suite.Entry{
			fakeEntry("bace", lin, true, 0.8, 0.7, 0.9, 0.6),
			fakeEntry("bace", lin, false, 0.7, 0.7, 0.6, 0.5),
			fakeEntry("bbbp", lin, true, 0.70, 0.72, 0.74, 0.76),
			fakeEntry("bbbp", lin, false, 0.60, 0.61, 0.65, 0.66),
		},
	}
	gains, averages := res.ComputeGains()
	if len(gains) != 2 || len(averages) != 1 {
		t.Fatalf("%d gains, %d averages", len(gains), len(averages))
	}
	for _, c := range []struct {
		g           suite.Gain
		benchmark   string
		delta, p    float64
		significant bool
	}{
		{gains[0], "bace", 0.125, 0.1411219, false},
		{gains[1], "bbbp", 0.10, 0.000149157, true},
		{averages[0], "average", 0.1125, 0.0316407, true},
	} {
		if c.g.Benchmark != c.benchmark || c.g.PairedBy != "seed" || c.g.Evaluation != lin || c.g.Protocol != "scaffold" ||
			math.Abs(float64(c.g.Delta)-c.delta) > 1e-12 || c.g.Test == nil || math.Abs(c.g.Test.P-c.p) > 1e-6 ||
			c.g.Significant != c.significant || len(c.g.Deltas) != 4 {
			t.Errorf("%s: %+v (test %+v), want Δ %g, p %g, significant %v", c.benchmark, c.g, c.g.Test, c.delta, c.p, c.significant)
		}
	}
	if a := averages[0].Test; math.Abs(a.Low95-0.018698779) > 1e-6 || math.Abs(a.Hi95-0.206301221) > 1e-6 {
		t.Errorf("average interval [%g, %g], want [0.018699, 0.206301]", a.Low95, a.Hi95)
	}
	table := res.Markdown()
	for _, want := range []string{
		"| Feature extraction | scaffold | Δ (p) | +12.50 (p=0.141) | +10.00 (p<0.001)† | — | — | — | — | — | +11.25 [+1.87, +20.63]†* |",
		"pairs by seed; † p < 0.05",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}

	// Cross-validation: runs pair by seed and fold.
	cv := fakeEntry("bace", lin, true, 0.8, 0.7, 0.9)
	cvRandom := fakeEntry("bace", lin, false, 0.7, 0.7, 0.6)
	cv.Protocol, cvRandom.Protocol = "cv3", "cv3"
	res = &suite.Result{Config: suite.Config{Evaluations: []string{lin}, Protocols: []evaluate.Protocol{"cv3"}},
		Entries: []suite.Entry{cv, cvRandom}}
	if gains, _ := res.ComputeGains(); len(gains) != 1 || gains[0].PairedBy != "seed×fold" || len(gains[0].Deltas) != 3 {
		t.Errorf("cv3: %+v", gains)
	}

	// Three encoders, two seeds each: Δ per encoder of the runs' means,
	// 0.75−0.65 = 0.10, 0.85−0.60 = 0.25, 0.70−0.70 = 0.
	res = &suite.Result{Config: suite.Config{Evaluations: []string{lin}, Protocols: []evaluate.Protocol{evaluate.ProtocolScaffold}}}
	for i, runs := range [][4]float64{{0.7, 0.8, 0.6, 0.7}, {0.9, 0.8, 0.6, 0.6}, {0.7, 0.7, 0.8, 0.6}} {
		pre, random := fakeEntry("bace", lin, true, runs[0], runs[1]), fakeEntry("bace", lin, false, runs[2], runs[3])
		pre.Replicate, random.Replicate = i, i
		res.Entries = append(res.Entries, pre, random)
	}
	gains, _ = res.ComputeGains()
	if len(gains) != 1 || gains[0].PairedBy != "encoder" || len(gains[0].Deltas) != 3 ||
		math.Abs(float64(gains[0].Deltas[0])-0.10) > 1e-12 || math.Abs(float64(gains[0].Deltas[1])-0.25) > 1e-12 ||
		math.Abs(float64(gains[0].Deltas[2])) > 1e-12 {
		t.Errorf("three encoders: %+v", gains)
	}
	if table := res.Markdown(); strings.Contains(table, "One pre-trained encoder") || !strings.Contains(table, "pairs by encoder") ||
		!strings.Contains(table, "| Feature extraction | scaffold | micrograph pre-trained | 76.67 ± 7.45 |") {
		t.Errorf("three encoders' table:\n%s", table)
	}
}

func TestBenchmarkOf(t *testing.T) {
	for path, want := range map[string]string{
		"../shared/data/ogb/ogbg_molbace":          "bace",
		"/data/ogbg-molbbbp/":                      "bbbp",
		"../shared/data/moleculenet/BBBP.csv":      "bbbp",
		"../shared/data/moleculenet/HIV.csv.gz":    "hiv",
		"moleculenet/toxcast.csv.gz":               "toxcast",
		"ClinTox.CSV":                              "clintox",
		"../shared/data/moleculenet/tox21.csv":     "tox21",
		"../shared/data/moleculenet/sider.csv":     "sider",
		"../shared/data/moleculenet/esol.csv":      "",
		"../shared/data/ogb/ogbg_molhiv_features2": "",
	} {
		got, err := suite.BenchmarkOf(path)
		if got != want || (err == nil) != (want != "") {
			t.Errorf("%s: %q, %v; want %q", path, got, err, want)
		}
	}
}

// A suite of linear evaluations under both protocols with two encoders on
// ogbg-molbace: eight evaluations in order, each complete; replicate i
// runs the seeds after replicate i−1's on both sides, so that an encoder
// equal to the random one its seed draws gains exactly nothing; and the
// table shows the figures.
func TestSuiteOnBace(t *testing.T) {
	bace := testenv.SharedData(t, "ogb/ogbg_molbace")
	cfg := suite.Config{
		// Encoder 0 is the random encoder of linear evaluation's first seed (42).
		EncoderPaths: []string{writeSeededEncoder(t, smallEncoder, 42), writeSeededEncoder(t, smallEncoder, 7)},
		Datasets:     []string{bace},
		Evaluations:  []string{suite.EvaluationLinear},
		Protocols:    []evaluate.Protocol{evaluate.ProtocolScaffold, "cv3"},
		Linear:       smallLinear(t, ""),
	}
	cfg.Linear.Seeds, cfg.Linear.Steps = 1, 50

	bad := cfg
	bad.Datasets = []string{bace, "elsewhere/ogbg-molbace"}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "are both bace") {
		t.Errorf("the same benchmark twice: %v", err)
	}
	bad.Datasets, bad.Evaluations = []string{bace}, []string{"linear", "probe"}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), `evaluations "probe" must be finetune or linear`) {
		t.Errorf("unknown evaluation: %v", err)
	}
	bad.Evaluations, bad.Protocols = cfg.Evaluations, []evaluate.Protocol{"scaffold", "cv1"}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), `protocols "cv1" must be scaffold or cv10`) {
		t.Errorf("unknown protocol: %v", err)
	}
	bad.Protocols, bad.EncoderPaths = cfg.Protocols, []string{cfg.EncoderPaths[0], cfg.EncoderPaths[0]}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "encoder_paths "+fmt.Sprintf("%q", cfg.EncoderPaths[0])+" is given twice") {
		t.Errorf("the same encoder twice: %v", err)
	}

	res, err := suite.Run(cfg, cpuEnv(t), suite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Entries) != 8 {
		t.Fatalf("%d entries, want 8", len(res.Entries))
	}
	i := 0
	for _, evaluation := range cfg.Evaluations {
		for _, protocol := range cfg.Protocols {
			for replicate := range 2 {
				for _, pretrained := range []bool{true, false} {
					e := res.Entries[i]
					i++
					runs := map[evaluate.Protocol]int{"scaffold": 1, "cv3": 3}[protocol]
					seed := 42 + uint64(replicate)
					r := e.Linear
					ok := r != nil && r.Pretrained == pretrained && r.Config.Encoder.Hidden == 16 && r.Protocol == protocol && r.Runs[0].Seed == seed
					if e.Benchmark != "bace" || e.Evaluation != evaluation || e.Protocol != protocol || e.Replicate != replicate ||
						e.Pretrained != pretrained || !ok || len(e.RunTests) != runs || !inUnitInterval(e.Test.Mean) {
						t.Errorf("entry %d: want %s %s replicate %d pretrained %v seed %d: %+v", i-1, evaluation, protocol, replicate, pretrained, seed, e)
					}
				}
			}
		}
	}
	if len(res.Gains) != 2 || len(res.Average) != 2 {
		t.Fatalf("%d gains, %d averages, want 2 each", len(res.Gains), len(res.Average))
	}
	for _, g := range res.Gains {
		if g.PairedBy != "encoder" || len(g.Deltas) != 2 || g.Test == nil {
			t.Errorf("gain %+v", g)
		}
		if g.Deltas[0] != 0 {
			t.Errorf("linear %s: encoder 0 is the random encoder of seed 42, yet Δ %v", g.Protocol, g.Deltas[0])
		}
	}
	table := res.Markdown()
	if !strings.Contains(table, "| Feature extraction | cv3 | Δ (p) | ") || !strings.Contains(table, "| Feature extraction | scaffold | micrograph pre-trained | ") {
		t.Errorf("table:\n%s", table)
	}
	if _, err := json.Marshal(res); err != nil {
		t.Error(err)
	}

	// A CSV benchmark whose columns cannot be read is found as the suite
	// plans its evaluations, before any run (TestSuiteKeepsTheEntriesFinishedBeforeAFailure
	// fails a run).
	broken := filepath.Join(t.TempDir(), "BBBP.csv")
	if err := os.WriteFile(broken, []byte("name,value\nethanol,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.Datasets, cfg.Protocols = []string{bace, broken}, []evaluate.Protocol{evaluate.ProtocolScaffold}
	cfg.EncoderPaths = cfg.EncoderPaths[:1]
	var progress strings.Builder
	env := cpuEnv(t)
	env.Progress = &progress
	res, err = suite.Run(cfg, env, suite.Options{})
	if err == nil || !strings.Contains(err.Error(), "BBBP.csv:1: no SMILES column") {
		t.Fatalf("a benchmark without a SMILES column: %v", err)
	}
	if res != nil || progress.Len() > 0 {
		t.Fatalf("runs were made before the broken benchmark was found: %+v\n%s", res, progress.String())
	}
}

// A suite with --random-from takes the earlier suite's runs without
// pre-training, entry for entry, and makes its own pre-trained runs; a
// suite whose settings would draw other random runs is refused.
func TestSuiteRandomFrom(t *testing.T) {
	bace := testenv.SharedData(t, "ogb/ogbg_molbace")
	cfg := suite.Config{
		EncoderPaths: []string{writeSeededEncoder(t, smallEncoder, 3), writeSeededEncoder(t, smallEncoder, 4)},
		Datasets:     []string{bace},
		Evaluations:  []string{suite.EvaluationLinear},
		Protocols:    []evaluate.Protocol{evaluate.ProtocolScaffold, "cv3"},
		Linear:       smallLinear(t, ""),
	}
	cfg.Linear.Seeds, cfg.Linear.Steps = 1, 30
	first, err := suite.Run(cfg, cpuEnv(t), suite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	b, _ := json.Marshal(first)
	if err := os.WriteFile(filepath.Join(dir, "suite.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}

	second := cfg
	second.EncoderPaths = []string{writeSeededEncoder(t, smallEncoder, 5), writeSeededEncoder(t, smallEncoder, 6)}
	second.RandomFrom = dir
	var progress strings.Builder
	env := cpuEnv(t)
	env.Progress = &progress
	res, err := suite.Run(second, env, suite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Entries) != len(first.Entries) {
		t.Fatalf("%d entries, want %d", len(res.Entries), len(first.Entries))
	}
	for i, e := range res.Entries {
		was := first.Entries[i]
		was.Outcome.Linear, e.Outcome.Linear = nil, nil // compared below through their figures
		if e.Pretrained {
			if e.Test == was.Test {
				t.Errorf("entry %d: the pre-trained run was not made again (%v)", i, e.Test)
			}
			continue
		}
		if !reflect.DeepEqual(e, was) {
			t.Errorf("entry %d: random run %+v, earlier %+v", i, e, was)
		}
	}
	if n := strings.Count(progress.String(), "taken from "+dir); n != 4 {
		t.Errorf("%d runs said to be taken, want 4:\n%s", n, progress.String())
	}

	other := second
	other.Linear.Seeds = 2
	if _, err := suite.Run(other, cpuEnv(t), suite.Options{}); err == nil || !strings.Contains(err.Error(), "random_from") || !strings.Contains(err.Error(), "evaluation settings") {
		t.Errorf("other seeds: %v", err)
	}
	other = second
	other.EncoderPaths = []string{writeSeededEncoder(t, model.EncoderConfig{Hidden: 8, Layers: 1, MLPLayers: 1, T: 1}, 5)}
	if _, err := suite.Run(other, cpuEnv(t), suite.Options{}); err == nil || !strings.Contains(err.Error(), "architecture") {
		t.Errorf("another architecture: %v", err)
	}
}

// A suite checks that every dataset can be read before its first
// evaluation, rather than failing hours in, when it reaches the missing one.
func TestSuiteChecksEveryDatasetFirst(t *testing.T) {
	bace := testenv.SharedData(t, "ogb/ogbg_molbace")
	missing := filepath.Join(t.TempDir(), "BBBP.csv")
	cfg := suite.Config{
		EncoderPaths: []string{writeSeededEncoder(t, smallEncoder, 3)},
		Datasets:     []string{bace, missing},
		Evaluations:  []string{suite.EvaluationLinear},
		Protocols:    []evaluate.Protocol{evaluate.ProtocolScaffold},
		Linear:       smallLinear(t, ""),
	}
	var progress strings.Builder
	env := cpuEnv(t)
	env.Progress = &progress
	res, err := suite.Run(cfg, env, suite.Options{})
	if err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("a missing dataset: %v", err)
	}
	if res != nil || progress.Len() > 0 {
		t.Errorf("evaluations ran before the missing dataset was found: %q", progress.String())
	}
}
