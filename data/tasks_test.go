package data

import (
	"encoding/csv"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/internal/testenv"
)

// labelsOnly is a dataset of one molecule per row holding only what TaskTypes
// reads: task names and labels (rows: molecules).
func labelsOnly(tasks []string, rows ...[]float32) *Dataset {
	d := &Dataset{Name: "t", Tasks: tasks, NodePtr: make([]int64, len(rows)+1)}
	for _, r := range rows {
		d.Labels = append(d.Labels, r...)
		d.SMILES = append(d.SMILES, strings.Repeat("C", len(d.SMILES)+1))
	}
	return d
}

// A task is classification when its labels are 0, 1 or missing, regression
// otherwise; an override names tasks by name and may turn a 0/1 task into a
// regression but never a real-valued one into a classification.
func TestTaskTypes(t *testing.T) {
	n := float32(math.NaN())
	d := labelsOnly([]string{"binary", "real", "unlabelled", "integer"},
		[]float32{0, 0.5, n, 2},
		[]float32{1, -3, n, 0},
		[]float32{n, 1, n, 1},
	)
	C, R := Classification, Regression
	tests := []struct {
		name     string
		override map[string]TaskType
		want     []TaskType
		err      string
	}{
		{"inferred", nil, []TaskType{C, R, C, R}, ""},
		{"0/1 as regression", map[string]TaskType{"binary": R}, []TaskType{R, R, C, R}, ""},
		{"same as inferred", map[string]TaskType{"real": R, "unlabelled": C}, []TaskType{C, R, C, R}, ""},
		{"real as classification", map[string]TaskType{"integer": C}, nil,
			`task "integer": molecule 0 (C) has label 2, not 0 or 1, so the task cannot be classification`},
		{"unknown task", map[string]TaskType{"Binary": R}, nil,
			`no task "Binary" (the tasks: binary, real, unlabelled, integer)`},
	}
	for _, tc := range tests {
		got, err := d.TaskTypes(tc.override)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v (%v), want %v", tc.name, got, err, tc.want)
		}
	}
}

// The names round-trip through text (JSON files, flags); others are refused.
func TestTaskTypeText(t *testing.T) {
	for _, tt := range []TaskType{Classification, Regression} {
		b, _ := tt.MarshalText()
		var back TaskType
		if err := back.UnmarshalText(b); err != nil || back != tt {
			t.Errorf("%v → %q → %v (%v)", tt, b, back, err)
		}
	}
	if _, err := ParseTaskType("Regression"); err == nil {
		t.Error(`"Regression" parsed; names are lower case`)
	}
}

// Acceptance: MoleculeNet's ESOL and FreeSolv featurise with a scaffold split
// into OGB folders that keep every real-valued label exactly (as float32,
// compared with the CSV parsed here independently), and their one task is
// inferred as regression.
func TestFeaturizeRegressionMoleculeNet(t *testing.T) {
	tests := []struct {
		file, label string
		rows        int
	}{
		{"esol.csv", "measured log solubility in mols per litre", 1128},
		{"freesolv.csv", "expt", 642},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			src := filepath.Join(testenv.SharedData(t, "moleculenet"), tc.file)
			want := csvColumn(t, src, tc.label)
			table, err := ReadTable(src, Columns{SMILES: "smiles", Targets: []string{tc.label}})
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "out")
			rep, err := Featurize(table, out, FeaturizeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Molecules != tc.rows || len(rep.Rejected) != 0 {
				t.Fatalf("%d molecules, %d rejected; want %d, none rejected", rep.Molecules, len(rep.Rejected), tc.rows)
			}
			d, err := ReadOGB(out)
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Labels) != len(want) {
				t.Fatalf("%d labels, want %d", len(d.Labels), len(want))
			}
			for i, v := range d.Labels {
				if v != want[i] {
					t.Fatalf("molecule %d: label %g, want %g", i, v, want[i])
				}
			}
			if !slices.Equal(d.Tasks, []string{tc.label}) {
				t.Errorf("tasks %q", d.Tasks)
			}
			types, err := d.TaskTypes(nil)
			if err != nil || !slices.Equal(types, []TaskType{Regression}) {
				t.Errorf("task types %v (%v), want [regression]", types, err)
			}
			if s := d.Split; s == nil || s.Name != "scaffold" || len(s.Train)+len(s.Valid)+len(s.Test) != tc.rows || len(s.Test) < tc.rows/10 {
				t.Errorf("split %+v", s)
			}
		})
	}
}

// csvColumn is one column of a CSV file as float32, read with encoding/csv.
func csvColumn(t *testing.T, path, name string) []float32 {
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
	col := slices.Index(recs[0], name)
	if col < 0 {
		t.Fatalf("%s: no column %q", path, name)
	}
	var out []float32
	for _, r := range recs[1:] {
		v, err := strconv.ParseFloat(strings.TrimSpace(r[col]), 32)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, float32(v))
	}
	return out
}

// Task types named in one line: pairs, a quoted name with a comma, and
// what is refused.
func TestParseTaskTypes(t *testing.T) {
	got, err := ParseTaskTypes(`a=regression,"b,c=classification"`)
	if err != nil || len(got) != 2 || got["a"] != Regression || got["b,c"] != Classification {
		t.Errorf("got %v, %v; want a regression, \"b,c\" classification", got, err)
	}
	if got, err := ParseTaskTypes(""); got != nil || err != nil {
		t.Errorf("empty: %v, %v; want none", got, err)
	}
	for spec, want := range map[string]string{
		"a":                             `want NAME=classification or NAME=regression, got "a"`,
		"=regression":                   `want NAME=classification or NAME=regression, got "=regression"`,
		"a=ordinal":                     `task type "ordinal": want classification or regression`,
		"a=regression,a=classification": `task "a" named twice`,
	} {
		if _, err := ParseTaskTypes(spec); err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %s", spec, err, want)
		}
	}
}
