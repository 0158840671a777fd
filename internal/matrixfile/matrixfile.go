// Package matrixfile writes a matrix of numbers row by row, such as one
// embedding or one prediction per molecule, as a NumPy .npy file or as a CSV
// file, chosen by the name's extension. Rows stream through a buffer to a
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
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/micrograph/micrograph/internal/atomicfile"
)

// Columns describes a matrix file's columns.
type Columns struct {
	// Keys name the text columns a CSV file starts with (say "row",
	// "smiles"); a .npy file holds numbers only and has none.
	Keys []string
	// Values name the number columns, one per matrix column.
	Values []string
	// Float64 stores values in double precision (.npy dtype <f8, CSV text
	// that reads back as the same float64); otherwise they are rounded to
	// float32 (<f4, the shortest text of the float32).
	Float64 bool
}

// AddFunc appends one row: its keys (one per Columns.Keys, ignored by a .npy
// file) and its values (one per Columns.Values; NaN allowed).
type AddFunc func(keys []string, values []float64) error

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
	if len(cols.Values) == 0 {
		return fmt.Errorf("%s: a matrix needs at least one value column", path)
	}
	return atomicfile.Write(path, 0o644, func(w io.Writer) error {
		if format == ".npy" {
			at, ok := w.(io.WriterAt)
			if !ok {
				return fmt.Errorf("%s: the temporary file cannot be rewritten in place", path)
			}
			return writeNPY(w, at, len(cols.Values), cols.Float64, fill)
		}
		return writeCSV(w, cols, fill)
	})
}

// npyHeaderSize is the room kept for the .npy header (magic, version,
// length, dictionary), written last, when the row count is known, so that
// rows stream in one pass. 128 bytes hold the dictionary with 20-digit
// dimensions and keep the data 64-byte aligned as NumPy's own files are.
const npyHeaderSize = 128

// npyHeader is the header of a little-endian float32 (or float64) C-order
// rows×cols array in .npy format 1.0: magic, version 1.0, the dictionary's length as
// uint16, the dictionary padded with spaces to npyHeaderSize and ending in a
// newline.
func npyHeader(rows, cols int, float64s bool) []byte {
	descr := "<f4"
	if float64s {
		descr = "<f8"
	}
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%d, %d), }", descr, rows, cols)
	h := make([]byte, 0, npyHeaderSize)
	h = append(h, "\x93NUMPY\x01\x00"...)
	h = binary.LittleEndian.AppendUint16(h, npyHeaderSize-10)
	h = append(h, dict...)
	for len(h) < npyHeaderSize-1 {
		h = append(h, ' ')
	}
	return append(h, '\n')
}

func writeNPY(w io.Writer, at io.WriterAt, cols int, float64s bool, fill func(add AddFunc) error) error {
	// A provisional header takes the header's room; the real one replaces it at the end.
	if _, err := w.Write(npyHeader(0, cols, float64s)); err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	rows := 0
	size := 4
	if float64s {
		size = 8
	}
	row := make([]byte, size*cols)
	err := fill(func(_ []string, values []float64) error {
		if len(values) != cols {
			return fmt.Errorf("row %d has %d values, want %d", rows, len(values), cols)
		}
		for j, v := range values {
			if float64s {
				binary.LittleEndian.PutUint64(row[8*j:], math.Float64bits(v))
			} else {
				binary.LittleEndian.PutUint32(row[4*j:], math.Float32bits(float32(v)))
			}
		}
		rows++
		_, err := bw.Write(row)
		return err
	})
	if err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	_, err = at.WriteAt(npyHeader(rows, cols, float64s), 0)
	return err
}

func writeCSV(w io.Writer, cols Columns, fill func(add AddFunc) error) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	var line []byte
	for j, name := range append(append([]string{}, cols.Keys...), cols.Values...) {
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
	err := fill(func(keys []string, values []float64) error {
		if len(keys) != len(cols.Keys) || len(values) != len(cols.Values) {
			return fmt.Errorf("row %d has %d keys and %d values, want %d and %d",
				rows, len(keys), len(values), len(cols.Keys), len(cols.Values))
		}
		line = line[:0]
		for _, k := range keys {
			line = append(appendField(line, k), ',')
		}
		for j, v := range values {
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
