package matrixfile

import (
	"encoding/binary"
	"encoding/csv"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/internal/testenv"
)

// sample is a 3×2 matrix with a NaN row, an exact value, a value float32
// cannot hold exactly, and the extremes of float32.
var sample = struct {
	keys   [][]string
	values [][]float64
}{
	keys:   [][]string{{"0", "CCO"}, {"1", `C"1,2`}, {"2", " N"}},
	values: [][]float64{{1.5, -2}, {nan, nan}, {0.1, math.MaxFloat32}},
}

var nan = math.NaN()

func writeSample(path string, float64s bool) error {
	cols := Columns{Keys: []string{"row", "smiles"}, Values: []string{"e_0", "e_1"}, Float64: float64s}
	return Write(path, cols, func(add AddFunc) error {
		for i := range sample.values {
			if err := add(Row{Keys: sample.keys[i], Values: sample.values[i]}); err != nil {
				return err
			}
		}
		return nil
	})
}

// The header is the one NumPy's format 1.0 describes, byte by byte: magic,
// version 1.0, the dictionary's length (118 = 128 - 10) little-endian, the
// dictionary, spaces, and a final newline.
func TestNPYHeader(t *testing.T) {
	h := newNPYLayout(Columns{Values: make([]string, 300)}).header(1128)
	if len(h) != 128 {
		t.Fatalf("header of %d bytes, want 128", len(h))
	}
	if got := string(h[:8]); got != "\x93NUMPY\x01\x00" {
		t.Errorf("magic and version %q", got)
	}
	if n := binary.LittleEndian.Uint16(h[8:10]); n != 118 {
		t.Errorf("dictionary length %d, want 118", n)
	}
	want := "{'descr': '<f4', 'fortran_order': False, 'shape': (1128, 300), }"
	if got := strings.TrimRight(string(h[10:]), " \n"); got != want {
		t.Errorf("dictionary %q, want %q", got, want)
	}
	if h[127] != '\n' {
		t.Errorf("last byte %q, want a newline", h[127])
	}
	// The largest row count still fits.
	if big := newNPYLayout(Columns{Values: make([]string, 300), Float64: true}).header(math.MaxInt64); len(big) != 128 || big[127] != '\n' || !strings.HasSuffix(strings.TrimRight(string(big), " \n"), "}") {
		t.Errorf("header for a 19-digit row count: %q", big)
	}
}

// NumPy loads the .npy file as a float32 (or float64) 3×2 C-order array
// holding exactly the values written, compared as bit patterns, NaN row
// included.
func TestNumPyLoadsNPY(t *testing.T) {
	python := testenv.Python(t, "numpy")
	const script = `
import json, sys
import numpy as np
a = np.load(sys.argv[1])
bits = a.view(np.uint32 if a.dtype == np.float32 else np.uint64)
json.dump({"dtype": str(a.dtype), "shape": list(a.shape), "c": bool(a.flags.c_contiguous),
           "bits": [str(b) for b in bits.ravel()]}, sys.stdout)
`
	for _, float64s := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "emb.npy")
		if err := writeSample(path, float64s); err != nil {
			t.Fatal(err)
		}
		out, err := python.Command("-c", script, path).Output()
		if err != nil {
			t.Fatalf("numpy.load: %v\n%s", err, stderrOf(err))
		}
		var got struct {
			Dtype string
			Shape []int
			C     bool
			Bits  []string
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		dtype := map[bool]string{false: "float32", true: "float64"}[float64s]
		if got.Dtype != dtype || len(got.Shape) != 2 || got.Shape[0] != 3 || got.Shape[1] != 2 || !got.C {
			t.Fatalf("numpy sees dtype %s shape %v C-order %v, want %s [3 2] true", got.Dtype, got.Shape, got.C, dtype)
		}
		for i, row := range sample.values {
			for j, v := range row {
				want := strconv.FormatUint(uint64(math.Float32bits(float32(v))), 10)
				if float64s {
					want = strconv.FormatUint(math.Float64bits(v), 10)
				}
				if b := got.Bits[2*i+j]; b != want {
					t.Errorf("%s [%d,%d]: bits %s, want %s (%g)", dtype, i, j, b, want, v)
				}
			}
		}
	}
}

