package data

import (
	"bytes"
	"compress/gzip"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// tinyFiles is a valid two-molecule dataset in OGB's layout: molecule 0 has
// three atoms bonded 0-1 and 1-2, molecule 1 two atoms bonded 0-1; two tasks,
// the second missing for molecule 0.
func tinyFiles() map[string]string {
	return map[string]string{
		fileNumNodes:                  "3\n2\n",
		fileNumBonds:                  "2\n1\n",
		fileNodeFeat:                  "5,0,4,5,3,0,2,0,0\n5,0,4,5,2,0,2,0,0\n7,0,2,5,1,0,2,0,0\n5,0,2,5,1,0,0,0,0\n6,0,1,5,0,0,0,0,0\n",
		fileBonds:                     "0,1\n1,2\n0,1\n",
		fileBondFeat:                  "0,0,0\n0,0,0\n2,0,1\n",
		fileLabels:                    "1,\n0,1\n",
		fileMapping:                   "a,b,smiles,mol_id\n1,,CCO,0\n0,1,C#N,1\n",
		"split/scaffold/train.csv.gz": "0\n",
		"split/scaffold/valid.csv.gz": "1\n",
		"split/scaffold/test.csv.gz":  "",
	}
}

func gzipBytes(tb testing.TB, s string) []byte {
	tb.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	if _, err := gz.Write([]byte(s)); err != nil {
		tb.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// writeFiles writes each content gzip-compressed under dir.
func writeFiles(tb testing.TB, dir string, files map[string]string) {
	tb.Helper()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(path, gzipBytes(tb, content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

func TestReadOGBTiny(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, tinyFiles())
	d, err := ReadOGB(dir)
	if err != nil {
		t.Fatal(err)
	}
	nan := float32(math.NaN())
	want := &Dataset{
		Name:    filepath.Base(dir),
		NodePtr: []int64{0, 3, 5},
		BondPtr: []int64{0, 2, 3},
		AtomFeat: []uint8{5, 0, 4, 5, 3, 0, 2, 0, 0, 5, 0, 4, 5, 2, 0, 2, 0, 0, 7, 0, 2, 5, 1, 0, 2, 0, 0,
			5, 0, 2, 5, 1, 0, 0, 0, 0, 6, 0, 1, 5, 0, 0, 0, 0, 0},
		BondAtoms: []int32{0, 1, 1, 2, 0, 1},
		BondFeat:  []uint8{0, 0, 0, 0, 0, 0, 2, 0, 1},
		Labels:    []float32{1, nan, 0, 1},
		Tasks:     []string{"a", "b"},
		Split:     &Split{Name: "scaffold", Train: []int32{0}, Valid: []int32{1}},
		SMILES:    []string{"CCO", "C#N"},
	}
	if !math.IsNaN(float64(d.Labels[1])) {
		t.Errorf("missing label read as %v, want NaN", d.Labels[1])
	}
	d.Labels[1], want.Labels[1] = -1, -1 // NaN != NaN; checked above
	if !reflect.DeepEqual(d, want) {
		t.Errorf("read\n%+v\nwant\n%+v", d, want)
	}
}

// Every kind of bad input named in the issue gives an error naming the file
// and line.
func TestReadOGBBadInput(t *testing.T) {
	tests := []struct {
		name   string
		change func(files map[string]string)
		raw    func(t *testing.T, dir string) // damage applied to the written files
		want   string
	}{
		{name: "truncated gzip", raw: func(t *testing.T, dir string) {
			path := filepath.Join(dir, fileNodeFeat)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, b[:len(b)-6], 0o644); err != nil {
				t.Fatal(err)
			}
		}, want: "raw/node-feat.csv.gz:6: gzip data truncated"},
		{name: "not gzip", raw: func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, fileBonds), []byte("0,1\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, want: "raw/edge.csv.gz: not a gzip file"},
		{name: "wrong column count", change: func(f map[string]string) {
			f[fileNodeFeat] = strings.Replace(f[fileNodeFeat], "5,0,4,5,2,0,2,0,0\n", "5,0,4,5,2,0,2,0\n", 1)
		}, want: "raw/node-feat.csv.gz:2: 8 fields, want 9"},
		{name: "non-integer field", change: func(f map[string]string) {
			f[fileBonds] = "0,1\n1,2\n0,x\n"
		}, want: `raw/edge.csv.gz:3: field 2 "x" is not an integer`},
		{name: "non-integer count", change: func(f map[string]string) {
			f[fileNumBonds] = "2\n1.5\n"
		}, want: `raw/num-edge-list.csv.gz:2: field 1 "1.5" is not an integer`},
		{name: "non-numeric label", change: func(f map[string]string) {
			f[fileLabels] = "1,\n0,yes\n"
		}, want: `raw/graph-label.csv.gz:2: field 2 "yes" is not a number`},
		{name: "atom feature out of range", change: func(f map[string]string) {
			f[fileNodeFeat] = strings.Replace(f[fileNodeFeat], "7,0,2,5,1,0,2,0,0", "7,0,2,5,1,0,2,0,2", 1)
		}, want: "raw/node-feat.csv.gz:3: in ring (field 9) is 2, outside its range 0..1"},
		{name: "bond feature out of range", change: func(f map[string]string) {
			f[fileBondFeat] = "0,0,0\n5,0,0\n2,0,1\n"
		}, want: "raw/edge-feat.csv.gz:2: bond type (field 1) is 5, outside its range 0..4"},
		{name: "negative feature", change: func(f map[string]string) {
			f[fileBondFeat] = "0,0,0\n0,-1,0\n2,0,1\n"
		}, want: "raw/edge-feat.csv.gz:2: bond stereo (field 2) is -1, outside its range 0..5"},
		{name: "edge endpoint outside its molecule", change: func(f map[string]string) {
			f[fileBonds] = "0,1\n1,2\n0,2\n"
		}, want: "raw/edge.csv.gz:3: bond endpoint 2 outside molecule 1, which has 2 atoms"},
		{name: "fewer feature rows than atoms", change: func(f map[string]string) {
			f[fileNodeFeat] = "5,0,4,5,3,0,2,0,0\n5,0,4,5,2,0,2,0,0\n7,0,2,5,1,0,2,0,0\n5,0,2,5,1,0,0,0,0\n"
		}, want: "raw/node-feat.csv.gz:5: file ends after 4 rows, want 5"},
		{name: "more bond rows than bonds", change: func(f map[string]string) {
			f[fileBonds] = "0,1\n1,2\n0,1\n1,0\n"
		}, want: "raw/edge.csv.gz:4: extra row"},
		{name: "count files disagree", change: func(f map[string]string) {
			f[fileNumBonds] = "2\n1\n0\n"
		}, want: "raw/num-edge-list.csv.gz:3: extra row"},
		{name: "label rows disagree", change: func(f map[string]string) {
			f[fileLabels] = "1,\n"
		}, want: "raw/graph-label.csv.gz:2: file ends after 1 rows, want 2"},
		{name: "label columns disagree", change: func(f map[string]string) {
			f[fileLabels] = "1,\n0\n"
		}, want: "raw/graph-label.csv.gz:2: 1 fields, want 2"},
		{name: "mapping rows disagree", change: func(f map[string]string) {
			f[fileMapping] = "a,b,smiles,mol_id\n1,,CCO,0\n"
		}, want: "mapping/mol.csv.gz:3: file ends after 1 rows, want one per molecule"},
		{name: "empty dataset", change: func(f map[string]string) {
			f[fileNumNodes] = ""
		}, want: "raw/num-node-list.csv.gz:1: no molecules"},
		{name: "missing split file", change: func(f map[string]string) {
			delete(f, "split/scaffold/test.csv.gz")
		}, want: "split/scaffold/test.csv.gz: missing split file"},
		{name: "split index out of range", change: func(f map[string]string) {
			f["split/scaffold/valid.csv.gz"] = "1\n2\n"
		}, want: "split/scaffold/valid.csv.gz:2: molecule 2 outside 0..1"},
		{name: "split index twice", change: func(f map[string]string) {
			f["split/scaffold/test.csv.gz"] = "0\n"
		}, want: "split/scaffold/test.csv.gz:1: molecule 0 is listed twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			files := tinyFiles()
			if tc.change != nil {
				tc.change(files)
			}
			writeFiles(t, dir, files)
			if tc.raw != nil {
				tc.raw(t, dir)
			}
			_, err := ReadOGB(dir)
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			t.Log(err)
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), dir) {
				t.Errorf("error %q\nwant one naming %s and containing %q", err, dir, tc.want)
			}
			// Load fails the same way and leaves no cache behind.
			if _, _, err := Load(dir, LoadOptions{CacheDir: t.TempDir()}); err == nil {
				t.Error("Load accepted the bad input")
			}
			if _, err := os.Stat(filepath.Join(dir, "processed")); !os.IsNotExist(err) {
				t.Errorf("Load of bad input left processed/ behind (%v)", err)
			}
		})
	}
}

// writeOGB and ReadOGB are inverses, also for missing labels, atom groups and
// task names that need CSV quoting.
func TestWriteReadRoundTrip(t *testing.T) {
	src := t.TempDir()
	files := tinyFiles()
	files[fileMapping] = "\"a, first\",b,smiles,mol_id\n1,,CCO,0\n0,1,C#N,1\n"
	files[fileNodeGroup] = "0\n0\n-1\n3\n3\n"
	writeFiles(t, src, files)
	d, err := ReadOGB(src)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d.AtomGroup, []int32{0, 0, -1, 3, 3}) || d.Tasks[0] != "a, first" {
		t.Fatalf("groups %v, tasks %q", d.AtomGroup, d.Tasks)
	}
	out := filepath.Join(t.TempDir(), "copy")
	if err := writeOGB(out, d, nil); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if got := string(gunzip(t, filepath.Join(out, name))); got != content {
			t.Errorf("%s: wrote %q, want %q", name, got, content)
		}
	}
}
