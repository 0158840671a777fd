package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/internal/testenv"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/evaluate"
	"github.com/micrograph/micrograph/trainer/evaluate/suite"
	"github.com/micrograph/micrograph/trainer/metrics"
)

// tinyEncoderFlags keep the command tests within seconds.
var tinyEncoderFlags = []string{"--hidden", "16", "--layers", "2", "--device", "cpu"}

// writeTinyEncoder exports a randomly initialised tiny encoder as
// `micrograph export` would.
func writeTinyEncoder(t *testing.T) string { return writeEncoder(t, nil) }

// writeEncoder exports a tiny encoder, first handing its tensors to alter
// when it is not nil (to damage them, say).
func writeEncoder(t *testing.T, alter func([]torch.Named)) string {
	t.Helper()
	arch := model.EncoderConfig{Hidden: 16, Layers: 2, MLPLayers: 1, T: 1}
	clf, err := model.NewClassifier(arch, 1, torch.CPU, torch.Float32)
	if err != nil {
		t.Fatal(err)
	}
	defer clf.Free()
	state := clf.EncoderState()
	if alter != nil {
		torch.NoGrad(func() { alter(state) })
	}
	path := filepath.Join(t.TempDir(), "encoder.pt")
	if err := model.SaveEncoder(path, arch, state, "test", 0); err != nil {
		t.Fatal(err)
	}
	return path
}