// The CSV file reads back (encoding/csv) with its header, the keys quoted
// where they must be, and each value as the shortest text of the float32
// (or float64) written.
func TestCSVReadsBack(t *testing.T) {
	for _, tc := range []struct {
		float64s bool
		last     []string
	}{
		{false, []string{"2", " N", "0.1", "3.4028235e+38"}},
		{true, []string{"2", " N", "0.1", "3.4028234663852886e+38"}},
	} {
		path := filepath.Join(t.TempDir(), "emb.csv")
		if err := writeSample(path, tc.float64s); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := csv.NewReader(f).ReadAll()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := [][]string{
			{"row", "smiles", "e_0", "e_1"},
			{"0", "CCO", "1.5", "-2"},
			{"1", `C"1,2`, "NaN", "NaN"},
			tc.last,
		}
		if len(recs) != len(want) {
			t.Fatalf("%d records, want %d: %q", len(recs), len(want), recs)
		}
		for i := range want {
			if strings.Join(recs[i], "|") != strings.Join(want[i], "|") {
				t.Errorf("float64 %v: record %d = %q, want %q", tc.float64s, i, recs[i], want[i])
			}
		}
	}
}

// pandas, what users read such files with, finds the same table: NaN for
// "NaN", the quoted SMILES intact.
func TestPandasReadsCSV(t *testing.T) {
	python := testenv.Python(t, "pandas")
	path := filepath.Join(t.TempDir(), "emb.csv")
	if err := writeSample(path, false); err != nil {
		t.Fatal(err)
	}
	const script = `
import json, sys
import numpy as np
import pandas as pd
f = pd.read_csv(sys.argv[1], keep_default_na=True)
json.dump({"smiles": f["smiles"].tolist(), "nan": np.isnan(f[["e_0", "e_1"]].values).ravel().tolist(),
           "e_0": [None if np.isnan(v) else float(np.float32(v)) for v in f["e_0"]]}, sys.stdout)
`
	out, err := python.Command("-c", script, path).Output()
	if err != nil {
		t.Fatalf("pandas: %v\n%s", err, stderrOf(err))
	}
	var got struct {
		SMILES []string
		NaN    []bool
		E0     []*float64 `json:"e_0"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if strings.Join(got.SMILES, "|") != `CCO|C"1,2| N` {
		t.Errorf("smiles %q", got.SMILES)
	}
	if want := []bool{false, false, true, true, false, false}; !slices.Equal(got.NaN, want) {
		t.Errorf("NaN mask %v, want %v", got.NaN, want)
	}
	if got.E0[0] == nil || *got.E0[0] != 1.5 || got.E0[2] == nil || float32(*got.E0[2]) != 0.1 {
		t.Errorf("e_0 %v", got.E0)
	}
}

// A failure anywhere leaves no file (and no temporary file) behind, and an
// existing file untouched: a row of the wrong width, an error from the
// caller after some rows, an unknown extension.
func TestFailureLeavesNothing(t *testing.T) {
	callerErr := errors.New("the encoder failed")
	cases := []struct {
		name, file string
		fill       func(add AddFunc) error
		wantErr    string
	}{
		{"npy wrong width", "m.npy", func(add AddFunc) error {
			add(Row{Values: []float64{1, 2}})
			return add(Row{Values: []float64{1}})
		}, "row 1 has 0 index and 1 values, want 0 and 2"},
		{"csv wrong keys", "m.csv", func(add AddFunc) error {
			return add(Row{Keys: []string{"0"}, Values: []float64{1, 2}})
		}, "row 0 has 1 keys, 0 index and 2 values, want 2, 0 and 2"},
		{"npy caller error", "m.npy", func(add AddFunc) error {
			add(Row{Values: []float64{1, 2}})
			return callerErr
		}, callerErr.Error()},
		{"csv caller error", "m.csv", func(add AddFunc) error {
			add(Row{Keys: []string{"0", "C"}, Values: []float64{1, 2}})
			return callerErr
		}, callerErr.Error()},
		{"extension", "m.txt", func(add AddFunc) error { return nil }, "m.txt: the extension must be .npy or .csv"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, c.file)
			err := Write(path, Columns{Keys: []string{"row", "smiles"}, Values: []string{"a", "b"}}, c.fill)
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, c.wantErr)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("left %v behind", entries)
			}
			// An existing file is kept as it was.
			if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			Write(path, Columns{Keys: []string{"row", "smiles"}, Values: []string{"a", "b"}}, c.fill)
			if b, _ := os.ReadFile(path); string(b) != "old" {
				t.Errorf("existing file now %q", b)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Errorf("left %d entries behind, want the old file only", len(entries))
			}
		})
	}
}

