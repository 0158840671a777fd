package data

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeInput(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "in.csv")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// ReadTable names what is wrong with a file, with its line: a column named
// twice (it used to read the second SMILES column as labels: "not a
// number"), a ragged row, no SMILES column by the default rule
// (ErrNoSMILESColumn, so that a caller may say how to name one, and only
// then).
func TestReadTableErrors(t *testing.T) {
	tests := []struct {
		name, content, want string
		noSMILES            bool
	}{
		{"duplicated smiles", "smiles,smiles,label\nCCO,CCO,1\n", `in.csv:1: the header names column "smiles" twice (columns 1 and 2)`, false},
		{"smiles in two cases", "SMILES,label,smiles\nCCO,1,CCO\n", `in.csv:1: the header names column "smiles" twice (columns 1 and 3)`, false},
		{"duplicated label", "smiles,y,y\nCCO,1,0\n", `in.csv:1: the header names column "y" twice (columns 2 and 3)`, false},
		{"ragged", "smiles,label\nCCO,1\nCCN,0,1\n", "in.csv:3: wrong number of fields", false},
		{"no smiles", "name,label\nCCO,1\n", `in.csv:1: no SMILES column: no column is named "smiles" or "mol" or has "smiles" in its name; the columns are ["name" "label"]`, true},
	}
	for _, tc := range tests {
		_, err := ReadTable(writeInput(t, tc.content), Columns{})
		if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, ErrNoSMILESColumn) != tc.noSMILES {
			t.Errorf("%s: %v, want %q (ErrNoSMILESColumn: %v)", tc.name, err, tc.want, tc.noSMILES)
		}
	}
}

// smilesAtoms counts the atoms a SMILES writes, which RDKit's time grows
// with; hand-counted cases.
func TestSMILESAtoms(t *testing.T) {
	tests := []struct {
		smiles string
		atoms  int
	}{
		{"CCO", 3},
		{"c1ccccc1", 6},
		{"ClCBr", 3},
		{"[NH4+].[Cl-]", 2},
		{"C[C@@H](N)C(=O)O", 6},
		{"B1OCO1", 4},
		{"[13CH3]C%10CC%10", 4},
		{"*CC*", 4},
		{"", 0},
		{"[unclosed", 1},
	}
	for _, tc := range tests {
		if got := smilesAtoms(tc.smiles); got != tc.atoms {
			t.Errorf("smilesAtoms(%q) = %d, want %d", tc.smiles, got, tc.atoms)
		}
	}
}

// A row beyond the limits is rejected with its reason before RDKit sees it:
// a SMILES of a million atoms (1 MB) used to never return.
func TestFeaturizeLimits(t *testing.T) {
	huge := strings.Repeat("C", 1_000_000)
	table := &Table{Source: "in.csv", SMILES: []string{"CCO", huge, "CCCCCC", "c1ccccc1"}, Lines: []int{2, 3, 4, 5}}
	out := filepath.Join(t.TempDir(), "out")
	rep, err := Featurize(table, out, FeaturizeOptions{Split: "none", Limits: Limits{MaxAtoms: 5, MaxSMILESBytes: 7}})
	if err != nil {
		t.Fatal(err)
	}
	want := []Rejection{
		{Row: 1, Line: 3, SMILES: huge, Reason: "SMILES of 1000000 bytes, more than the limit of 7"},
		{Row: 2, Line: 4, SMILES: "CCCCCC", Reason: "6 atoms, more than the limit of 5 per molecule"},
		{Row: 3, Line: 5, SMILES: "c1ccccc1", Reason: "SMILES of 8 bytes, more than the limit of 7"},
	}
	if rep.Molecules != 1 || len(rep.Rejected) != len(want) {
		t.Fatalf("%d molecules, rejected %d rows", rep.Molecules, len(rep.Rejected))
	}
	for i, r := range rep.Rejected {
		if r != want[i] {
			t.Errorf("rejection %d: %+v, want %+v", i, r, want[i])
		}
	}
	if n, err := CountRejections(out); n != 3 || err != nil {
		t.Errorf("CountRejections: %d, %v; want 3", n, err)
	}
	// With the default limits the million atoms are refused as well.
	rep, err = Featurize(&Table{Source: "in.csv", SMILES: []string{huge}, Lines: []int{2}}, filepath.Join(t.TempDir(), "out"), FeaturizeOptions{})
	if err == nil || !strings.Contains(err.Error(), "none of the 1 SMILES could be featurised (row 0: SMILES of 1000000 bytes, more than the limit of 8192)") {
		t.Errorf("a million atoms with the default limits: %v", err)
	}
	if _, err := Featurize(table, filepath.Join(t.TempDir(), "out"), FeaturizeOptions{Limits: Limits{MaxAtoms: -1}}); err == nil || err.Error() != "max_atoms -1 must be positive" {
		t.Errorf("a negative limit: %v", err)
	}
}

// A failure that hits every file of a dataset at once (a full disk; here a
// file where the folder should be) is reported once, not once per file.
func TestWriteOGBFailureIsOneLine(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d := &Dataset{NodePtr: []int64{0, 1}, BondPtr: []int64{0, 0}, AtomFeat: make([]uint8, NumAtomFeatures),
		Tasks: []string{"y"}, Labels: []float32{1}, SMILES: []string{"C"}, Split: RandomSplit(1, 0)}
	err := writeOGB(notDir, d, []string{"0"})
	if err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q, want one line", err)
	}
}
