// Package matrixfile writes a matrix of numbers row by row, such as one
// embedding or one prediction per molecule, as a NumPy .npy file or as a CSV
// file, chosen by the name's extension; rows may carry integer index columns
// (say input row and atom), which make the .npy file a structured array
// that NumPy alone reads. Rows stream through a buffer to a
// temporary file beside the destination, so memory does not grow with the row
// count, and the file appears complete or not at all (package atomicfile).
//
// It lives in internal/ rather than data/ because it is an output format with
// no notion of molecules: cmd/ and the evaluation packages may both use it
// without data/ gaining a writer nobody there needs.
package matrixfile

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/micrograph/micrograph/internal/atomicfile"
)

// Columns describes a matrix file's columns, in the order a row holds them.
type Columns struct {
	// Keys name the text columns a CSV file starts with (say "row",
	// "smiles"); a .npy file holds numbers only and has none.
	Keys []string
	// Index names integer columns that both formats hold, after Keys (say
	// "row", "atom"). Without them a .npy file is a plain
	// rows×len(Values) matrix; with them it is a structured array of one
	// record per row: an int64 field per Index name, then the values as one
	// field named Field, of shape (len(Values),). Index names and Field are
	// Python identifiers.
	Index []string
	Field string
	// Values name the number columns, one per matrix column.
	Values []string
	// Float64 stores values in double precision (.npy dtype <f8, CSV text
	// that reads back as the same float64); otherwise they are rounded to
	// float32 (<f4, the shortest text of the float32).
	Float64 bool
}

// Row is one row of a matrix file.
type Row struct {
	Keys   []string  // one per Columns.Keys (a .npy file ignores them)
	Index  []int64   // one per Columns.Index
	Values []float64 // one per Columns.Values; NaN allowed
}

// AddFunc appends one row.
type AddFunc func(Row) error

// Format is the file format of path by its extension, ".npy" or ".csv"
// (case ignored); anything else is an error naming path.
func Format(path string) (string, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".npy", ".csv":
		return ext, nil
	}
	return "", fmt.Errorf("%s: the extension must be .npy or .csv", path)
}