// Every misuse of finetune, linear-eval and suite fails with one line on
// stderr (status 2 for the command line, 1 for what it names) and leaves no
// output behind: not the result, not a temporary file.
func TestDownstreamMisuse(t *testing.T) {
	tmp := t.TempDir()
	out := filepath.Join(tmp, "out", "result.json") // in a folder of its own, to check it stays empty
	if err := os.Mkdir(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	dummy := filepath.Join(tmp, "ogbg_molbace") // a path that names a benchmark, for checks before any data is read
	if err := os.WriteFile(dummy, []byte("not a dataset"), 0o644); err != nil {
		t.Fatal(err)
	}
	encoder := writeTinyEncoder(t)
	badEncoder := filepath.Join(tmp, "bad.pt")
	if err := os.WriteFile(badEncoder, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(model.EncoderInfoPath(badEncoder), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	suiteOut := filepath.Join(filepath.Dir(out), "suite")
	fileAsDir := filepath.Join(tmp, "a-file")
	if err := os.WriteFile(fileAsDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}

	ft := func(extra ...string) []string {
		return append([]string{"finetune", "--data", dummy, "--out", out}, extra...)
	}
	lin := func(extra ...string) []string {
		return append([]string{"linear-eval", "--data", dummy, "--out", out}, extra...)
	}
	suiteArgs := func(extra ...string) []string {
		return append([]string{"suite", "--encoder", encoder, "--datasets", dummy, "--out", suiteOut}, extra...)
	}
	tests := []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"finetune", "--out", out}, 2, "micrograph finetune: missing --data (see micrograph finetune --help)"},
		{[]string{"finetune", "--data", dummy}, 2, "missing --out"},
		{ft("--protocol", "cv1"), 2, `--protocol "cv1" must be scaffold or cv10 (cvK: K-fold cross-validation, K ≥ 2)`},
		{ft("--protocol", "random"), 2, `--protocol "random"`},
		{lin("--protocol", "cv-4"), 2, `--protocol "cv-4"`},
		{ft("--seeds", "0"), 2, "--seeds 0 must be positive"},
		{ft("--epochs", "0"), 2, "--epochs 0 must be positive"},
		{ft("--batch-size", "0"), 2, "--batch-size 0 must be positive"},
		{ft("--lr", "0"), 2, "--lr 0 must be positive"},
		{ft("--dropout", "1"), 2, "--dropout 1 must be in [0, 1)"},
		{ft("--hidden", "0"), 2, "--hidden 0 must be positive"},
		{ft("--lr", "nan"), 2, "--lr NaN must be a finite number"},
		{ft("--dropout", "inf"), 2, "--dropout +Inf must be a finite number"},
		{ft("--t", "nan"), 2, "--t NaN must be a finite number"},
		{ft("--threads", "-1"), 2, "--threads -1 must not be negative"},
		{ft("--workers", "0"), 2, "--workers 0 must be positive"},
		{ft("--jobs", "-1"), 2, "--jobs -1: want 1 or more"},
		{ft("--save-top", "2"), 2, "--save-top 2 needs a folder to save the models in"},
		{ft("--save", filepath.Join(tmp, "models"), "--save-top", "11"), 2, "--save-top 11 must be at most the number of seeds, 10"},
		{ft("--save", filepath.Join(tmp, "models"), "--save-top", "-1"), 2, "--save-top -1 must not be negative"},
		{ft("--encoder", encoder, "--layers", "3"), 2, "--layers: the architecture comes from --encoder"},
		{ft("--out", filepath.Join(tmp, "missing", "result.json")), 2, "folder " + filepath.Join(tmp, "missing") + " does not exist"},
		{ft("--out", tmp), 2, "is a folder; want a file name"},
		{ft("--encoder", filepath.Join(tmp, "none.pt")), 1, "micrograph finetune: encoder " + filepath.Join(tmp, "none.pt") + ": its description"},
		{ft("--encoder", badEncoder), 1, "bad.json"},
		{ft("--data", filepath.Join(tmp, "none")), 1, "dataset " + filepath.Join(tmp, "none") + ": no such file or directory"},
		{ft("--device", "tpu"), 2, `--device "tpu" must be cpu, cuda, cuda:N or auto`},
		{[]string{"linear-eval", "--data", dummy}, 2, "micrograph linear-eval: missing --out"},
		{lin("--l2-grid", "0.1,-1"), 2, "--l2-grid -1 must hold finite values, not negative"},
		{lin("--l2-grid", "nan"), 2, "--l2-grid NaN must hold finite values, not negative"},
		{lin("--lr", "inf"), 2, "--lr +Inf must be a finite number"},
		{lin("--device", "tpu"), 2, `--device "tpu" must be`},
		{lin("--l2-grid", "strong"), 2, `invalid argument "strong" for "--l2-grid"`},
		{lin("--steps", "0"), 2, "--steps 0 must be positive"},
		{lin("--label-fractions", "0.01,0"), 2, "--label-fractions 0 must be a share of the train labels, in (0, 1]"},
		{lin("--label-fractions", "1.5"), 2, "--label-fractions 1.5 must be a share"},
		{lin("--label-fractions", "-0.2"), 2, "--label-fractions -0.2 must be a share"},
		{lin("--label-fractions", "NaN"), 2, "--label-fractions NaN must be a share"},
		{lin("--label-fractions", "0.2,1,0.2"), 2, "--label-fractions 0.2 is listed twice"},
		{lin("--label-fractions", ""), 2, `invalid argument "" for "--label-fractions"`},
		{lin("--label-fractions", "5%"), 2, `invalid argument "5%" for "--label-fractions"`},
		{lin("--dropout", "0.3"), 2, "--dropout: the frozen encoder runs in evaluation mode"},
		{lin("--encoder", encoder, "--hidden", "32"), 2, "--hidden: the architecture comes from --encoder"},
		{lin("--out", filepath.Join(tmp, "missing", "r.json")), 2, "does not exist"},
		{lin("--encoder", badEncoder), 1, "bad.json"},
		{[]string{"suite", "--datasets", dummy, "--out", suiteOut}, 2, "micrograph suite: missing --encoder"},
		{suiteArgs("--datasets", filepath.Join(tmp, "esol.csv")), 2, "cannot tell which benchmark"},
		{suiteArgs("--datasets", dummy, filepath.Join(tmp, "BACE.csv")), 2, "are both bace"},
		{suiteArgs("--evaluations", "finetune,probe"), 2, `--evaluations "probe" must be finetune or linear`},
		{suiteArgs("--protocols", "scaffold,cv1"), 2, `--protocols "cv1" must be scaffold or cv10`},
		{suiteArgs("--protocols", "cv10,cv10"), 2, `--protocols "cv10" is given twice`},
		{suiteArgs("--encoder", encoder+","+encoder), 2, "--encoder " + fmt.Sprintf("%q", encoder) + " is given twice"},
		{suiteArgs("--linear-lr", "nan"), 2, "--linear-lr NaN must be a finite number"},
		{suiteArgs("--lr", "-1"), 2, "--lr -1 must be positive"},
		{suiteArgs("--linear-steps", "0"), 2, "--linear-steps 0 must be positive"},
		{suiteArgs("--seeds", "0"), 2, "--seeds 0 must be positive"},
		{suiteArgs("--jobs", "-2"), 2, "--jobs -2: want 1 or more"},
		{suiteArgs("--out", fileAsDir), 2, "is a file; want a folder"},
		{suiteArgs("--out", filepath.Join(tmp, "missing", "suite")), 2, "does not exist"},
		{suiteArgs("--encoder", badEncoder), 1, "bad.json"},
		{[]string{"compare"}, 2, "micrograph compare: no result files"},
		{[]string{"compare", filepath.Join(tmp, "none.json")}, 1, "none.json: no such file"},
		{[]string{"compare", model.EncoderInfoPath(encoder)}, 1, "encoder.json is not a finetune or linear-eval result"},
	}
	for _, tc := range tests {
		code, stdoutText, errs := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.stderr) || strings.Count(errs, "\n") != 1 || stdoutText != "" {
			t.Errorf("%q: status %d, stderr %q, stdout %q; want status %d and one line with %q", tc.args, code, errs, stdoutText, tc.code, tc.stderr)
		}
		if left, _ := os.ReadDir(filepath.Dir(out)); len(left) > 0 {
			t.Errorf("%q left %s behind", tc.args, left[0].Name())
			os.RemoveAll(filepath.Join(filepath.Dir(out), left[0].Name()))
		}
	}

}

