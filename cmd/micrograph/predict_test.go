package main

import (
	"encoding/binary"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/internal/testenv"
	"github.com/micrograph/micrograph/trainer/evaluate"
	"github.com/micrograph/micrograph/trainer/infer"
	"github.com/micrograph/micrograph/trainer/metrics"
)

// scoreInput has an invalid SMILES (row 1, line 3) between valid ones.
const scoreInput = "name,smiles\nethanol,CCO\nring,C1CC\nphenol,c1ccccc1O\nacetanilide,CC(=O)Nc1ccccc1\n"

// pygInputs is the PyG-layout input of the docs/pytorch.md snippet for the SMILES
// given, featurised as micrograph does, as a JSON file in dir.
func pygInputs(t *testing.T, dir string, smiles []string) string {
	t.Helper()
	var rows []data.Row
	for i, s := range smiles {
		rows = append(rows, data.Row{Index: i, Line: i + 2, SMILES: s})
	}
	ds, kept, _, err := data.FeaturizeRows(rows, 1, data.Limits{})
	if err != nil || len(kept) != len(smiles) {
		t.Fatalf("featurising %q: %v (kept %v)", smiles, err, kept)
	}
	var b feed.Batch
	if err := feed.Collate(ds, ds.All(), &b); err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(map[string]any{"x": b.X, "src": b.EdgeSrc, "dst": b.EdgeDst, "edge_attr": b.EdgeAttr, "batch": b.NodeGraph})
	path := filepath.Join(dir, "inputs.json")
	if err := os.WriteFile(path, js, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// runSnippet runs the PyTorch snippet of docs/pytorch.md followed by harness (which
// reads sys.argv) and decodes the JSON its last line prints into v.
func runSnippet(t *testing.T, dir, harness string, v any, args ...string) {
	t.Helper()
	py := testenv.Python(t, "torch", "numpy")
	script := filepath.Join(dir, "snippet.py")
	if err := os.WriteFile(script, []byte(readmeSnippet(t)+harness), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := py.Command(append([]string{script}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("the docs/pytorch.md snippet failed: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), v); err != nil {
		t.Fatalf("snippet output %q: %v", out, err)
	}
}

// embed writes a .npy file numpy.load reads as float32 N×d with the input's
// row order (the invalid row NaN), each valid row equal, to 1e-5, to the
// embedding the docs/pytorch.md snippet computes in PyTorch for that molecule; a
// .csv file with --skip-invalid holds the same numbers for the valid rows,
// with their input row.
func TestEmbedMatchesReadmeSnippet(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(in, []byte(scoreInput), 0o644); err != nil {
		t.Fatal(err)
	}
	encoder := writeTinyEncoder(t)
	npy := filepath.Join(dir, "e.npy")
	code, out, errs := runCLI(t, "embed", "--encoder", encoder, "--data", in, "--out", npy, "--threads", "1")
	if code != 0 || !strings.Contains(out, "embedded 3 of 4 rows") || !strings.Contains(errs, in+":3 (row 1) \"C1CC\": SMILES Parse Error") {
		t.Fatalf("embed: status %d\n%s\n%s", code, out, errs)
	}
	inputs := pygInputs(t, dir, []string{"CCO", "c1ccccc1O", "CC(=O)Nc1ccccc1"})
	const harness = `
import sys
import numpy as np
a = np.load(sys.argv[2])
inp = json.load(open(sys.argv[3]))
x = torch.tensor(inp["x"]).view(-1, 9)
edge_index = torch.tensor([inp["src"], inp["dst"]])
edge_attr = torch.tensor(inp["edge_attr"]).view(-1, 3)
with torch.no_grad():
    e = graph_embeddings(load_encoder(sys.argv[1]), x, edge_index, edge_attr, torch.tensor(inp["batch"])).numpy()
valid = a[[0, 2, 3]]
print(json.dumps({"dtype": str(a.dtype), "shape": list(a.shape), "nan_row": bool(np.isnan(a[1]).all()),
                  "finite_rows": bool(np.isfinite(valid).all()),
                  "diff": float(np.max(np.abs(valid - e) / np.maximum(1, np.abs(e))))}))
`
	var got struct {
		Dtype      string
		Shape      []int
		NaNRow     bool `json:"nan_row"`
		FiniteRows bool `json:"finite_rows"`
		Diff       float64
	}
	runSnippet(t, dir, harness, &got, encoder, npy, inputs)
	if got.Dtype != "float32" || !slices.Equal(got.Shape, []int{4, 16}) || !got.NaNRow || !got.FiniteRows {
		t.Fatalf("numpy sees %+v, want float32 [4 16], row 1 NaN, the others finite", got)
	}
	t.Logf("largest difference from the docs/pytorch.md snippet: %.2g", got.Diff)
	if got.Diff > 1e-5 {
		t.Errorf("embed and the docs/pytorch.md snippet differ by %g", got.Diff)
	}

	csvOut := filepath.Join(dir, "e.csv")
	if code, out, errs := runCLI(t, "embed", "--encoder", encoder, "--data", in, "--out", csvOut, "--skip-invalid"); code != 0 {
		t.Fatalf("embed --skip-invalid: status %d\n%s\n%s", code, out, errs)
	}
	recs := readCSV(t, csvOut)
	if len(recs) != 4 || len(recs[0]) != 2+16 || recs[0][0] != "row" || recs[0][1] != "smiles" || recs[0][2] != "e_0" || recs[0][17] != "e_15" {
		t.Fatalf("%s: %d records, header %q", csvOut, len(recs), recs[0])
	}
	npyValues := readNPY(t, npy)
	for k, row := range []int{0, 2, 3} {
		rec := recs[k+1]
		if rec[0] != strconv.Itoa(row) {
			t.Errorf("line %d: row %q, want %d", k+2, rec[0], row)
		}
		for j := range 16 {
			v, err := strconv.ParseFloat(rec[2+j], 32)
			if err != nil || float32(v) != npyValues[row*16+j] {
				t.Errorf("row %d e_%d: CSV %q, .npy %v", row, j, rec[2+j], npyValues[row*16+j])
			}
		}
	}
}

// readCSV is every record of a CSV file.
func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// readNPY is the float32 values of a .npy file embed wrote, after its
// 128-byte header.
func readNPY(t *testing.T, path string) []float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, (len(b)-128)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[128+4*i:]))
	}
	return out
}

// predictColumn is one task's column of a predict .csv file, by input row.
func predictColumn(t *testing.T, path string, task int) map[int]float64 {
	t.Helper()
	recs := readCSV(t, path)
	out := map[int]float64{}
	for _, rec := range recs[1:] {
		row, _ := strconv.Atoi(rec[0])
		v, err := strconv.ParseFloat(rec[2+task], 64)
		if err != nil {
			t.Fatalf("%s row %s: %v", path, rec[0], err)
		}
		out[row] = v
	}
	return out
}

// A model saved by finetune --save predicts in PyTorch, through the docs/pytorch.md
// snippet's load_model, what predict writes (to 1e-5): class-1
// probabilities for the synthetic dataset's classification tasks, and, with
// the same tasks declared regression (--task-types), values in the labels'
// units; alone, a model's deviations are 0 and its member count 1.
func TestPredictMatchesReadmeSnippet(t *testing.T) {
	dir := t.TempDir()
	synth := filepath.Join(dir, "synth")
	if _, err := synthetic.Write(synth, synthetic.Options{Molecules: 120, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(in, []byte(scoreInput), 0o644); err != nil {
		t.Fatal(err)
	}
	inputs := pygInputs(t, dir, []string{"CCO", "c1ccccc1O", "CC(=O)Nc1ccccc1"})
	var regression []string
	for _, task := range synthetic.Tasks {
		regression = append(regression, task+"=regression")
	}
	for _, tc := range []struct {
		name  string
		extra []string
	}{
		{"classification", nil},
		{"regression", []string{"--task-types", strings.Join(regression, ",")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			saved := filepath.Join(dir, "model-"+tc.name)
			args := append([]string{"finetune", "--data", synth, "--out", filepath.Join(dir, tc.name+".json"), "--save", saved,
				"--seeds", "2", "--epochs", "2", "--cache", dir}, append(tinyEncoderFlags, tc.extra...)...)
			if code, out, errs := runCLI(t, args...); code != 0 || !strings.Contains(out, "saved 2 models (every seed) in "+saved) {
				t.Fatalf("finetune --save: status %d\n%s\n%s", code, out, errs)
			}
			saved = bestMember(t, saved)
			preds := filepath.Join(dir, "p-"+tc.name+".csv")
			if code, out, errs := runCLI(t, "predict", "--model", saved, "--data", in, "--out", preds); code != 0 {
				t.Fatalf("predict: status %d\n%s\n%s", code, out, errs)
			}
			recs := readCSV(t, preds)
			want := append([]string{"row", "smiles"}, synthetic.Tasks...)
			for _, task := range synthetic.Tasks {
				want = append(want, task+"_std")
			}
			if want = append(want, "members"); !slices.Equal(recs[0], want) || len(recs) != 5 {
				t.Fatalf("%s: header %q, %d records; want %q and 5", preds, recs[0], len(recs), want)
			}
			nt := len(synthetic.Tasks)
			if !slices.Equal(recs[2][2:], slices.Repeat([]string{"NaN"}, 2*nt+1)) {
				t.Errorf("the invalid row is %q, want NaN", recs[2])
			}
			for _, row := range []int{0, 2, 3} {
				if rec := recs[row+1]; !slices.Equal(rec[2+nt:], append(slices.Repeat([]string{"0"}, nt), "1")) {
					t.Errorf("row %d of one model: deviations and members %q, want 0s and 1", row, rec[2+nt:])
				}
			}
			const harness = `
import sys
inp = json.load(open(sys.argv[2]))
x = torch.tensor(inp["x"]).view(-1, 9)
edge_index = torch.tensor([inp["src"], inp["dst"]])
edge_attr = torch.tensor(inp["edge_attr"]).view(-1, 3)
with torch.no_grad():
    p = load_model(sys.argv[1])(x, edge_index, edge_attr, torch.tensor(inp["batch"]))
print(json.dumps(p.tolist()))
`
			var theirs [][]float64
			runSnippet(t, dir, harness, &theirs, saved, inputs)
			worst := 0.0
			for k, row := range []int{0, 2, 3} {
				for task := range synthetic.Tasks {
					ours, err := strconv.ParseFloat(recs[row+1][2+task], 64)
					if err != nil {
						t.Fatal(err)
					}
					if tc.name == "classification" && !(ours > 0 && ours < 1) {
						t.Errorf("row %d task %d: probability %v", row, task, ours)
					}
					worst = max(worst, math.Abs(ours-theirs[k][task])/math.Max(1, math.Abs(ours)))
				}
			}
			t.Logf("largest difference from the docs/pytorch.md snippet: %.2g", worst)
			if worst > 1e-5 {
				t.Errorf("predict and the docs/pytorch.md snippet differ by %g", worst)
			}
		})
	}
}

// Acceptance: finetune --save keeps every seed's model, an ensemble whose
// ensemble.json lists the members best valid first, each the run's model at
// its best valid epoch; predict on the test molecules of the same split
// with any member alone gives the test figure that member's run reported:
// ROC-AUC on OGB's bace, RMSE on ESOL (featurised with a scaffold split), to
// 1e-6. The runs are made side by side (--jobs 2).
func TestFinetuneSavePredictRoundTrip(t *testing.T) {
	dir := t.TempDir()
	esolCSV := filepath.Join(testenv.SharedData(t, "moleculenet"), "esol.csv")
	esol := filepath.Join(dir, "esol")
	if code, out, errs := runCLI(t, "featurize", "--csv", esolCSV, "--target-columns", "measured log solubility in mols per litre", "--out", esol); code != 0 {
		t.Fatalf("featurize: %s %s", out, errs)
	}
	for _, tc := range []struct {
		name, data string
		regression bool
	}{
		{"bace", filepath.Join(testenv.SharedData(t, "ogb"), "ogbg_molbace"), false},
		{"esol", esol, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			saved := filepath.Join(dir, "model-"+tc.name)
			result := filepath.Join(dir, tc.name+".json")
			args := append([]string{"finetune", "--data", tc.data, "--out", result, "--save", saved,
				"--seeds", "2", "--epochs", "3", "--cache", dir, "--threads", "1", "--jobs", "2"}, tinyEncoderFlags...)
			if code, out, errs := runCLI(t, args...); code != 0 {
				t.Fatalf("finetune --save: status %d\n%s\n%s", code, out, errs)
			}
			var res evaluate.FinetuneResult
			b, _ := os.ReadFile(result)
			if err := json.Unmarshal(b, &res); err != nil || res.Saved == nil {
				t.Fatalf("%s: %v (saved %v)", result, err, res.Saved)
			}
			// Every seed's model, the best valid run's first.
			var e infer.EnsembleManifest
			readJSON(t, filepath.Join(saved, infer.EnsembleFile), &e)
			if !reflect.DeepEqual(e, res.Saved.EnsembleManifest) || e.Format != "micrograph-ensemble" || e.Version != 1 || e.Selection != "every seed" ||
				e.Metric != res.Metric || len(e.Members) != 2 {
				t.Fatalf("ensemble.json %+v, the result's %+v", e, res.Saved)
			}
			for i, m := range e.Members {
				r := res.Runs[slices.IndexFunc(res.Runs, func(r evaluate.FinetuneRun) bool { return r.Seed == m.Seed })]
				if m.Dir != fmt.Sprintf("seed-%d", m.Seed) || m.Split != "scaffold" || m.Epoch != r.BestEpoch || m.Valid != r.BestValid || m.Test != r.TestAtBest {
					t.Errorf("member %d: %+v, its run's best epoch %d, valid %v, test %v", i, m, r.BestEpoch, r.BestValid, r.TestAtBest)
				}
				if i > 0 && evaluateBetter(tc.regression, float64(m.Valid), float64(e.Members[i-1].Valid)) {
					t.Errorf("member %d (valid %v) is listed after a worse one (%v)", i, m.Valid, e.Members[i-1].Valid)
				}
			}
			// Each run's epoch is its best valid one: the lowest RMSE on regression tasks.
			for _, r := range res.Runs {
				valid, test := r.ValidROCAUC, r.TestROCAUC
				if tc.regression {
					valid, test = r.ValidRMSE, r.TestRMSE
					if len(r.TestMAE) != len(test) || r.TestMAEAtBest != r.TestMAE[r.BestEpoch-1] || !(r.TestMAEAtBest <= r.TestAtBest) {
						t.Errorf("seed %d: MAE %v at best, curve %v (RMSE %v)", r.Seed, r.TestMAEAtBest, r.TestMAE, r.TestAtBest)
					}
				}
				best := 0
				for e := range valid {
					if evaluateBetter(tc.regression, float64(valid[e]), float64(valid[best])) {
						best = e
					}
				}
				if r.BestEpoch != best+1 || r.BestValid != valid[best] || r.TestAtBest != test[best] {
					t.Errorf("seed %d: best epoch %d (valid %v, test %v); the valid curve %v says %d", r.Seed, r.BestEpoch, r.BestValid, r.TestAtBest, valid, best+1)
				}
			}
			if want := map[bool]string{false: evaluate.MetricROCAUC, true: evaluate.MetricRMSE}[tc.regression]; res.Metric != want {
				t.Errorf("metric %q, want %q", res.Metric, want)
			}

			ds, _, err := data.Load(tc.data, data.LoadOptions{CacheDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			var smiles strings.Builder
			smiles.WriteString("smiles\n")
			var labels []float32
			for _, g := range ds.Split.Test {
				smiles.WriteString(`"` + strings.ReplaceAll(ds.SMILES[g], `"`, `""`) + "\"\n")
				labels = append(labels, ds.Labels[int(g)*ds.NumTasks():int(g+1)*ds.NumTasks()]...)
			}
			testCSV := filepath.Join(dir, tc.name+"-test.csv")
			os.WriteFile(testCSV, []byte(smiles.String()), 0o644)
			for _, m := range e.Members {
				preds := filepath.Join(dir, tc.name+"-"+m.Dir+"-preds.csv")
				if code, out, errs := runCLI(t, "predict", "--model", filepath.Join(saved, m.Dir), "--data", testCSV, "--out", preds, "--threads", "1"); code != 0 {
					t.Fatalf("predict: status %d\n%s\n%s", code, out, errs)
				}
				column := predictColumn(t, preds, 0)
				scores := make([]float32, len(ds.Split.Test))
				for i := range scores {
					scores[i] = float32(column[i])
				}
				var figure float64
				if tc.regression {
					_, figure, err = metrics.RMSE(labels, scores, 1)
				} else {
					// Probabilities rounded to float32 could tie where logits do not:
					// ROC-AUC is computed on the float64 column's order instead.
					figure = rocAUC64(labels, column)
				}
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s, %s: finetune reported test %.8f for the member, predict gives %.8f", tc.name, m.Dir, m.Test, figure)
				if math.Abs(figure-float64(m.Test)) > 1e-6 {
					t.Errorf("%s: predict gives test %v, finetune reported %v", m.Dir, figure, m.Test)
				}
			}
		})
	}
}

// bestMember is the folder of the first member (the best by valid) of the
// ensemble finetune --save wrote into dir.
func bestMember(t *testing.T, dir string) string {
	t.Helper()
	var e infer.EnsembleManifest
	readJSON(t, filepath.Join(dir, infer.EnsembleFile), &e)
	if len(e.Members) == 0 {
		t.Fatalf("%s: no member", dir)
	}
	return filepath.Join(dir, e.Members[0].Dir)
}

// evaluateBetter is the selection's order: higher ROC-AUC, lower RMSE.
func evaluateBetter(regression bool, a, b float64) bool {
	if regression {
		return a < b
	}
	return a > b
}

// rocAUC64 is the ROC-AUC of float64 scores (by row) against 0/1 labels,
// ties counted half: the fraction of (positive, negative) pairs ordered
// right.
func rocAUC64(labels []float32, scores map[int]float64) float64 {
	var right float64
	var pairs int
	for i, yi := range labels {
		for j, yj := range labels {
			if yi == 1 && yj == 0 {
				pairs++
				switch {
				case scores[i] > scores[j]:
					right++
				case scores[i] == scores[j]:
					right += 0.5
				}
			}
		}
	}
	return right / float64(pairs)
}

// embed and predict: --help succeeds; every misuse fails with one line on
// stderr (status 2 for the command line, 1 for what it names) and writes no
// output, not even a temporary file.
func TestScoreCommandsMisuse(t *testing.T) {
	tmp := t.TempDir()
	in := filepath.Join(tmp, "in.csv")
	if err := os.WriteFile(in, []byte(scoreInput), 0o644); err != nil {
		t.Fatal(err)
	}
	noSMILES := filepath.Join(tmp, "no-smiles.csv")
	os.WriteFile(noSMILES, []byte("name,structure\na,CCO\n"), 0o644)
	encoder := writeTinyEncoder(t)
	outDir := filepath.Join(tmp, "out") // stays empty
	if err := os.Mkdir(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	npy, csvOut := filepath.Join(outDir, "e.npy"), filepath.Join(outDir, "e.csv")
	emb := func(extra ...string) []string {
		return append([]string{"embed", "--encoder", encoder, "--data", in}, extra...)
	}
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"embed", "--help"}, 0, ""},
		{[]string{"predict", "--help"}, 0, ""},
		{[]string{"predict", "--data", in}, 2, "micrograph predict: missing --model, --out"},
		{emb("--out", filepath.Join(outDir, "e.txt")), 2, "--out " + filepath.Join(outDir, "e.txt") + ": want a .npy or .csv file"},
		{emb("--out", npy, "--skip-invalid"), 2, "--skip-invalid needs a .csv --out"},
		{emb("--out", csvOut, "--atoms", "--skip-invalid"), 2, "--skip-invalid does not go with --atoms"},
		{emb("--out", filepath.Join(outDir, "a.txt"), "--atoms"), 2, "--out " + filepath.Join(outDir, "a.txt") + ": want a .npy or .csv file"},
		{emb("--out", npy, "--batch-size", "0"), 2, "--batch-size 0 must be positive"},
		{emb("--out", npy, "--max-atoms", "0"), 2, "--max-atoms 0 must be positive"},
		{emb("--out", npy, "--device", "tpu"), 2, `--device "tpu"`},
		{emb("--out", filepath.Join(tmp, "missing", "e.npy")), 2, "folder " + filepath.Join(tmp, "missing") + " does not exist"},
		{emb("--out", npy, "extra"), 2, `unexpected argument "extra"`},
		{[]string{"embed", "--encoder", filepath.Join(tmp, "none.pt"), "--data", in, "--out", npy}, 1, "none.json"},
		{[]string{"embed", "--encoder", encoder, "--data", filepath.Join(tmp, "none.csv"), "--out", csvOut}, 1, "dataset " + filepath.Join(tmp, "none.csv") + ": no such file or directory"},
		{[]string{"embed", "--encoder", encoder, "--data", noSMILES, "--out", csvOut}, 1, `no-smiles.csv:1: no SMILES column: no column is named "smiles" or "mol" or has "smiles" in its name; the columns are ["name" "structure"] (--smiles-columns NAME names it)`},
		{[]string{"predict", "--model", tmp, "--data", in, "--out", csvOut}, 1, tmp + " holds neither ensemble.json (an ensemble) nor model.json (one saved model)"},
	}
	for _, tc := range tests {
		code, out, errs := runCLI(t, tc.args...)
		if tc.code == 0 {
			if code != 0 || !strings.HasPrefix(out, "usage: micrograph "+tc.args[0]) || !strings.Contains(out, "--data") {
				t.Errorf("%q: status %d, stdout %q", tc.args, code, out)
			}
			continue
		}
		if code != tc.code || !strings.Contains(errs, tc.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%q: status %d, stderr %q; want status %d and one line with %q", tc.args, code, errs, tc.code, tc.want)
		}
		if entries, _ := os.ReadDir(outDir); len(entries) != 0 {
			t.Fatalf("%q left %v behind", tc.args, entries)
		}
	}
}

// linear-eval on a regression task fits ridge regressions: each run keeps
// the λ of lowest valid RMSE and reports that λ's test RMSE, with MAE, and
// compare shows RMSE, refusing to mix it with ROC-AUC results.
func TestLinearEvalRegression(t *testing.T) {
	dir := t.TempDir()
	esol := filepath.Join(dir, "esol")
	if code, out, errs := runCLI(t, "featurize", "--csv", filepath.Join(testenv.SharedData(t, "moleculenet"), "esol.csv"),
		"--target-columns", "measured log solubility in mols per litre", "--out", esol); code != 0 {
		t.Fatalf("featurize: %s %s", out, errs)
	}
	result := filepath.Join(dir, "lin.json")
	args := append([]string{"linear-eval", "--data", esol, "--out", result, "--seeds", "2", "--cache", dir}, tinyEncoderFlags...)
	code, out, errs := runCLI(t, args...)
	if code != 0 || !strings.Contains(out, "test RMSE") {
		t.Fatalf("linear-eval: status %d\n%s\n%s", code, out, errs)
	}
	var res evaluate.LinearEvalResult
	b, _ := os.ReadFile(result)
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if res.Metric != evaluate.MetricRMSE || res.TestMAE == nil || res.Test.N != 2 {
		t.Fatalf("metric %q, MAE %v, %d runs", res.Metric, res.TestMAE, res.Test.N)
	}
	for _, r := range res.Runs {
		best := 0
		for g := range r.ValidByL2 {
			if r.ValidByL2[g] < r.ValidByL2[best] {
				best = g
			}
		}
		if r.L2[0] != res.Config.L2Grid[best] || r.ValidRMSE != r.ValidByL2[best] || r.TestRMSE != r.TestByL2[best] || !(r.TestMAE > 0 && r.TestMAE <= r.TestRMSE) {
			t.Errorf("seed %d: λ %v, valid %v, test %v, MAE %v; by λ valid %v test %v", r.Seed, r.L2, r.ValidRMSE, r.TestRMSE, r.TestMAE, r.ValidByL2, r.TestByL2)
		}
	}
	code, out, errs = runCLI(t, "compare", result)
	if code != 0 || !strings.Contains(out, "| test RMSE | valid RMSE |") || !strings.Contains(out, fmt.Sprintf("%.3f ± %.3f", res.Test.Mean, res.Test.Std)) {
		t.Errorf("compare: status %d\n%s\n%s", code, out, errs)
	}
	classification := filepath.Join(dir, "auc.json")
	os.WriteFile(classification, []byte(`{"evaluation": "linear", "metric": "roc_auc", "protocol": "scaffold", "dataset": {"name": "x"}}`), 0o644)
	if code, _, errs := runCLI(t, "compare", result, classification); code != 1 || !strings.Contains(errs, "compare results of one metric") {
		t.Errorf("compare of RMSE and ROC-AUC: status %d, %s", code, errs)
	}
}
