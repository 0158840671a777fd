package infer

import (
	"encoding/binary"
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/internal/testenv"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/runenv"
)

// ensembleArch is the members' architecture in these tests.
var ensembleArch = model.EncoderConfig{Hidden: 8, Layers: 2, MLPLayers: 1, T: 1}

// saveMember saves, in the new folder dir, a randomly initialised model of
// arch (seeded seed) with tasks.
func saveMember(t *testing.T, dir string, arch model.EncoderConfig, seed uint64, tasks []Task) {
	t.Helper()
	torch.ManualSeed(seed)
	clf, err := model.NewClassifier(arch, len(tasks), torch.CPU, torch.Float32)
	if err != nil {
		t.Fatal(err)
	}
	defer clf.Free()
	m, err := NewSavedModel(arch, tasks, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := SaveModel(dir, m, clf.Store.State()); err != nil {
		t.Fatal(err)
	}
}

// writeManifest writes dir/ensemble.json listing the member folders.
func writeManifest(t *testing.T, dir, metric string, members ...string) {
	t.Helper()
	man := EnsembleManifest{Format: EnsembleFormat, Version: EnsembleVersion, Selection: "every seed", Metric: metric}
	for i, m := range members {
		man.Members = append(man.Members, EnsembleMember{Dir: m, Seed: uint64(i + 1), Split: "scaffold", Epoch: 3, Valid: 0.7, Test: 0.6})
	}
	b, _ := json.Marshal(man)
	if err := os.WriteFile(filepath.Join(dir, EnsembleFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// readPredictions is a predict .csv file: its header, and its values by
// input row (the keys row and smiles taken off).
func readPredictions(t *testing.T, path string) ([]string, [][]float64) {
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
	var rows [][]float64
	for i, rec := range recs[1:] {
		if rec[0] != strconv.Itoa(i) {
			t.Fatalf("%s: line %d is row %s", path, i+2, rec[0])
		}
		row := make([]float64, len(rec)-2)
		for j, s := range rec[2:] {
			if row[j], err = strconv.ParseFloat(s, 64); err != nil {
				t.Fatal(err)
			}
		}
		rows = append(rows, row)
	}
	return recs[0], rows
}

// mixedTasks are a classification task and a regression task, each member
// with its own standardisation of the second.
func mixedTasks(mean, std float64) []Task {
	return []Task{{Name: "active", Type: data.Classification}, {Name: "logS", Type: data.Regression, Mean: mean, Std: std}}
}

// An ensemble's prediction of a molecule is, per task, the mean and the
// population standard deviation of its members' predictions (each member
// alone an ensemble of one: deviation 0, one member), computed here
// independently, two-pass, from each member's own predict output: the
// probability for the classification task, the value in the label's units
// after each member's own standardisation for the regression task. The
// rejected row is NaN throughout; the .npy file holds the same float64
// numbers N×(2T+1).
func TestPredictEnsembleOfMembers(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(in, []byte("smiles\nCCO\nC1CC\nc1ccccc1O\nCC(=O)Nc1ccccc1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ens := filepath.Join(dir, "ens")
	members := []string{"seed-1", "seed-2", "seed-3"}
	stats := [][2]float64{{-2, 1.5}, {-3, 0.5}, {1, 2}}
	for i, m := range members {
		saveMember(t, filepath.Join(ens, m), ensembleArch, uint64(10+i), mixedTasks(stats[i][0], stats[i][1]))
	}
	writeManifest(t, ens, MetricROCAUC, members...)
	opt := Options{Data: in, RDKitWorkers: 1}

	var alone [][][]float64 // by member, row, column
	for _, m := range members {
		out := filepath.Join(dir, m+".csv")
		e, _, err := Predict(filepath.Join(ens, m), opt, runenv.Default(), out)
		if err != nil {
			t.Fatal(err)
		}
		if e.Manifest != nil || len(e.Members) != 1 {
			t.Fatalf("%s alone: manifest %v, %d members", m, e.Manifest, len(e.Members))
		}
		header, rows := readPredictions(t, out)
		if want := []string{"row", "smiles", "active", "logS", "active_std", "logS_std", "members"}; !slices.Equal(header, want) {
			t.Fatalf("header %q, want %q", header, want)
		}
		for i, r := range rows {
			if i != 1 && (r[2] != 0 || r[3] != 0 || r[4] != 1 || !(r[0] > 0 && r[0] < 1)) {
				t.Errorf("%s alone, row %d: %v; want a probability, deviations 0 and one member", m, i, r)
			}
		}
		alone = append(alone, rows)
	}

	out := filepath.Join(dir, "ens.csv")
	e, rep, err := Predict(ens, opt, runenv.Default(), out)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Members) != 3 || e.Manifest == nil || rep.Rows != 4 || rep.Invalid != 1 {
		t.Fatalf("%d members, report %+v", len(e.Members), rep)
	}
	_, rows := readPredictions(t, out)
	if len(rows) != 4 {
		t.Fatalf("%d rows", len(rows))
	}
	for i, r := range rows {
		if i == 1 {
			if slices.ContainsFunc(r, func(v float64) bool { return !math.IsNaN(v) }) {
				t.Errorf("the rejected row is %v, want NaN", r)
			}
			continue
		}
		for task := range 2 {
			var mean, ss float64
			for k := range members {
				mean += alone[k][i][task]
			}
			mean /= 3
			for k := range members {
				ss += (alone[k][i][task] - mean) * (alone[k][i][task] - mean)
			}
			std := math.Sqrt(ss / 3)
			if math.Abs(r[task]-mean) > 1e-12*math.Max(1, math.Abs(mean)) || math.Abs(r[2+task]-std) > 1e-12*math.Max(1, std) {
				t.Errorf("row %d task %d: mean %v std %v, from the members %v and %v", i, task, r[task], r[2+task], mean, std)
			}
			if !(std > 1e-6) {
				t.Errorf("row %d task %d: the members agree (std %v): the test shows nothing", i, task, std)
			}
		}
		if r[4] != 3 {
			t.Errorf("row %d: %v members", i, r[4])
		}
	}

	npy := filepath.Join(dir, "ens.npy")
	if _, _, err := Predict(ens, opt, runenv.Default(), npy); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(npy)
	if err != nil {
		t.Fatal(err)
	}
	if header := string(b[:128]); !strings.Contains(header, "'descr': '<f8'") || !strings.Contains(header, "'shape': (4, 5)") {
		t.Fatalf(".npy header %q", header)
	}
	for i, r := range rows {
		for j, v := range r {
			got := math.Float64frombits(binary.LittleEndian.Uint64(b[128+8*(5*i+j):]))
			if got != v && !(math.IsNaN(got) && math.IsNaN(v)) {
				t.Errorf(".npy [%d,%d] = %v, .csv %v", i, j, got, v)
			}
		}
	}
}

// Ten members that are the same model give a deviation of exactly 0 and a
// mean equal, bit for bit, to the model's own prediction.
func TestPredictIdenticalMembers(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(in, []byte("smiles\nCCO\nc1ccccc1O\nCC(=O)Nc1ccccc1\nCCN(CC)CC\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ens := filepath.Join(dir, "ens")
	saveMember(t, filepath.Join(ens, "a"), ensembleArch, 5, mixedTasks(0.3, 1.7))
	var members []string
	for i := range 10 {
		name := "copy-" + strconv.Itoa(i)
		testenv.CopyTree(t, filepath.Join(ens, "a"), filepath.Join(ens, name))
		members = append(members, name)
	}
	writeManifest(t, ens, MetricROCAUC, members...)
	opt := Options{Data: in, RDKitWorkers: 1}
	if _, _, err := Predict(filepath.Join(ens, "a"), opt, runenv.Default(), filepath.Join(dir, "a.csv")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Predict(ens, opt, runenv.Default(), filepath.Join(dir, "ens.csv")); err != nil {
		t.Fatal(err)
	}
	_, one := readPredictions(t, filepath.Join(dir, "a.csv"))
	_, all := readPredictions(t, filepath.Join(dir, "ens.csv"))
	for i := range one {
		if one[i][0] != all[i][0] || one[i][1] != all[i][1] || all[i][2] != 0 || all[i][3] != 0 || all[i][4] != 10 {
			t.Errorf("row %d: ensemble %v, the model alone %v", i, all[i], one[i])
		}
	}
}

// An ensemble folder that cannot be read as one is refused with one line
// naming the file or the member: another format, no members, a member
// folder outside the ensemble's or listed twice or missing, members that
// disagree on the tasks, their types or the architecture, a metric that is
// not the tasks'.
func TestLoadEnsembleRefuses(t *testing.T) {
	dir := t.TempDir()
	classes := []Task{{Name: "p", Type: data.Classification}}
	other := model.EncoderConfig{Hidden: 16, Layers: 2, MLPLayers: 1, T: 1}
	members := map[string]struct {
		arch  model.EncoderConfig
		tasks []Task
	}{
		"ok-1":    {ensembleArch, classes},
		"ok-2":    {ensembleArch, classes},
		"renamed": {ensembleArch, []Task{{Name: "q", Type: data.Classification}}},
		"typed":   {ensembleArch, []Task{{Name: "p", Type: data.Regression, Std: 1}}},
		"wider":   {other, classes},
	}
	store := filepath.Join(dir, "store")
	for name, m := range members {
		saveMember(t, filepath.Join(store, name), m.arch, 1, m.tasks)
	}
	tests := []struct {
		name     string
		manifest string // ensemble.json
		want     string
	}{
		{"format", `{"format": "micrograph-model/1", "version": 1, "members": [{"dir": "ok-1"}], "metric": "roc_auc"}`, `ensemble.json: format "micrograph-model/1" version 1, want "micrograph-ensemble" version 1`},
		{"version", `{"format": "micrograph-ensemble", "version": 2, "members": [{"dir": "ok-1"}], "metric": "roc_auc"}`, "version 2, want"},
		{"no members", `{"format": "micrograph-ensemble", "version": 1, "members": [], "metric": "roc_auc"}`, "ensemble.json: the ensemble lists no members"},
		{"outside", `{"format": "micrograph-ensemble", "version": 1, "members": [{"dir": "../store/ok-1"}], "metric": "roc_auc"}`, `member 1: folder "../store/ok-1" is not a folder inside the ensemble's`},
		{"absolute", `{"format": "micrograph-ensemble", "version": 1, "members": [{"dir": "/tmp"}], "metric": "roc_auc"}`, `member 1: folder "/tmp" is not a folder inside`},
		{"itself", `{"format": "micrograph-ensemble", "version": 1, "members": [{"dir": "."}], "metric": "roc_auc"}`, `member 1: folder "." is not a folder inside`},
		{"twice", `{"format": "micrograph-ensemble", "version": 1, "members": [{"dir": "ok-1"}, {"dir": "./ok-1"}], "metric": "roc_auc"}`, `member 2: folder "./ok-1" is listed twice`},
		{"metric", `{"format": "micrograph-ensemble", "version": 1, "members": [{"dir": "ok-1"}], "metric": "auc"}`, `metric "auc", want "roc_auc" or "rmse"`},
		{"metric of other tasks", `{"format": "micrograph-ensemble", "version": 1, "members": [{"dir": "ok-1"}], "metric": "rmse"}`, `ensemble.json: metric "rmse", but the members' tasks are classification, selected on roc_auc`},
		{"missing member", `{"format": "micrograph-ensemble", "version": 1, "members": [{"dir": "ok-1"}, {"dir": "gone"}], "metric": "roc_auc"}`, "member gone: model "},
		{"other task", `{"format": "micrograph-ensemble", "version": 1, "members": [{"dir": "ok-1"}, {"dir": "renamed"}], "metric": "roc_auc"}`, `member renamed has the tasks ["q" (classification)], but member ok-1 has ["p" (classification)]`},
		{"other type", `{"format": "micrograph-ensemble", "version": 1, "members": [{"dir": "ok-1"}, {"dir": "typed"}], "metric": "roc_auc"}`, `member typed has the tasks ["p" (regression)], but member ok-1 has ["p" (classification)]`},
		{"other architecture", `{"format": "micrograph-ensemble", "version": 1, "members": [{"dir": "ok-1"}, {"dir": "ok-2"}, {"dir": "wider"}], "metric": "roc_auc"}`, "member wider has the architecture {Hidden:16"},
		{"not JSON", `{"format": "micrograph-ensemble",`, "ensemble.json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ens := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			testenv.CopyTree(t, store, ens)
			if err := os.WriteFile(filepath.Join(ens, EnsembleFile), []byte(tc.manifest), 0o644); err != nil {
				t.Fatal(err)
			}
			e, err := LoadEnsemble(ens, torch.CPU)
			if err == nil {
				e.Free()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%v, want one line with %q", err, tc.want)
			}
		})
	}
	e, err := LoadEnsemble(filepath.Join(store, "ok-1"), torch.CPU)
	if err != nil || len(e.Members) != 1 || e.Manifest != nil {
		t.Fatalf("a saved-model folder: %v", err)
	}
	e.Free()
}

// Members may differ in what does not change what they compute together:
// their weights, the dropout they were trained with (evaluation mode runs
// none) and each regression task's standardisation. Such an ensemble loads
// with every member.
func TestLoadEnsembleAcceptsWhatMembersMayDifferIn(t *testing.T) {
	ens := filepath.Join(t.TempDir(), "ens")
	dropped := ensembleArch
	dropped.Dropout = 0.5
	members := []struct {
		dir  string
		arch model.EncoderConfig
		seed uint64
		mean float64 // of the regression task's labels
	}{
		{"first", ensembleArch, 1, 0},
		{"other-weights", ensembleArch, 2, 0},
		{"other-dropout", dropped, 1, 0},
		{"other-standardisation", ensembleArch, 1, -4},
	}
	var dirs []string
	for _, m := range members {
		saveMember(t, filepath.Join(ens, m.dir), m.arch, m.seed, mixedTasks(m.mean, 1))
		dirs = append(dirs, m.dir)
	}
	writeManifest(t, ens, MetricROCAUC, dirs...)
	e, err := LoadEnsemble(ens, torch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Free()
	if len(e.Members) != len(members) {
		t.Errorf("loaded %d members, want %d", len(e.Members), len(members))
	}
}

// Every member runs in the precision asked, not only the first: an
// ensemble's bfloat16 prediction is the mean of its members' own bfloat16
// predictions, and the second member's bfloat16 prediction differs from its
// float32 one (else the test could not tell them apart).
func TestPredictEnsembleMembersInTheAskedPrecision(t *testing.T) {
	if err := torch.CheckBFloat16(torch.CPU); err != nil {
		t.Skipf("bfloat16 products: %v", err)
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(in, []byte("smiles\nCCO\nc1ccccc1O\nCC(=O)Nc1ccccc1\nCCN(CC)CC\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ens := filepath.Join(dir, "ens")
	members := []string{"seed-1", "seed-2"}
	for i, m := range members {
		saveMember(t, filepath.Join(ens, m), ensembleArch, uint64(20+i), mixedTasks(0, 1))
	}
	writeManifest(t, ens, MetricROCAUC, members...)
	predictions := func(folder string, p model.Precision) [][]float64 {
		out := filepath.Join(dir, strings.ReplaceAll(folder, "/", "-")+"-"+string(p)+".csv")
		if _, _, err := Predict(filepath.Join(ens, folder), Options{Data: in, RDKitWorkers: 1, Precision: p}, runenv.Default(), out); err != nil {
			t.Fatal(err)
		}
		_, rows := readPredictions(t, out)
		return rows
	}
	first, second := predictions("seed-1", model.BF16), predictions("seed-2", model.BF16)
	together := predictions(".", model.BF16)
	secondFP32 := predictions("seed-2", model.FP32)
	moved := false
	for i := range together {
		for task := range 2 {
			if want := (first[i][task] + second[i][task]) / 2; math.Abs(together[i][task]-want) > 1e-12*math.Max(1, math.Abs(want)) {
				t.Errorf("row %d task %d: the bf16 ensemble predicts %v, its members in bf16 %v and %v", i, task, together[i][task], first[i][task], second[i][task])
			}
			moved = moved || second[i][task] != secondFP32[i][task]
		}
	}
	if !moved {
		t.Error("the second member predicts the same in bf16 as in fp32: the test shows nothing")
	}
}
