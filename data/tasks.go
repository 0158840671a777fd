package data

import (
	"encoding/csv"
	"fmt"
	"slices"
	"strings"

	"github.com/micrograph/micrograph/internal/inputfile"
)

// TaskType says what a task's labels are: classes 0 and 1, or real values.
type TaskType uint8

const (
	// Classification tasks have labels 0 and 1 (or missing).
	Classification TaskType = iota
	// Regression tasks have real-valued labels.
	Regression
)

// String is the type's name as JSON files and flags spell it.
func (t TaskType) String() string {
	if t == Regression {
		return "regression"
	}
	return "classification"
}

// ParseTaskType reads "classification" or "regression".
func ParseTaskType(s string) (TaskType, error) {
	switch s {
	case "classification":
		return Classification, nil
	case "regression":
		return Regression, nil
	}
	return 0, fmt.Errorf("task type %q: want classification or regression", s)
}

// ParseTaskTypes reads task types named in one line: NAME=TYPE pairs,
// comma-separated, a name with a comma quoted as CSV quotes it; "" is none.
func ParseTaskTypes(spec string) (map[string]TaskType, error) {
	if spec == "" {
		return nil, nil
	}
	fields, err := csv.NewReader(strings.NewReader(spec)).Read()
	if err != nil {
		return nil, err
	}
	types := make(map[string]TaskType, len(fields))
	for _, f := range fields {
		i := strings.LastIndex(f, "=")
		if i <= 0 {
			return nil, fmt.Errorf("want NAME=classification or NAME=regression, got %q", f)
		}
		t, err := ParseTaskType(f[i+1:])
		if err != nil {
			return nil, err
		}
		if _, dup := types[f[:i]]; dup {
			return nil, fmt.Errorf("task %q named twice", f[:i])
		}
		types[f[:i]] = t
	}
	return types, nil
}

// MarshalText writes the type's name, so that JSON files hold words.
func (t TaskType) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText reads a name MarshalText wrote.
func (t *TaskType) UnmarshalText(b []byte) error {
	v, err := ParseTaskType(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// TaskTypes gives each task of d its type: classification when all its
// labels are 0 or 1 (missing allowed), regression otherwise, unless override
// names the task (by name) with another type. An override naming no task of
// d, or asking classification of a task with a label other than 0 or 1, is an
// error naming the task (and, for the label, the molecule and its SMILES);
// the caller names the dataset.
func (d *Dataset) TaskTypes(override map[string]TaskType) ([]TaskType, error) {
	nt := d.NumTasks()
	for name := range override {
		if !slices.Contains(d.Tasks, name) {
			return nil, fmt.Errorf("no task %q (the tasks: %s)", name, inputfile.Shorten(strings.Join(d.Tasks, ", ")))
		}
	}
	types := make([]TaskType, nt)
	for j, name := range d.Tasks {
		firstReal := -1
		for g := 0; g < d.NumGraphs(); g++ {
			if v := d.Labels[g*nt+j]; v != 0 && v != 1 && v == v {
				firstReal = g
				break
			}
		}
		t, set := override[name]
		switch {
		case !set && firstReal >= 0:
			t = Regression
		case !set:
			t = Classification
		case t == Classification && firstReal >= 0:
			smiles := ""
			if d.SMILES != nil {
				smiles = fmt.Sprintf(" (%s)", inputfile.Shorten(d.SMILES[firstReal]))
			}
			return nil, fmt.Errorf("task %s: molecule %d%s has label %g, not 0 or 1, so the task cannot be classification",
				inputfile.Quote(name), firstReal, smiles, d.Labels[firstReal*nt+j])
		}
		types[j] = t
	}
	return types, nil
}
