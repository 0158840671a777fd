package data

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/data/rdkit"
	"github.com/micrograph/micrograph/internal/testenv"
)

// gunzip returns the decompressed content of a gzip file.
func gunzip(tb testing.TB, path string) []byte {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(gz); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	return buf.Bytes()
}

// sameContent reports the first line where two gzip files differ once
// decompressed.
func sameContent(t *testing.T, got, want string) {
	t.Helper()
	a, b := gunzip(t, got), gunzip(t, want)
	if bytes.Equal(a, b) {
		return
	}
	la, lb := bytes.Split(a, []byte{'\n'}), bytes.Split(b, []byte{'\n'})
	for i := 0; i < len(la) && i < len(lb); i++ {
		if !bytes.Equal(la[i], lb[i]) {
			t.Errorf("%s:%d: %q, want %q (%s)", got, i+1, la[i], lb[i], want)
			return
		}
	}
	t.Errorf("%s: %d lines, want %d (%s)", got, len(la), len(lb), want)
}

// strictValence reports whether this RDKit refuses the hypervalent atoms
// (aluminium with six bonds, boron with five, …) that RDKit 2022.09 (Debian
// 12's) and OGB's accepted: RDKit 2025.03 (Debian 13's) does, and rejects
// those rows with "Explicit valence … greater than permitted".
func strictValence(t *testing.T) bool {
	t.Helper()
	v, err := rdkit.RDKitVersion()
	if err != nil {
		t.Fatal(err)
	}
	year, _, _ := strings.Cut(v, ".")
	return year >= "2024"
}

// valenceRejections checks that each rejected row is a hypervalent atom
// refused, and that there are want of them.
func valenceRejections(t *testing.T, rejected []Rejection, want int) {
	t.Helper()
	for _, r := range rejected {
		if !strings.Contains(r.Reason, "Explicit valence") || !strings.Contains(r.Reason, "greater than permitted") {
			t.Errorf("line %d (%s) rejected: %s; only hypervalent atoms may be", r.Line, r.SMILES, r.Reason)
		}
	}
	if len(rejected) != want {
		t.Errorf("%d rows rejected for their valence, want %d", len(rejected), want)
	}
}

// Acceptance: featurising the SMILES of OGB's bace (from its own mapping
// file) and MoleculeNet's HIV.csv.gz reproduces every file of the OGB folders:
// raw features, scaffold split and mapping. With an RDKit of strict valence,
// HIV.csv.gz keeps all but its 7 hypervalent molecules, so OGB's files cannot
// be reproduced: the rejections are checked, the files not.
func TestFeaturizeReproducesOGB(t *testing.T) {
	tests := []struct {
		name, csv, smilesCol, ogb string
		hypervalent               int // rows a strict-valence RDKit rejects
	}{
		{"bace", "ogb/ogbg_molbace/mapping/mol.csv.gz", "smiles", "ogb/ogbg_molbace", 0},
		{"hiv", "moleculenet/HIV.csv.gz", "smiles", "ogb/ogbg_molhiv", 7},
	}
	files := []string{fileNumNodes, fileNumBonds, fileNodeFeat, fileBonds, fileBondFeat, fileLabels, fileMapping,
		"split/scaffold/train.csv.gz", "split/scaffold/valid.csv.gz", "split/scaffold/test.csv.gz"}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			table, err := ReadTable(filepath.Join(testenv.SharedData(t, ""), tc.csv), Columns{SMILES: tc.smilesCol})
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "out")
			rep, err := Featurize(table, out, FeaturizeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.hypervalent > 0 && strictValence(t) {
				valenceRejections(t, rep.Rejected, tc.hypervalent)
				t.Skipf("this RDKit refuses %d hypervalent molecules OGB kept: its files are not reproduced", tc.hypervalent)
			}
			if len(rep.Rejected) != 0 || rep.Molecules != rep.Rows {
				t.Fatalf("%d of %d rows rejected: %+v", len(rep.Rejected), rep.Rows, rep.Rejected)
			}
			want := testenv.SharedData(t, tc.ogb)
			for _, f := range files {
				sameContent(t, filepath.Join(out, f), filepath.Join(want, f))
			}
		})
	}
}

