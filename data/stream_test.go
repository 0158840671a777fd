package data

import (
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// streamInput has a quoted field over two lines (line numbers must follow
// the file, not the row count), two SMILES RDKit rejects and a SMILES column
// spelled in capitals.
const streamInput = "name,SMILES,y\n" +
	"ethanol,CCO,1\n" +
	"ring,C1CC,0\n" +
	"\"acetic\nacid\",CC(=O)O,\n" +
	"pentavalent,C(C)(C)(C)(C)C,1\n" +
	"benzene,c1ccccc1,0\n"

// Read in chunks of 2, a file (plain or gzip) gives every row once, in
// order, with its index and starting line, then io.EOF; FeaturizeRows keeps
// the rows RDKit accepts and builds exactly the molecules Featurize writes
// for the same file, and lists the others with their line and reason.
func TestStreamMatchesFeaturize(t *testing.T) {
	for _, name := range []string{"in.csv", "in.csv.gz"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := writeCSV(t, dir, name, streamInput)
			r, err := OpenSMILES(path, Columns{})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if r.Column != "SMILES" {
				t.Errorf("column %q", r.Column)
			}
			var rows []Row
			for {
				chunk, err := r.Read(2)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if len(chunk) > 2 {
					t.Fatalf("chunk of %d rows, asked for 2", len(chunk))
				}
				rows = append(rows, chunk...)
			}
			want := []Row{{0, 2, "CCO"}, {1, 3, "C1CC"}, {2, 4, "CC(=O)O"}, {3, 6, "C(C)(C)(C)(C)C"}, {4, 7, "c1ccccc1"}}
			if !reflect.DeepEqual(rows, want) {
				t.Fatalf("rows %v, want %v", rows, want)
			}

			d, kept, rejected, err := FeaturizeRows(rows, 1, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(kept, []int{0, 2, 4}) || len(rejected) != 2 ||
				rejected[0].Row != 1 || rejected[0].Line != 3 || !strings.Contains(rejected[0].Reason, "unclosed ring") ||
				rejected[1].Row != 3 || rejected[1].Line != 6 || !strings.Contains(rejected[1].Reason, "Explicit valence") {
				t.Fatalf("kept %v, rejected %+v", kept, rejected)
			}
			table, err := ReadTable(path, Columns{SMILES: "smiles", Targets: []string{"y"}})
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "out")
			if _, err := Featurize(table, out, FeaturizeOptions{Split: "none"}); err != nil {
				t.Fatal(err)
			}
			ref, err := ReadOGB(out)
			if err != nil {
				t.Fatal(err)
			}
			if d.NumGraphs() != 3 || !reflect.DeepEqual(d.NodePtr, ref.NodePtr) || !reflect.DeepEqual(d.BondPtr, ref.BondPtr) ||
				!reflect.DeepEqual(d.AtomFeat, ref.AtomFeat) || !reflect.DeepEqual(d.BondAtoms, ref.BondAtoms) ||
				!reflect.DeepEqual(d.BondFeat, ref.BondFeat) || !reflect.DeepEqual(d.SMILES, ref.SMILES) {
				t.Errorf("FeaturizeRows differs from Featurize:\n%+v\n%+v", d, ref)
			}
			if err := d.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
}

// A chunk of rows RDKit all rejects is an empty dataset, not an error: the
// caller writes the rows as invalid and goes on.
func TestFeaturizeRowsAllRejected(t *testing.T) {
	d, kept, rejected, err := FeaturizeRows([]Row{{7, 9, "Q"}, {8, 10, "C1CC"}}, 1, Limits{})
	if err != nil || d.NumGraphs() != 0 || len(kept) != 0 || len(rejected) != 2 || rejected[0].Row != 7 || rejected[1].Line != 10 {
		t.Errorf("%v: %d molecules, kept %v, rejected %+v", err, d.NumGraphs(), kept, rejected)
	}
}

// Files without molecules or without the column are errors naming file and
// line; the column is asked for by name, "mol" tried after "smiles" when
// none is named.
func TestOpenSMILESErrors(t *testing.T) {
	tests := []struct{ name, content, col, want string }{
		{"empty", "", "", "in.csv:1: empty file"},
		{"header only", "smiles\n", "", "in.csv:2: no molecules"},
		{"no column", "a,b\nCCO,1\n", "", `in.csv:1: no SMILES column: no column is named "smiles" or "mol" or has "smiles" in its name; the columns are ["a" "b"]`},
		{"named column missing", "smiles\nCCO\n", "structure", `smiles_column "structure" is not a column of `},
		{"twice", "smiles,Smiles\nCCO,CCN\n", "", `in.csv:1: the header names column "Smiles" twice (columns 1 and 2)`},
		{"ragged", "smiles\nCCO\nCCN,1\n", "", "in.csv:3: wrong number of fields"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeCSV(t, t.TempDir(), "in.csv", tc.content)
			r, err := OpenSMILES(path, Columns{SMILES: tc.col})
			if err == nil {
				defer r.Close()
				for err == nil {
					_, err = r.Read(10)
				}
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
	// bace's column is "mol".
	r, err := OpenSMILES(writeCSV(t, t.TempDir(), "bace.csv", "mol,y\nCCO,1\n"), Columns{})
	if err != nil || r.Column != "mol" {
		t.Fatalf("%v, column %v", err, r)
	}
	r.Close()
}