// An empty matrix is a valid file: NumPy's shape (0, d), a header-only CSV.
func TestEmptyMatrix(t *testing.T) {
	dir := t.TempDir()
	none := func(add AddFunc) error { return nil }
	if err := Write(filepath.Join(dir, "e.npy"), Columns{Values: []string{"a", "b", "c"}}, none); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "e.npy"))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != string(newNPYLayout(Columns{Values: []string{"a", "b", "c"}}).header(0)) {
		t.Errorf("empty .npy is %q", b)
	}
	if err := Write(filepath.Join(dir, "e.csv"), Columns{Keys: []string{"row"}, Values: []string{"a", "b"}}, none); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "e.csv")); string(b) != "row,a,b\n" {
		t.Errorf("empty .csv is %q", b)
	}
}

// stderrOf is what a failed Python printed, for the failure message.
func stderrOf(err error) []byte {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.Stderr
	}
	return nil
}

// records is sample with integer index columns: three atom rows of two
// molecules, as embed --atoms writes them; width 3 adds a column.
var records = struct {
	index [][]int64
	third []float64
}{
	index: [][]int64{{0, 0}, {0, 1}, {math.MaxInt64, 7}},
	third: []float64{7, nan, -1e-3},
}

func writeRecords(path string, width int, float64s bool) error {
	cols := Columns{Index: []string{"row", "atom"}, Field: "e", Values: []string{"e_0", "e_1", "e_2"}[:width], Float64: float64s}
	return Write(path, cols, func(add AddFunc) error {
		for i := range sample.values {
			if err := add(Row{Index: records.index[i], Values: recordValues(i, width)}); err != nil {
				return err
			}
		}
		return nil
	})
}

// recordValues are the values of record i of width width.
func recordValues(i, width int) []float64 {
	return append(slices.Clone(sample.values[i]), records.third[i])[:width]
}

// With index columns the header describes a structured array: an int64
// field per index column, then the values as one field, in room that is a
// multiple of 64 bytes and holds a 19-digit row count.
func TestStructuredNPYHeader(t *testing.T) {
	l := newNPYLayout(Columns{Index: []string{"row", "atom", "atomic_num"}, Field: "e", Values: make([]string, 300)})
	want := "{'descr': [('row', '<i8'), ('atom', '<i8'), ('atomic_num', '<i8'), ('e', '<f4', (300,))], 'fortran_order': False, 'shape': (12,), }"
	for _, rows := range []int{12, math.MaxInt64} {
		h := l.header(rows)
		if len(h) != 192 || h[len(h)-1] != '\n' || int(binary.LittleEndian.Uint16(h[8:10])) != len(h)-10 {
			t.Fatalf("%d rows: header of %d bytes (length field %d), want 192 ending in a newline", rows, len(h), binary.LittleEndian.Uint16(h[8:10]))
		}
		if rows == 12 {
			if got := strings.TrimRight(string(h[10:]), " \n"); got != want {
				t.Errorf("dictionary %q, want %q", got, want)
			}
		}
	}
}