// Write creates or replaces path with the rows fill adds, in order. The file
// is written under a temporary name and renamed into place only when fill
// and the writing succeed; on any error path is left as it was.
func Write(path string, cols Columns, fill func(add AddFunc) error) error {
	format, err := Format(path)
	if err != nil {
		return err
	}
	if err := cols.validate(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return atomicfile.Write(path, 0o644, func(w io.Writer) error {
		if format == ".npy" {
			at, ok := w.(io.WriterAt)
			if !ok {
				return fmt.Errorf("%s: the temporary file cannot be rewritten in place", path)
			}
			return writeNPY(w, at, cols, fill)
		}
		return writeCSV(w, cols, fill)
	})
}

// validate checks what every row and the .npy header rely on.
func (c Columns) validate() error {
	if len(c.Values) == 0 {
		return errors.New("a matrix needs at least one value column")
	}
	if len(c.Index) == 0 {
		return nil
	}
	for _, name := range append(slices.Clone(c.Index), c.Field) {
		if !isIdentifier(name) {
			return fmt.Errorf("field name %q is not an identifier", name)
		}
	}
	return nil
}

// isIdentifier tells whether s is an ASCII Python identifier, which a
// structured .npy header may hold without escaping.
func isIdentifier(s string) bool {
	for i, r := range s {
		if r != '_' && !(r >= 'a' && r <= 'z') && !(r >= 'A' && r <= 'Z') && !(i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

// npyLayout is the array a .npy file holds: its dtype and the header room.
type npyLayout struct {
	descr      string // the dtype as the header writes it
	cols       int    // the second dimension of a plain matrix; 0 for records
	pad        int    // bytes of padding that end each record
	headerSize int
}

// newNPYLayout is the .npy layout of cols: a plain little-endian float32
// (or float64) C-order rows×len(Values) matrix, or with Index columns a
// structured array of rows records, padded as NumPy pads them to a multiple
// of 8 bytes, so that every field's stride is a multiple of its size (as
// torch.from_numpy needs). The header is written last, when the
// row count is known, so that rows stream in one pass: its room holds the
// dictionary with a 19-digit row count and is a multiple of 64 bytes, which
// keeps the data aligned as NumPy's own files are (128 bytes for a matrix).
func newNPYLayout(cols Columns) npyLayout {
	value := "<f4"
	if cols.Float64 {
		value = "<f8"
	}
	l := npyLayout{descr: "'" + value + "'", cols: len(cols.Values)}
	if len(cols.Index) > 0 {
		var fields []string
		for _, name := range cols.Index {
			fields = append(fields, fmt.Sprintf("('%s', '<i8')", name))
		}
		fields = append(fields, fmt.Sprintf("('%s', '%s', (%d,))", cols.Field, value, len(cols.Values)))
		if !cols.Float64 && len(cols.Values)%2 == 1 {
			fields = append(fields, "('', '|V4')") // unnamed: NumPy's padding
			l.pad = 4
		}
		l = npyLayout{descr: "[" + strings.Join(fields, ", ") + "]", pad: l.pad}
	}
	l.headerSize = (10 + len(l.dict(math.MaxInt64)) + 1 + 63) / 64 * 64
	return l
}

// dict is the header's dictionary for an array of rows rows.
func (l npyLayout) dict(rows int) string {
	shape := fmt.Sprintf("(%d,)", rows)
	if l.cols > 0 {
		shape = fmt.Sprintf("(%d, %d)", rows, l.cols)
	}
	return fmt.Sprintf("{'descr': %s, 'fortran_order': False, 'shape': %s, }", l.descr, shape)
}

// header is the .npy format 1.0 header of an array of rows rows: magic,
// version 1.0, the dictionary's length as uint16, the dictionary padded
// with spaces to headerSize and ending in a newline.
func (l npyLayout) header(rows int) []byte {
	h := make([]byte, 0, l.headerSize)
	h = append(h, "\x93NUMPY\x01\x00"...)
	h = binary.LittleEndian.AppendUint16(h, uint16(l.headerSize-10))
	h = append(h, l.dict(rows)...)
	for len(h) < l.headerSize-1 {
		h = append(h, ' ')
	}
	return append(h, '\n')
}

func writeNPY(w io.Writer, at io.WriterAt, cols Columns, fill func(add AddFunc) error) error {
	l := newNPYLayout(cols)
	// A provisional header takes the header's room; the real one replaces it at the end.
	if _, err := w.Write(l.header(0)); err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	rows := 0
	size := 4
	if cols.Float64 {
		size = 8
	}
	record := make([]byte, 8*len(cols.Index)+size*len(cols.Values)+l.pad)
	err := fill(func(r Row) error {
		if len(r.Index) != len(cols.Index) || len(r.Values) != len(cols.Values) {
			return fmt.Errorf("row %d has %d index and %d values, want %d and %d",
				rows, len(r.Index), len(r.Values), len(cols.Index), len(cols.Values))
		}
		for i, v := range r.Index {
			binary.LittleEndian.PutUint64(record[8*i:], uint64(v))
		}
		b := record[8*len(cols.Index):]
		for j, v := range r.Values {
			if cols.Float64 {
				binary.LittleEndian.PutUint64(b[8*j:], math.Float64bits(v))
			} else {
				binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(float32(v)))
			}
		}
		rows++
		_, err := bw.Write(record)
		return err
	})
	if err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	_, err = at.WriteAt(l.header(rows), 0)
	return err
}

func writeCSV(w io.Writer, cols Columns, fill func(add AddFunc) error) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	var line []byte
	for j, name := range slices.Concat(cols.Keys, cols.Index, cols.Values) {
		if j > 0 {
			line = append(line, ',')
		}
		line = appendField(line, name)
	}
	if _, err := bw.Write(append(line, '\n')); err != nil {
		return err
	}
	rows := 0
	bits := 32
	if cols.Float64 {
		bits = 64
	}
	err := fill(func(r Row) error {
		if len(r.Keys) != len(cols.Keys) || len(r.Index) != len(cols.Index) || len(r.Values) != len(cols.Values) {
			return fmt.Errorf("row %d has %d keys, %d index and %d values, want %d, %d and %d",
				rows, len(r.Keys), len(r.Index), len(r.Values), len(cols.Keys), len(cols.Index), len(cols.Values))
		}
		line = line[:0]
		for _, k := range r.Keys {
			line = append(appendField(line, k), ',')
		}
		for _, v := range r.Index {
			line = append(strconv.AppendInt(line, v, 10), ',')
		}
		for j, v := range r.Values {
			if j > 0 {
				line = append(line, ',')
			}
			// The shortest text that reads back as the same number; NaN as "NaN", which pandas and NumPy read.
			line = strconv.AppendFloat(line, v, 'g', -1, bits)
		}
		rows++
		_, err := bw.Write(append(line, '\n'))
		return err
	})
	if err != nil {
		return err
	}
	return bw.Flush()
}

// appendField appends s as one CSV field, quoted (RFC 4180) when it holds a
// comma, a quote, a line break or leading space, as encoding/csv would.
func appendField(buf []byte, s string) []byte {
	if s == "" || !strings.ContainsAny(s, ",\"\r\n") && s[0] != ' ' && s[0] != '\t' {
		return append(buf, s...)
	}
	buf = append(buf, '"')
	buf = append(buf, strings.ReplaceAll(s, `"`, `""`)...)
	return append(buf, '"')
}
