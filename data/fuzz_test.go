package data

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzReadTable feeds arbitrary bytes to the CSV reader: it must return an
// error or a consistent table, never panic or hang, and the checks that
// follow it (binary labels, size limits) must hold up on whatever it read.
// The stream reader (OpenSMILES) reads the same bytes without panicking
// and, where both accept them, finds the same SMILES.
func FuzzReadTable(f *testing.F) {
	for _, seed := range []string{
		"smiles,label\nCCO,1\nCCN,0\n",
		"smiles,smiles,label\nCCO,CCO,1\n",
		"smiles,label\nCCO,1\nCCN,0,1\n",
		"mol_id,SMILES,a,b\nm1,c1ccccc1,,1\nm2,\"C\nC\",2,-1\n",
		"smiles,y\n" + "[NH4+].[Cl-],nan\n",
		"\xef\xbb\xbfsmiles,y\n\"unterminated,1\n",
		"",
		// Just beyond the 1 MiB bound on a field and on a line.
		"smiles,y\n" + strings.Repeat("C", 1<<20+1) + ",1\n",
		"smiles,y\nCCO," + strings.Repeat("1", 1<<20) + "\n",
	} {
		f.Add([]byte(seed))
	}
	path := filepath.Join(f.TempDir(), "in.csv")
	f.Fuzz(func(t *testing.T, content []byte) {
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
		streamed := readStreamed(path)
		table, err := ReadTable(path, Columns{SMILES: "smiles"})
		if err != nil {
			return
		}
		if streamed != nil && !slices.Equal(streamed, table.SMILES) {
			t.Fatalf("the stream reader read %q, ReadTable %q", streamed, table.SMILES)
		}
		n := len(table.SMILES)
		if n == 0 || len(table.Lines) != n || len(table.Labels) != n*len(table.Tasks) || table.MolIDs != nil && len(table.MolIDs) != n {
			t.Fatalf("inconsistent table: %d SMILES, %d lines, %d labels for %d tasks", n, len(table.Lines), len(table.Labels), len(table.Tasks))
		}
		if !slices.IsSorted(table.Lines) || table.Lines[0] < 2 {
			t.Fatalf("lines %v", table.Lines)
		}
		for _, s := range table.SMILES {
			if a := smilesAtoms(s); a < 0 || a > len(s) {
				t.Fatalf("smilesAtoms(%q) = %d", s, a)
			}
			DefaultLimits().check(s)
		}
	})
}

// readStreamed is every SMILES the stream reader (OpenSMILES, as corpora
// and embed read) finds in path, nil on an error; it must not panic.
func readStreamed(path string) []string {
	r, err := OpenSMILES(path, Columns{SMILES: "smiles"})
	if err != nil {
		return nil
	}
	defer r.Close()
	var all []string
	for {
		rows, err := r.Read(3)
		if err == io.EOF {
			return all
		}
		if err != nil {
			return nil
		}
		for _, row := range rows {
			all = append(all, row.SMILES)
		}
	}
}

// FuzzReadOGB replaces one file of a small valid OGB dataset folder with
// arbitrary content (gzip-compressed, or raw when the selector's top bit is
// set): ReadOGB must return an error or a dataset that passes validation,
// never panic or hang.
func FuzzReadOGB(f *testing.F) {
	template := filepath.Join(f.TempDir(), "template")
	d := &Dataset{
		NodePtr: []int64{0, 2, 5}, BondPtr: []int64{0, 1, 3},
		AtomFeat:  make([]uint8, 5*NumAtomFeatures),
		BondAtoms: []int32{0, 1, 0, 1, 1, 2}, BondFeat: make([]uint8, 3*NumBondFeatures),
		Tasks: []string{"a", "b"}, Labels: []float32{0, 1, nan32, 1}, SMILES: []string{"CC", "CCC"},
		Split: &Split{Name: "scaffold", Train: []int32{0}, Valid: []int32{1}, Test: []int32{}},
	}
	if err := writeOGB(template, d, []string{"0", "1"}); err != nil {
		f.Fatal(err)
	}
	var files []string
	filepath.WalkDir(template, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			rel, _ := filepath.Rel(template, p)
			files = append(files, rel)
		}
		return nil
	})
	slices.Sort(files)
	if _, err := ReadOGB(template); err != nil {
		f.Fatalf("the template does not read: %v", err)
	}
	original := make([][]byte, len(files))
	for i, name := range files {
		b, err := os.ReadFile(filepath.Join(template, name))
		if err != nil {
			f.Fatal(err)
		}
		original[i] = b
		f.Add(uint8(i), gunzip(f, filepath.Join(template, name)))
	}
	f.Add(uint8(0), []byte("3\n2\n"))
	f.Add(uint8(1), []byte("-1\n"))
	f.Add(uint8(128), []byte{0x1f, 0x8b, 8, 0, 0, 0})
	// Inputs that parse but break the dataset (an infinite label, a
	// molecule in two split parts), which only validation refuses.
	for _, bad := range []struct{ file, content string }{
		{"raw/graph-label.csv.gz", "inf,1\n0,1\n"},
		{"split/scaffold/valid.csv.gz", "0\n"},
	} {
		i := slices.Index(files, bad.file)
		if i < 0 {
			f.Fatalf("the template has no %s: %v", bad.file, files)
		}
		f.Add(uint8(i), []byte(bad.content))
	}
	// One copy of the template per fuzzing process: each input replaces one
	// file and puts it back afterwards.
	dir := filepath.Join(f.TempDir(), "ds")
	if err := os.CopyFS(dir, os.DirFS(template)); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, which uint8, content []byte) {
		i := int(which%128) % len(files)
		path := filepath.Join(dir, files[i])
		defer os.WriteFile(path, original[i], 0o644)
		replaced := content
		if which < 128 {
			var buf bytes.Buffer
			gz := gzip.NewWriter(&buf)
			gz.Write(content)
			gz.Close()
			replaced = buf.Bytes()
		}
		if err := os.WriteFile(path, replaced, 0o644); err != nil {
			t.Fatal(err)
		}
		ds, err := ReadOGB(dir)
		if err != nil {
			return
		}
		if err := usable(ds); err != nil {
			t.Fatalf("ReadOGB accepted an invalid dataset: %v", err)
		}
	})
}