// NumPy loads a file with index columns as a structured array: one record
// per row, int64 fields row and atom, and a float32 (or float64) field e of
// shape (width,), holding exactly what was written; an odd number of
// float32 values ends each record in NumPy's own padding, so that
// torch.from_numpy takes every field as it is.
func TestNumPyLoadsRecords(t *testing.T) {
	python := testenv.Python(t, "numpy", "torch")
	const script = `
import json, sys
import numpy as np
import torch
a = np.load(sys.argv[1])
e = a["e"]
bits = np.ascontiguousarray(e).view(np.uint32 if e.dtype == np.float32 else np.uint64)
json.dump({"names": list(a.dtype.names), "shape": list(a.shape), "e_shape": list(e.shape),
           "dtypes": [str(a.dtype[n].base) for n in a.dtype.names], "itemsize": a.dtype.itemsize,
           "row": [str(v) for v in torch.from_numpy(a["row"]).tolist()], "atom": torch.from_numpy(a["atom"]).tolist(),
           "torch_e": bool(np.array_equal(torch.from_numpy(e).numpy(), e, equal_nan=True)),
           "bits": [str(b) for b in bits.ravel()]}, sys.stdout)
`
	for _, tc := range []struct {
		width    int
		float64s bool
		itemsize int
	}{{2, false, 24}, {3, false, 32}, {2, true, 32}, {3, true, 40}} {
		path := filepath.Join(t.TempDir(), "atoms.npy")
		if err := writeRecords(path, tc.width, tc.float64s); err != nil {
			t.Fatal(err)
		}
		out, err := python.Command("-c", script, path).Output()
		if err != nil {
			t.Fatalf("numpy.load: %v\n%s", err, stderrOf(err))
		}
		var got struct {
			Names, Dtypes, Row, Bits []string
			Shape                    []int
			EShape                   []int `json:"e_shape"`
			Itemsize                 int
			Atom                     []int64
			TorchE                   bool `json:"torch_e"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		value := map[bool]string{false: "float32", true: "float64"}[tc.float64s]
		if !slices.Equal(got.Names, []string{"row", "atom", "e"}) || !slices.Equal(got.Dtypes, []string{"int64", "int64", value}) ||
			!slices.Equal(got.Shape, []int{3}) || !slices.Equal(got.EShape, []int{3, tc.width}) || got.Itemsize != tc.itemsize || !got.TorchE {
			t.Fatalf("%+v: numpy sees %+v, want fields row, atom, e of int64, int64, %s, 3 records of %d bytes, e 3×%d that torch takes",
				tc, got, value, tc.itemsize, tc.width)
		}
		if !slices.Equal(got.Row, []string{"0", "0", strconv.FormatInt(math.MaxInt64, 10)}) || !slices.Equal(got.Atom, []int64{0, 1, 7}) {
			t.Errorf("%+v: row %v atom %v", tc, got.Row, got.Atom)
		}
		for i := range sample.values {
			for j, v := range recordValues(i, tc.width) {
				want := strconv.FormatUint(uint64(math.Float32bits(float32(v))), 10)
				if tc.float64s {
					want = strconv.FormatUint(math.Float64bits(v), 10)
				}
				if b := got.Bits[tc.width*i+j]; b != want {
					t.Errorf("%+v [%d,%d]: bits %s, want %s (%g)", tc, i, j, b, want, v)
				}
			}
		}
	}
}

// In a CSV file the index columns follow the keys as integers, and field
// names that would not be identifiers in a .npy header are refused.
func TestCSVIndexColumns(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "atoms.csv")
	if err := writeRecords(path, 2, false); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "row,atom,e_0,e_1\n0,0,1.5,-2\n0,1,NaN,NaN\n9223372036854775807,7,0.1,3.4028235e+38\n"; string(b) != want {
		t.Errorf("CSV %q, want %q", b, want)
	}
	for _, cols := range []Columns{
		{Index: []string{"row"}, Field: "e'", Values: []string{"a"}},
		{Index: []string{"1row"}, Field: "e", Values: []string{"a"}},
		{Index: []string{"row"}, Values: []string{"a"}},
	} {
		err := Write(filepath.Join(dir, "bad.npy"), cols, func(AddFunc) error { return nil })
		if err == nil || !strings.Contains(err.Error(), "is not an identifier") {
			t.Errorf("%+v: error %v", cols, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("left %v behind", entries)
	}
}