// Acceptance: featurize succeeds on the MoleculeNet CSVs (HIV.csv.gz is the
// reproduction test above); row and task counts are those of
// ../shared/data/README.md, missing-label counts those of the CSVs' empty
// cells. RDKit 2022.09 accepts every row, clintox's included (OGB's older
// RDKit dropped one of its 1478); an RDKit of strict valence rejects tox21's
// 8 hypervalent molecules, and only those.
func TestFeaturizeMoleculeNet(t *testing.T) {
	tests := []struct {
		file, smilesCol      string
		rows, tasks, missing int
		hypervalent          int // rows a strict-valence RDKit rejects
	}{
		{"bace.csv", "mol", 1513, 1, 0, 0},
		{"BBBP.csv", "smiles", 2039, 1, 0, 0},
		{"clintox.csv", "smiles", 1478, 2, 0, 0},
		{"sider.csv", "smiles", 1427, 27, 0, 0},
		{"tox21.csv", "smiles", 7831, 12, 16026, 8},
		{"toxcast.csv.gz", "smiles", 8576, 617, 3757732, 0},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			table, err := ReadTable(filepath.Join(testenv.SharedData(t, "moleculenet"), tc.file), Columns{SMILES: tc.smilesCol})
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "out")
			rep, err := Featurize(table, out, FeaturizeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.hypervalent > 0 && strictValence(t) {
				valenceRejections(t, rep.Rejected, tc.hypervalent)
				t.Skipf("this RDKit refuses %d hypervalent molecules: the counts below are RDKit 2022.09's", tc.hypervalent)
			}
			if rep.Rows != tc.rows || rep.Molecules != tc.rows || len(rep.Rejected) != 0 {
				t.Fatalf("%d rows, %d molecules, %d rejected; want %d, all kept", rep.Rows, rep.Molecules, len(rep.Rejected), tc.rows)
			}
			d, err := ReadOGB(out)
			if err != nil {
				t.Fatal(err)
			}
			missing := 0
			for _, v := range d.Labels {
				if v != v {
					missing++
				}
			}
			if d.NumTasks() != tc.tasks || missing != tc.missing || d.Split == nil ||
				len(d.Split.Train)+len(d.Split.Valid)+len(d.Split.Test) != tc.rows {
				t.Errorf("%d tasks, %d missing labels; want %d, %d", d.NumTasks(), missing, tc.tasks, tc.missing)
			}
		})
	}
}