// finetune, linear-eval and suite on ogbg-molbace write complete results and
// print their one-line summaries (and the suite its table); a misuse found
// only once the dataset is open fails as the others do.
func TestDownstreamCommands(t *testing.T) {
	bace := testenv.SharedData(t, "ogb/ogbg_molbace")
	tmp, cache := t.TempDir(), t.TempDir()

	out := filepath.Join(tmp, "finetune.json")
	args := append([]string{"finetune", "--data", bace, "--out", out, "--protocol", "cv5000", "--cache", cache}, tinyEncoderFlags...)
	code, stdoutText, errs := runCLI(t, args...)
	if code != 2 || errs != "micrograph finetune: --protocol \"cv5000\" must have between 2 and 1513 folds, the number of molecules (see micrograph finetune --help)\n" || stdoutText != "" {
		t.Errorf("--protocol cv5000: status %d, stderr %q, stdout %q", code, errs, stdoutText)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("--protocol cv5000 wrote a result")
	}

	args = append([]string{"finetune", "--data", bace, "--out", out, "--epochs", "2", "--seeds", "1", "--cache", cache}, tinyEncoderFlags...)
	code, stdoutText, errs = runCLI(t, args...)
	if code != 0 || !strings.HasPrefix(stdoutText, "finetune ogbg_molbace, scaffold, random encoder (no pre-training): test ROC-AUC 0.") ||
		!strings.HasSuffix(stdoutText, "result in "+out+"\n") || strings.Count(stdoutText, "\n") != 1 {
		t.Fatalf("finetune: status %d, stdout %q, stderr %q", code, stdoutText, errs)
	}
	var ft struct {
		Evaluation string `json:"evaluation"`
		Protocol   string `json:"protocol"`
		Config     struct {
			Epochs  int                 `json:"epochs"`
			Encoder model.EncoderConfig `json:"encoder"`
		} `json:"config"`
		Runs []struct {
			ValidROCAUC []float64 `json:"valid_roc_auc"`
			TestROCAUC  []float64 `json:"test_roc_auc"`
			BestEpoch   int       `json:"best_epoch"`
		} `json:"runs"`
		Test  metrics.Stat `json:"test"`
		Valid metrics.Stat `json:"valid"`
	}
	readJSON(t, out, &ft)
	if ft.Evaluation != "finetune" || ft.Protocol != "scaffold" || ft.Config.Epochs != 2 || ft.Config.Encoder.Hidden != 16 || ft.Config.Encoder.Dropout != 0.5 ||
		len(ft.Runs) != 1 || len(ft.Runs[0].ValidROCAUC) != 2 || len(ft.Runs[0].TestROCAUC) != 2 || ft.Runs[0].BestEpoch < 1 || ft.Test.N != 1 {
		t.Errorf("finetune result: %+v", ft)
	}

	out = filepath.Join(tmp, "linear.json")
	args = append([]string{"linear-eval", "--data", bace, "--out", out, "--seeds", "2", "--steps", "50", "--cache", cache}, tinyEncoderFlags...)
	code, stdoutText, errs = runCLI(t, args...)
	if code != 0 || !strings.HasPrefix(stdoutText, "linear-eval ogbg_molbace, scaffold, random encoder (no pre-training): test ROC-AUC 0.") {
		t.Fatalf("linear-eval: status %d, stdout %q, stderr %q", code, stdoutText, errs)
	}
	var lin evaluate.LinearEvalResult
	readJSON(t, out, &lin)
	if lin.Evaluation != "linear" || lin.Protocol != "scaffold" || len(lin.Runs) != 2 || lin.Test.N != 2 || len(lin.Runs[1].ValidByL2) != 7 || lin.Config.Steps != 50 {
		t.Errorf("linear-eval result: %+v", lin)
	}

	// compare prints both results as rows of one table, figures in percent.
	code, stdoutText, errs = runCLI(t, "compare", filepath.Join(tmp, "finetune.json"), out)
	wantTable := "| result | dataset | evaluation | protocol | encoder | runs | test ROC-AUC (%) | valid ROC-AUC (%) |\n" +
		"|:--|:--|:--|:--|:--|--:|--:|--:|\n" +
		fmt.Sprintf("| finetune.json | ogbg_molbace | finetune | scaffold | random (no pre-training) | 1 | %.2f ± %.2f | %.2f ± %.2f |\n",
			100*ft.Test.Mean, 100*ft.Test.Std, 100*ft.Valid.Mean, 100*ft.Valid.Std) +
		fmt.Sprintf("| linear.json | ogbg_molbace | linear | scaffold | random (no pre-training) | 2 | %.2f ± %.2f | %.2f ± %.2f |\n",
			100*lin.Test.Mean, 100*lin.Test.Std, 100*lin.Valid.Mean, 100*lin.Valid.Std)
	if code != 0 || stdoutText != wantTable || errs != "" {
		t.Errorf("compare: status %d, stderr %q, stdout\n%s\nwant\n%s", code, errs, stdoutText, wantTable)
	}

	// The paper's protocol: the result records the folds, each fold's
	// figures and the λ chosen on the fold-averaged test ROC-AUC.
	cvOut := filepath.Join(tmp, "linear-cv.json")
	args = append([]string{"linear-eval", "--data", bace, "--out", cvOut, "--protocol", "cv3", "--seeds", "1", "--steps", "50", "--cache", cache}, tinyEncoderFlags...)
	code, stdoutText, errs = runCLI(t, args...)
	if code != 0 || !strings.Contains(stdoutText, "linear-eval ogbg_molbace, cv3, random encoder (no pre-training): test ROC-AUC 0.") ||
		!strings.Contains(stdoutText, "over 3 runs (chosen on the fold-averaged test ROC-AUC: optimistic)") {
		t.Fatalf("linear-eval --protocol cv3: status %d, stdout %q, stderr %q", code, stdoutText, errs)
	}
	var cv evaluate.LinearEvalResult
	readJSON(t, cvOut, &cv)
	if cv.Protocol != "cv3" || cv.Folds != 3 || cv.Dataset.Split != "cv3" || len(cv.Runs) != 3 || len(cv.Selected) != 1 ||
		cv.Runs[2].Split != "cv3-fold2" || len(cv.Runs[2].TestByL2) != 7 || cv.Runs[2].L2[0] != cv.Selected[0].L2 {
		t.Errorf("linear-eval --protocol cv3 result: %+v", cv)
	}

	dir := filepath.Join(tmp, "suite")
	code, stdoutText, errs = runCLI(t, "suite", "--encoder", writeTinyEncoder(t), "--datasets", bace, "--out", dir,
		"--evaluations", "linear", "--protocols", "scaffold,cv3", "--seeds", "2", "--linear-steps", "50", "--device", "cpu", "--cache", cache)
	if code != 0 || !strings.Contains(stdoutText, "| Feature extraction | scaffold | micrograph pre-trained | ") ||
		!strings.Contains(stdoutText, "| Feature extraction | cv3 | Δ (p) | ") || !strings.Contains(stdoutText, "suite: 4 evaluations in ") {
		t.Fatalf("suite: status %d, stdout %q, stderr %q", code, stdoutText, errs)
	}
	table, err := os.ReadFile(filepath.Join(dir, "suite.md"))
	if err != nil || !strings.HasPrefix(stdoutText, string(table)) {
		t.Errorf("suite.md (%v) is not the table printed:\n%s", err, table)
	}
	var sr suite.Result
	readJSON(t, filepath.Join(dir, "suite.json"), &sr)
	if len(sr.Entries) != 4 || sr.Entries[0].Linear == nil || !sr.Entries[0].Pretrained || sr.Entries[1].Pretrained ||
		sr.Entries[2].Protocol != "cv3" || len(sr.Entries[2].RunTests) != 6 {
		t.Errorf("suite.json: %+v", sr.Entries)
	}
	if len(sr.Gains) != 2 || sr.Gains[1].PairedBy != "seed×fold" || len(sr.Gains[1].Deltas) != 6 || sr.Gains[1].Test == nil {
		t.Errorf("suite.json gains: %+v", sr.Gains)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// compare adds, for results with label fractions, a table of test ROC-AUC
// with one column per fraction of any result, smallest first: "–" where a
// result lacks the fraction, and the labelled molecules in the header
// where every result agrees on them.
func TestCompareLabelFractions(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	stat := func(mean, std float64, n int) string {
		return fmt.Sprintf(`{"mean": %g, "std": %g, "n": %d}`, mean, std, n)
	}
	pre := write("pre.json", `{"evaluation": "linear", "protocol": "scaffold", "dataset": {"name": "synth", "split": "scaffold"}, "pretrained": true,
		"test": `+stat(0.9, 0.001, 5)+`, "valid": `+stat(0.85, 0.002, 5)+`, "by_fraction": [
		{"fraction": 0.01, "train": [16], "test": `+stat(0.61234, 0.0456, 5)+`, "valid": `+stat(0.7, 0.01, 5)+`},
		{"fraction": 1, "train": [1600], "test": `+stat(0.9, 0.001, 5)+`, "valid": `+stat(0.85, 0.002, 5)+`}]}`)
	random := write("random.json", `{"evaluation": "linear", "protocol": "scaffold", "dataset": {"name": "synth", "split": "scaffold"}, "pretrained": false,
		"test": `+stat(0.91, 0.003, 5)+`, "valid": `+stat(0.84, 0.004, 5)+`, "by_fraction": [
		{"fraction": 1, "train": [1601], "test": `+stat(0.91, 0.003, 5)+`, "valid": `+stat(0.84, 0.004, 5)+`},
		{"fraction": 0.2, "train": [320], "test": `+stat(0.875, 0.0125, 5)+`, "valid": `+stat(0.8, 0.01, 5)+`},
		{"fraction": 0.01, "train": [16], "test": `+stat(0.5, 0.1, 5)+`, "valid": `+stat(0.6, 0.02, 5)+`}]}`)
	finetune := write("ft.json", `{"evaluation": "finetune", "protocol": "scaffold", "dataset": {"name": "synth", "split": "scaffold"}, "pretrained": true,
		"test": `+stat(0.95, 0.01, 3)+`, "valid": `+stat(0.9, 0.02, 3)+`}`)

	code, out, errs := runCLI(t, "compare", pre, finetune, random)
	want := "| result | dataset | evaluation | protocol | encoder | runs | test ROC-AUC (%) | valid ROC-AUC (%) |\n" +
		"|:--|:--|:--|:--|:--|--:|--:|--:|\n" +
		"| pre.json | synth | linear | scaffold | pre-trained | 5 | 90.00 ± 0.10 | 85.00 ± 0.20 |\n" +
		"| ft.json | synth | finetune | scaffold | pre-trained | 3 | 95.00 ± 1.00 | 90.00 ± 2.00 |\n" +
		"| random.json | synth | linear | scaffold | random (no pre-training) | 5 | 91.00 ± 0.30 | 84.00 ± 0.40 |\n" +
		"\n" +
		"Test ROC-AUC (%) by share of the train labels fitted on (in brackets: molecules); valid and test parts unchanged:\n" +
		"\n" +
		"| result | dataset | encoder | runs | 1 % of train labels (16) | 20 % (320) | 100 % |\n" +
		"|:--|:--|:--|--:|--:|--:|--:|\n" +
		"| pre.json | synth | pre-trained | 5 | 61.23 ± 4.56 | – | 90.00 ± 0.10 |\n" +
		"| random.json | synth | random (no pre-training) | 5 | 50.00 ± 10.00 | 87.50 ± 1.25 | 91.00 ± 0.30 |\n"
	if code != 0 || out != want || errs != "" {
		t.Errorf("compare: status %d, stderr %q, stdout\n%s\nwant\n%s", code, errs, out, want)
	}
}

// compare given suite results sets the methods side by side (named NAME=PATH
// or after their folder), and refuses to mix them with other results.
func TestCompareSuites(t *testing.T) {
	dir := t.TempDir()
	writeSuite := func(name string, bace, bbbp float64) string {
		folder := filepath.Join(dir, name)
		if err := os.Mkdir(folder, 0o755); err != nil {
			t.Fatal(err)
		}
		var entries []string
		for k := range 2 {
			for _, side := range []struct {
				pretrained bool
				bace, bbbp float64
			}{{true, bace + 0.02*float64(k), bbbp}, {false, 0.6, 0.5}} {
				for _, b := range []struct {
					name string
					v    float64
				}{{"bace", side.bace}, {"bbbp", side.bbbp}} {
					entries = append(entries, fmt.Sprintf(`{"benchmark": %q, "evaluation": "linear", "protocol": "scaffold", "pretrained": %t, "replicate": %d, "run_tests": [%g]}`,
						b.name, side.pretrained, k, b.v))
				}
			}
		}
		body := `{"config": {"evaluations": ["linear"], "protocols": ["scaffold"]}, "entries": [` + strings.Join(entries, ", ") + `]}`
		if err := os.WriteFile(filepath.Join(folder, "suite.json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return folder
	}
	full, walk := writeSuite("suite-full", 0.7, 0.6), writeSuite("suite-rw", 0.65, 0.6)
	code, out, errs := runCLI(t, "compare", "MICRO-Graph="+full, filepath.Join(walk, "suite.json"))
	// Replicate averages: full (70+60)/2 = 65 and (72+60)/2 = 66; random walk
	// 62.5 and 63.5; the difference is 2.5 for both pairs: sd 0, p 0.
	for _, line := range []string{
		"| encoder | bace | bbbp | average | Δ vs random [95 %] | MICRO-Graph − this |\n",
		"| random encoder | 60.00 ± 0.00 | 50.00 ± 0.00 | 55.00 | — | — |\n",
		"| MICRO-Graph | 71.00 ± 1.00 | 60.00 ± 0.00 | 65.50 | +10.50 [+4.15, +16.85]† | — |\n",
		"| suite-rw | 66.00 ± 1.00 | 60.00 ± 0.00 | 63.00 | +8.00 [+1.65, +14.35]† | +2.50 (p<0.001)† |\n",
	} {
		if code != 0 || errs != "" || !strings.Contains(out, line) {
			t.Fatalf("compare suites: status %d, stderr %q, stdout\n%s\nwant a line\n%s", code, errs, out, line)
		}
	}
	other := filepath.Join(dir, "linear.json")
	if err := os.WriteFile(other, []byte(`{"evaluation": "linear"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCLI(t, "compare", full, other); code != 1 || !strings.Contains(errs, "linear.json is not a suite result") {
		t.Errorf("suite and linear-eval result: status %d, stderr %q", code, errs)
	}
}
