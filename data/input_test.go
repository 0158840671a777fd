package data

import (
	"bytes"
	"compress/gzip"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf16"
)

// endless is a reader of zero bytes that never ends, as /dev/zero.
type endless struct{ read int64 }

func (e *endless) Read(p []byte) (int, error) {
	clear(p)
	e.read += int64(len(p))
	return len(p), nil
}

// A CSV without line breaks is refused after MaxLineBytes of a line, naming
// file and line, instead of being read until memory runs out; a quoted field
// spanning lines counts towards its row's bound. The reader stops within a
// few buffers of the limit.
func TestCSVLineLimit(t *testing.T) {
	src := &endless{}
	cr := newCSVReader("zero.csv", src)
	_, err := cr.read()
	want := "zero.csv:1: line longer than 1048576 bytes (1 MiB), the limit: not a CSV file of molecules?"
	if err == nil || err.Error() != want {
		t.Fatalf("endless line: %v, want %q", err, want)
	}
	if src.read > MaxLineBytes+1<<17 {
		t.Errorf("read %d bytes for a limit of %d", src.read, MaxLineBytes)
	}

	long := strings.Repeat("C", MaxLineBytes/2)
	tests := []struct {
		name, content, want string
	}{
		{"rows just under the limit", "smiles\n" + strings.Repeat("C", MaxLineBytes) + "\nCCO\n", ""},
		{"row 3 over the limit", "smiles\nCCO\n" + strings.Repeat("C", MaxLineBytes+1) + "\n", "in.csv:3: line longer than"},
		{"quoted field over two lines", "smiles,y\n\"" + long + "\n" + long + "\",1\n", "in.csv:2: line longer than"},
		{"CR-only lines", "smiles\r" + strings.Repeat("CCO\r", MaxLineBytes/4+1), "in.csv:1: line longer than 1048576 bytes (1 MiB), the limit: not a CSV file of molecules? (it holds 262143 carriage returns: do the lines end with CR only? convert them to LF)"},
	}
	for _, tc := range tests {
		cr := newCSVReader("in.csv", strings.NewReader(tc.content))
		var err error
		rows := 0
		for err == nil {
			_, err = cr.read()
			rows++
		}
		if tc.want == "" {
			if err != io.EOF || rows != 4 {
				t.Errorf("%s: %d reads, %v; want 3 records", tc.name, rows, err)
			}
			continue
		}
		if !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}

	// OGB's .csv.gz files are bounded too.
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write([]byte("1,2\n"))
	w.Write(bytes.Repeat([]byte("7"), MaxLineBytes+10))
	w.Close()
	path := filepath.Join(t.TempDir(), "edge.csv.gz")
	if err := os.WriteFile(path, gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := openLines(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	if line, err := r.next(); string(line) != "1,2" || err != nil {
		t.Fatalf("first line %q, %v", line, err)
	}
	if _, err := r.next(); err == nil || !strings.HasPrefix(err.Error(), path+":2: line longer than 1048576 bytes") {
		t.Errorf("long .csv.gz line: %v", err)
	}
}

// ReadTable reads a header after a UTF-8 byte order mark (Excel's), names
// CR-only line endings instead of finding "only a header", says that a label
// beyond float32 is a number too large rather than "not a number".
func TestReadTableInput(t *testing.T) {
	tests := []struct {
		name, content string
		labels        []string
		want          string // error; "" reads smiles CCO, CCN with labels 1, 0.5
	}{
		{"byte order mark", "\ufeffsmiles,y\nCCO,1\nCCN,0.5\n", nil, ""},
		{"byte order mark before a quoted name", "\ufeff\"smiles\",y\nCCO,1\nCCN,0.5\n", nil, ""},
		{"CRLF", "smiles,y\r\nCCO,1\r\nCCN,0.5\r\n", nil, ""},
		{"CR only", "smiles,y\rCCO,1\rCCN,0.5\r", nil, "in.csv:1: lines end with a carriage return only (classic Mac OS): convert them to LF or CRLF line endings"},
		{"beyond float64", "smiles,y\nCCO,1\nCCN,1e309\n", nil, `in.csv:3: column "y": "1e309" is a number beyond the range of float32 labels (±3.4e38)`},
		{"beyond float32", "smiles,y\nCCO,-1e39\nCCN,0\n", nil, `in.csv:2: column "y": "-1e39" is a number beyond the range of float32 labels (±3.4e38)`},
		{"1e308", "smiles,y\nCCO,1e308\n", nil, `in.csv:2: column "y": "1e308" is a number beyond the range of float32 labels (±3.4e38)`},
		{"infinity", "smiles,y\nCCO,inf\n", nil, `in.csv:2: column "y": "inf" is not a finite number`},
		{"word", "smiles,y\nCCO,yes\n", nil, `in.csv:2: column "y": "yes" is not a number`},
		// Stored as 0 once (as float64, or as float32), a label that is not 0.
		{"below float64", "smiles,y\nCCO,1e-400\n", nil, `in.csv:2: column "y": "1e-400" is a number too close to 0 for float32 labels (below 1.4e-45 in magnitude, it would be stored as 0)`},
		{"below float32", "smiles,y\nCCO,1\nCCN,-1e-50\n", nil, `in.csv:3: column "y": "-1e-50" is a number too close to 0 for float32 labels (below 1.4e-45 in magnitude, it would be stored as 0)`},
		{"hexadecimal below float32", "smiles,y\nCCO,0x1p-200\n", nil, `in.csv:2: column "y": "0x1p-200" is a number too close to 0 for float32 labels (below 1.4e-45 in magnitude, it would be stored as 0)`},
		{"UTF-16", utf16LE("\ufeffsmiles,y\nCCO,1\nCCN,0.5\n"), nil, "in.csv:1: the file is UTF-16 (it starts with a UTF-16 byte order mark): save it as UTF-8"},
		{"UTF-16 without a byte order mark", utf16LE("smiles,y\nCCO,1\nCCN,0.5\n"), nil, "in.csv:1: the header holds NUL bytes: is the file UTF-16? save it as UTF-8"},
	}
	for _, tc := range tests {
		path := writeInput(t, tc.content)
		table, err := ReadTable(path, Columns{SMILES: "smiles", Targets: tc.labels})
		if tc.want != "" {
			if err == nil || err.Error() != filepath.Join(filepath.Dir(path), tc.want) {
				t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if strings.Join(table.SMILES, " ") != "CCO CCN" || strings.Join(table.Tasks, " ") != "y" ||
			len(table.Labels) != 2 || table.Labels[0] != 1 || table.Labels[1] != 0.5 {
			t.Errorf("%s: smiles %q, tasks %q, labels %v", tc.name, table.SMILES, table.Tasks, table.Labels)
		}
	}
	for _, zero := range []string{"0", "-0", "0.000", "0e-400", "0x0p-3000"} {
		if v, err := parseLabel([]byte(zero)); v != 0 || err != nil {
			t.Errorf("%s: %v, %v; want 0", zero, v, err)
		}
	}
	if v, err := parseLabel([]byte("1e-40")); v != float32(1e-40) || v == 0 || err != nil {
		t.Errorf("a subnormal float32 label: %v, %v", v, err)
	}
	if v, err := parseLabel([]byte("3.4e38")); float64(v) != float64(float32(3.4e38)) || err != nil || math.IsInf(float64(v), 0) {
		t.Errorf("the largest label: %v, %v", v, err)
	}
}

// A SMILES holding a NUL or bytes beyond ASCII is rejected with the byte and
// its offset; RDKit used to stop at the NUL, or skip the bytes, and make a
// one-atom molecule of the rest. A space inside is rejected too: RDKit reads
// what follows as the molecule's name, and "C C" was embedded as methane;
// spaces around a SMILES change nothing and are accepted.
func TestFeaturizeRejectsNonSMILESBytes(t *testing.T) {
	table := &Table{Source: "in.csv", SMILES: []string{"CCO", "C\x00CO", "\xff\xfeC", "CC\tC", "CCé", "C C", " CCO ", "CCO aspirin"},
		Lines: []int{2, 3, 4, 5, 6, 7, 8, 9}}
	rep, err := Featurize(table, filepath.Join(t.TempDir(), "out"), FeaturizeOptions{Split: "none"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Rejection{
		{Row: 1, Line: 3, SMILES: "C\x00CO", Reason: "byte 0x00 at offset 1: a SMILES is printable ASCII"},
		{Row: 2, Line: 4, SMILES: "\xff\xfeC", Reason: "byte 0xff at offset 0: a SMILES is printable ASCII"},
		{Row: 3, Line: 5, SMILES: "CC\tC", Reason: "byte 0x09 at offset 2: a SMILES is printable ASCII"},
		{Row: 4, Line: 6, SMILES: "CCé", Reason: "byte 0xc3 at offset 2: a SMILES is printable ASCII"},
		{Row: 5, Line: 7, SMILES: "C C", Reason: "a space at offset 1: RDKit would read what follows as a name, not as atoms"},
		{Row: 7, Line: 9, SMILES: "CCO aspirin", Reason: "a space at offset 3: RDKit would read what follows as a name, not as atoms"},
	}
	if rep.Molecules != 2 || len(rep.Rejected) != len(want) {
		t.Fatalf("%d molecules, %d rejected: %+v", rep.Molecules, len(rep.Rejected), rep.Rejected)
	}
	for i, r := range rep.Rejected {
		if r != want[i] {
			t.Errorf("rejection %d: %+v, want %+v", i, r, want[i])
		}
	}
}

// utf16LE is s encoded as UTF-16, little-endian (as Windows' "Unicode" saves).
func utf16LE(s string) string {
	var b []byte
	for _, u := range utf16.Encode([]rune(s)) {
		b = append(b, byte(u), byte(u>>8))
	}
	return string(b)
}