// writeCSV writes content under dir, gzip-compressed when the name ends in .gz.
func writeCSV(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	data := []byte(content)
	if strings.HasSuffix(name, ".gz") {
		data = gzipBytes(t, content)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Invalid SMILES are skipped and reported with row, line and RDKit's reason,
// in the report and in rejected.csv; the mapping keeps the input rows' ids.
func TestFeaturizeRejectsInvalidSmiles(t *testing.T) {
	dir := t.TempDir()
	csvPath := writeCSV(t, dir, "in.csv", "name,SMILES,y\n"+
		"ethanol,CCO,1\n"+
		"ring,C1CC,0\n"+
		"\"acetic, acid\",CC(=O)O,\n"+
		"pentavalent,C(C)(C)(C)(C)C,1\n"+
		"benzene,c1ccccc1,0\n")
	table, err := ReadTable(csvPath, Columns{SMILES: "smiles", Targets: []string{"y"}})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	rep, err := Featurize(table, out, FeaturizeOptions{Split: "none"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Rows != 5 || rep.Molecules != 3 || rep.Atoms != 3+4+6 || rep.Bonds != 2+3+6 || rep.Split != nil {
		t.Errorf("report %+v", rep)
	}
	if len(rep.Rejected) != 2 ||
		rep.Rejected[0].Row != 1 || rep.Rejected[0].Line != 3 || !strings.Contains(rep.Rejected[0].Reason, "unclosed ring") ||
		rep.Rejected[1].Row != 3 || rep.Rejected[1].Line != 5 || !strings.Contains(rep.Rejected[1].Reason, "Explicit valence") {
		t.Errorf("rejections %+v", rep.Rejected)
	}
	report, err := os.ReadFile(filepath.Join(out, RejectFile))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(report)), "\n")
	if len(lines) != 3 || lines[0] != "row,line,smiles,reason" || !strings.HasPrefix(lines[1], "1,3,C1CC,") || !strings.HasPrefix(lines[2], "3,5,C(C)(C)(C)(C)C,") {
		t.Errorf("%s:\n%s", RejectFile, report)
	}
	if got := string(gunzip(t, filepath.Join(out, fileMapping))); got != "y,smiles,mol_id\n1,CCO,0\n,CC(=O)O,2\n0,c1ccccc1,4\n" {
		t.Errorf("mapping:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(out, dirSplit)); !os.IsNotExist(err) {
		t.Errorf("split none wrote split/: %v", err)
	}
}

// Bad input tables give errors naming file and line, and Featurize leaves no
// folder (nor a temporary one) behind when it fails.
func TestFeaturizeBadInput(t *testing.T) {
	tests := []struct {
		name, file, content string
		labels              []string
		want                string
	}{
		{"wrong column count", "a.csv", "smiles,y\nCCO,1\nCCN,0,1\n", nil, "a.csv:3: wrong number of fields"},
		{"non-numeric label", "a.csv", "smiles,y\nCCO,1\nCCN,active\n", nil, `a.csv:3: column "y": "active" is not a number`},
		{"no SMILES column", "a.csv", "mol,y\nCCO,1\n", nil, `smiles_column "smiles" is not a column of `},
		{"unknown label column", "a.csv", "smiles,y\nCCO,1\n", []string{"z"}, `target_columns "z" is not a column of `},
		{"empty file", "a.csv", "", nil, "a.csv:1: empty file"},
		{"header only", "a.csv", "smiles,y\n", nil, "a.csv:2: no molecules"},
		{"unterminated quote", "a.csv", "smiles,y\nCCO,1\n\"CCN,0\n", nil, "a.csv:3: extraneous or missing \" in quoted-field"},
		{"every SMILES invalid", "a.csv", "smiles,y\nC1CC,1\nQ,0\n", nil, "none of the 2 SMILES could be featurised"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := writeCSV(t, dir, tc.file, tc.content)
			table, err := ReadTable(path, Columns{SMILES: "smiles", Targets: tc.labels})
			if err == nil {
				_, err = Featurize(table, filepath.Join(dir, "out"), FeaturizeOptions{})
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				t.Errorf("left behind: %v", entries)
			}
		})
	}

	t.Run("truncated gzip", func(t *testing.T) {
		var many strings.Builder
		many.WriteString("smiles,y\n")
		for i := range 3000 {
			fmt.Fprintf(&many, "%s,%d\n", strings.Repeat("C", 1+i%17), i%2)
		}
		for _, tc := range []struct{ content, want string }{
			{many.String(), "a.csv.gz:"},                             // cut somewhere in the rows
			{"smiles,y\nCCO,1\n", "a.csv.gz:1: gzip data truncated"}, // cut in the header
		} {
			gz := gzipBytes(t, tc.content)
			path := filepath.Join(t.TempDir(), "a.csv.gz")
			if err := os.WriteFile(path, gz[:len(gz)/2], 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadTable(path, Columns{SMILES: "smiles"})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "gzip data truncated") {
				t.Errorf("error %v, want %q", err, tc.want)
			}
			t.Log(err)
		}
	})

	t.Run("existing output folder", func(t *testing.T) {
		dir := t.TempDir()
		table, err := ReadTable(writeCSV(t, dir, "a.csv", "smiles\nCCO\n"), Columns{SMILES: "smiles"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Featurize(table, dir, FeaturizeOptions{}); err == nil || !strings.Contains(err.Error(), "already exists") {
			t.Errorf("featurising into an existing folder: %v", err)
		}
		if _, err := Featurize(table, filepath.Join(dir, "out"), FeaturizeOptions{Split: "stratified"}); err == nil {
			t.Error("unknown split accepted")
		}
	})
}
