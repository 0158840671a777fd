package data

import (
	"bytes"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/internal/testenv"
)

// Columns picks the SMILES, label and identifier columns of a header by one
// rule: hand-worked headers, each with the indices it must pick, the note
// it must make, or the field it must blame and the words of the error.
func TestColumnsSelect(t *testing.T) {
	tests := []struct {
		name   string
		header string
		cols   Columns
		smiles int
		labels []int
		id     int
		note   string // a part of the note; "" wants none
		field  string // the field an error names; "" for an error that names none
		err    string // a part of the error; "" wants none
	}{
		{"default", "smiles,a,b", Columns{}, 0, []int{1, 2}, -1, "", "", ""},
		{"case ignored", "name,SMILES,y", Columns{}, 1, []int{0, 2}, -1, "", "", ""},
		{"mol_id kept apart", "y,smiles,mol_id", Columns{}, 1, []int{0}, 2, "", "", ""},
		{"bace's mol", "mol,Class", Columns{}, 0, []int{1}, -1, "", "", ""},
		{"a name holding smiles", "id,canonical_smiles,y", Columns{}, 1, []int{0, 2}, -1, `column "canonical_smiles", the first whose name contains "smiles"`, "", ""},
		{"holding smiles before mol", "mol,Canonical_SMILES,y", Columns{}, 1, []int{0, 2}, -1, `"Canonical_SMILES"`, "", ""},
		{"the first holding smiles", "smiles_raw,smiles_std", Columns{}, 0, []int{1}, -1, `"smiles_raw"`, "", ""},
		{"an ignored smiles is passed over", "smiles,clean_smiles,y", Columns{Ignore: []string{"smiles"}}, 1, []int{2}, -1, `"clean_smiles"`, "", ""},
		{"a target is never the SMILES", "smiles_std,smiles_raw", Columns{Targets: []string{"smiles_std"}}, 1, []int{0}, -1, `"smiles_raw"`, "", ""},
		{"named", "structure,y,z", Columns{SMILES: "Structure"}, 0, []int{1, 2}, -1, "", "", ""},
		{"targets in their order", "smiles,a,b,c", Columns{Targets: []string{"c", "a"}}, 0, []int{3, 1}, -1, "", "", ""},
		{"ignored", "Compound ID,smiles,y,note", Columns{Ignore: []string{"Compound ID", "note"}}, 1, []int{2}, -1, "", "", ""},
		{"ignored mol_id", "smiles,mol_id,y", Columns{Ignore: []string{"mol_id"}}, 0, []int{2}, -1, "", "", ""},
		{"names with commas and quotes", `smiles,"a, b","say ""x"""`, Columns{Targets: []string{`say "x"`, "a, b"}}, 0, []int{2, 1}, -1, "", "", ""},

		{"no SMILES column", "name,y", Columns{}, 0, nil, 0, "", "", `no column is named "smiles" or "mol" or has "smiles" in its name; the columns are ["name" "y"]`},
		{"the only SMILES is a target", "smiles,y", Columns{Targets: []string{"smiles"}}, 0, nil, 0, "", "", `no column but the target and ignored ones is named "smiles"`},
		{"named SMILES missing", "smiles,y", Columns{SMILES: "structure"}, 0, nil, 0, "", "smiles_column", `"structure" is not a column of /in.csv: its columns are ["smiles" "y"]`},
		{"target missing", "smiles,y", Columns{Targets: []string{"y", "z"}}, 0, nil, 0, "", "target_columns", `"z" is not a column of /in.csv: its columns are ["smiles" "y"]`},
		{"target matched exactly", "smiles,Y", Columns{Targets: []string{"y"}}, 0, nil, 0, "", "target_columns", `"y" is not a column`},
		{"ignored missing", "smiles,y", Columns{Ignore: []string{"name"}}, 0, nil, 0, "", "ignore_columns", `"name" is not a column`},
		{"target is the SMILES", "smiles,y", Columns{SMILES: "smiles", Targets: []string{"smiles"}}, 0, nil, 0, "", "target_columns", `"smiles" is the SMILES column`},
		{"target is mol_id", "smiles,mol_id", Columns{Targets: []string{"mol_id"}}, 0, nil, 0, "", "target_columns", "molecule identifier column"},
		{"targets and ignored", "smiles,y,n", Columns{Targets: []string{"y"}, Ignore: []string{"n"}}, 0, nil, 0, "", "ignore_columns", "cannot go with target columns"},
		{"a target twice", "smiles,y", Columns{Targets: []string{"y", "y"}}, 0, nil, 0, "", "target_columns", `"y" is named twice`},
		{"an empty name", "smiles,y", Columns{Ignore: []string{"y", ""}}, 0, nil, 0, "", "ignore_columns", "names an empty column"},
		{"no targets", "smiles,y", Columns{Targets: []string{}}, 0, nil, 0, "", "target_columns", "must name at least one column"},
		{"a header naming a column twice", "smiles,y,y", Columns{Targets: []string{"y"}}, 0, nil, 0, "", "", `the header names column "y" twice (columns 2 and 3)`},
		{"SMILES in two cases", "Smiles,y,smiles", Columns{SMILES: "smiles"}, 0, nil, 0, "", "", `the header names column "smiles" twice (columns 1 and 3)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeCSV(t, t.TempDir(), "in.csv", tc.header+"\n")
			f, err := openCSV(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.close()
			sel, err := tc.cols.selectColumns(path, f.header, true)
			if tc.err != "" {
				var fe *field.Error
				isField := errors.As(err, &fe)
				if err == nil || !strings.Contains(strings.ReplaceAll(err.Error(), filepath.Dir(path), ""), tc.err) || isField != (tc.field != "") || isField && fe.Name != tc.field {
					t.Fatalf("error %v, want one naming field %q with %q", err, tc.field, tc.err)
				}
				if noSMILES := strings.Contains(tc.err, "is named \"smiles\""); errors.Is(err, ErrNoSMILESColumn) != noSMILES {
					t.Errorf("errors.Is(%v, ErrNoSMILESColumn) = %v", err, !noSMILES)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sel.smiles != tc.smiles || !slices.Equal(sel.labels, tc.labels) || sel.id != tc.id {
				t.Errorf("SMILES %d, labels %v, id %d; want %d, %v, %d", sel.smiles, sel.labels, sel.id, tc.smiles, tc.labels, tc.id)
			}
			if (tc.note == "") != (sel.note == "") || !strings.Contains(sel.note, tc.note) {
				t.Errorf("note %q, want one with %q", sel.note, tc.note)
			}
		})
	}
}

// A file whose SMILES column is canonical_smiles beside a text column
// holding quotes and commas reads once that column is ignored: the labels
// are the remaining column's numbers, and the note names the SMILES
// column. Read by default, the text column is the error of today, wrapping
// ErrNotANumber (so that the command can say which flags name columns);
// named a target, the same column's error does not wrap it.
func TestReadTableWithColumns(t *testing.T) {
	const content = "canonical_smiles,comment,pIC50\n" +
		"CCO,\"ethanol, \"\"the\"\" solvent\",4.5\n" +
		"c1ccccc1O,\"phenol; \"\"carbolic acid\"\", 1834\",\n" +
		"CC(=O)Nc1ccccc1,plain,-1.25\n"
	path := writeCSV(t, t.TempDir(), "hand.csv", content)

	table, err := ReadTable(path, Columns{Ignore: []string{"comment"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(table.SMILES, []string{"CCO", "c1ccccc1O", "CC(=O)Nc1ccccc1"}) || !slices.Equal(table.Tasks, []string{"pIC50"}) ||
		!slices.Equal(table.Lines, []int{2, 3, 4}) || table.MolIDs != nil {
		t.Fatalf("SMILES %q, tasks %q, lines %v, ids %q", table.SMILES, table.Tasks, table.Lines, table.MolIDs)
	}
	if len(table.Labels) != 3 || table.Labels[0] != 4.5 || !math.IsNaN(float64(table.Labels[1])) || table.Labels[2] != -1.25 {
		t.Errorf("labels %v, want 4.5 NaN -1.25", table.Labels)
	}
	if !strings.Contains(table.Note, `SMILES read from column "canonical_smiles"`) {
		t.Errorf("note %q", table.Note)
	}
	same, err := ReadTable(path, Columns{Targets: []string{"pIC50"}})
	if err != nil || !slices.Equal(same.Tasks, table.Tasks) || !slices.EqualFunc(same.Labels, table.Labels, func(a, b float32) bool { return a == b || a != a && b != b }) {
		t.Errorf("with the target named: %v, tasks %q, labels %v", err, same.Tasks, same.Labels)
	}

	_, err = ReadTable(path, Columns{})
	if want := `hand.csv:2: column "comment": "ethanol, \"the\" solvent" is not a number`; err == nil || !strings.HasSuffix(err.Error(), want) || !errors.Is(err, ErrNotANumber) {
		t.Errorf("read by default: %v, want an error ending %q wrapping ErrNotANumber", err, want)
	}
	_, err = ReadTable(path, Columns{Targets: []string{"pIC50", "comment"}})
	if err == nil || !strings.Contains(err.Error(), `column "comment"`) || errors.Is(err, ErrNotANumber) {
		t.Errorf("named a target: %v, want the column's error without ErrNotANumber", err)
	}
}

// MoleculeNet's esol.csv and freesolv.csv, as distributed, read once their
// target columns are named (esol's SMILES is its last column, beside names
// and descriptors; freesolv's IUPAC names hold commas inside quotes), and
// the stream reader finds the same SMILES column. By default both files are
// refused on their name column, as before.
func TestReadTableMoleculeNetRegression(t *testing.T) {
	dir := testenv.SharedData(t, "moleculenet")
	tests := []struct {
		file, target string
		rows         int
		first        string  // the first row's SMILES
		label        float32 // its label
		text         string  // what the default reading stops at
	}{
		{"esol.csv", "measured log solubility in mols per litre", 1128, "OCC3OC(OCC2OC(OC(C#N)c1ccccc1)C(O)C(O)C2O)C(O)C(O)C3O ", -0.77, `esol.csv:2: column "Compound ID": "Amigdalin" is not a number`},
		{"freesolv.csv", "expt", 642, "CN(C)C(=O)c1ccc(cc1)OC", -11.01, `freesolv.csv:2: column "iupac": "4-methoxy-N,N-dimethyl-benzamide" is not a number`},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join(dir, tc.file)
			table, err := ReadTable(path, Columns{Targets: []string{tc.target}})
			if err != nil {
				t.Fatal(err)
			}
			if len(table.SMILES) != tc.rows || !slices.Equal(table.Tasks, []string{tc.target}) || table.SMILES[0] != tc.first ||
				table.Labels[0] != tc.label || len(table.Labels) != tc.rows || table.Note != "" {
				t.Errorf("%d rows, tasks %q, first %q with %v, note %q", len(table.SMILES), table.Tasks, table.SMILES[0], table.Labels[0], table.Note)
			}
			r, err := OpenSMILES(path, Columns{Targets: []string{tc.target}})
			if err != nil {
				t.Fatal(err)
			}
			rows, err := r.Read(tc.rows + 1)
			r.Close()
			if err != nil || len(rows) != tc.rows || rows[0].SMILES != tc.first || r.Column != "smiles" {
				t.Errorf("stream: %v, %d rows, column %q", err, len(rows), r.Column)
			}
			if _, err := ReadTable(path, Columns{}); err == nil || !strings.HasSuffix(err.Error(), tc.text) || !errors.Is(err, ErrNotANumber) {
				t.Errorf("by default: %v, want %q", err, tc.text)
			}
		})
	}
}

// The cache of featurised CSVs is keyed by the selection: the same file
// read with other columns is featurised anew into its own folder, with its
// own tasks, and the default keeps the folder name it always had. Each
// opening of a file whose SMILES column the default rule found by its name
// says so. A dataset folder takes no selection.
func TestOpenKeysCacheByColumns(t *testing.T) {
	dir := t.TempDir()
	csv := writeCSV(t, dir, "hand.csv", "name,canonical_smiles,a,b\nethanol,CCO,1,0.5\nphenol,c1ccccc1O,0,1.5\nacetamide,CC(=O)N,1,2.5\n")
	cache := filepath.Join(dir, "cache")
	var notes bytes.Buffer
	open := func(cols Columns) *Dataset {
		t.Helper()
		d, err := Open(csv, OpenOptions{CacheDir: cache, Columns: cols, Report: &notes})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	ab := open(Columns{Ignore: []string{"name"}})
	b := open(Columns{Targets: []string{"b"}})
	again := open(Columns{Ignore: []string{"name"}})
	if !slices.Equal(ab.Tasks, []string{"a", "b"}) || !slices.Equal(b.Tasks, []string{"b"}) || !slices.Equal(again.Tasks, ab.Tasks) {
		t.Errorf("tasks %q, %q, %q", ab.Tasks, b.Tasks, again.Tasks)
	}
	if !slices.Equal(b.Labels, []float32{0.5, 1.5, 2.5}) {
		t.Errorf("labels of b %v", b.Labels)
	}
	folders, _ := filepath.Glob(filepath.Join(cache, "featurized", "hand-*"))
	if len(folders) != 2 {
		t.Errorf("featurised folders %q, want one per selection", folders)
	}
	if n := strings.Count(notes.String(), `SMILES read from column "canonical_smiles"`); n != 3 {
		t.Errorf("the note came %d times, want once per opening:\n%s", n, notes.String())
	}
	if key := (Columns{}).key(); key != "" {
		t.Errorf("the default's key %q: it names the folder, which would change", key)
	}
	if k1, k2 := (Columns{Targets: []string{"a"}}).key(), (Columns{Ignore: []string{"a"}}).key(); k1 == k2 || k1 == "" {
		t.Errorf("keys %q and %q", k1, k2)
	}

}
