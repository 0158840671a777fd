package data

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/micrograph/micrograph/internal/inputfile"
)

// lineReader reads a gzip-compressed, headerless CSV file line by line and
// names the file and line in its errors.
type lineReader struct {
	path string
	f    *os.File
	br   *bufio.Reader
	line int // number of the line last returned, from 1
}

func openLines(path string) (*lineReader, error) {
	f, err := inputfile.Open(path)
	if err != nil {
		return nil, err
	}
	gz, err := gzip.NewReader(bufio.NewReaderSize(f, 1<<16))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: not a gzip file: %w", path, err)
	}
	return &lineReader{path: path, f: f, br: bufio.NewReaderSize(gz, 1<<16)}, nil
}

func (r *lineReader) close() error { return r.f.Close() }

// next returns the next line without its line ending; the slice is valid
// until the following call. At the end it returns io.EOF; a damaged or
// truncated gzip stream is an error naming the line where it broke off, and
// so is a line longer than MaxLineBytes.
func (r *lineReader) next() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		// A line longer than the buffer: collect it whole, up to the limit.
		long := append([]byte(nil), line...)
		for err == bufio.ErrBufferFull {
			if len(long) > MaxLineBytes {
				return nil, fmt.Errorf("%s:%d: %w", r.path, r.line+1, errLongLine)
			}
			line, err = r.br.ReadSlice('\n')
			long = append(long, line...)
		}
		line = long
	}
	if len(line) > MaxLineBytes+1 { // the limit does not count the line break
		return nil, fmt.Errorf("%s:%d: %w", r.path, r.line+1, errLongLine)
	}
	switch {
	case err == io.EOF && len(line) == 0:
		return nil, io.EOF
	case err != nil && err != io.EOF:
		return nil, r.gzipError(err)
	}
	r.line++
	line = bytes.TrimSuffix(line, []byte{'\n'})
	return bytes.TrimSuffix(line, []byte{'\r'}), nil
}

func (r *lineReader) gzipError(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = errors.New("gzip data truncated")
	}
	return fmt.Errorf("%s:%d: %w", r.path, r.line+1, err)
}

// errorf formats an error about the line last returned.
func (r *lineReader) errorf(format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s", r.path, r.line, fmt.Sprintf(format, args...))
}

// finish reports an error if rows remain after the expected count.
func (r *lineReader) finish(what string) error {
	line, err := r.next()
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return err
	}
	return r.errorf("extra row %s: %s", inputfile.Quote(string(line)), what)
}

// ints parses a line of exactly len(dst) comma-separated integers into dst.
func (r *lineReader) ints(line []byte, dst []int64) error {
	if n := bytes.Count(line, []byte{','}) + 1; n != len(dst) {
		return r.errorf("%d fields, want %d", n, len(dst))
	}
	for i := range dst {
		end := bytes.IndexByte(line, ',')
		if end < 0 {
			end = len(line)
		}
		v, ok := parseInt(line[:end])
		if !ok {
			return r.errorf("field %d %s is not an integer", i+1, inputfile.Quote(string(line[:end])))
		}
		dst[i] = v
		if end < len(line) {
			line = line[end+1:]
		}
	}
	return nil
}

// expectRow reads the next line, which must exist: rows says how many the
// file should hold and why.
func (r *lineReader) expectRow(rows int64, why string) ([]byte, error) {
	line, err := r.next()
	if err == io.EOF {
		return nil, fmt.Errorf("%s:%d: file ends after %d rows, want %d (%s)", r.path, r.line+1, r.line, rows, why)
	}
	return line, err
}

// parseInt parses a decimal integer with optional sign, the only form OGB's
// files contain; it is much faster than strconv for these short fields.
func parseInt(b []byte) (int64, bool) {
	neg := false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg = b[0] == '-'
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	return v, true
}

// nonzero tells whether the number b writes has a digit other than 0 in
// its mantissa: whether it is anything but a zero, however small.
func nonzero(b []byte) bool {
	digits, exp := "123456789", "eE"
	if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
		b = b[1:]
	}
	if len(b) > 1 && b[0] == '0' && (b[1] == 'x' || b[1] == 'X') {
		b, digits, exp = b[2:], "123456789abcdefABCDEF", "pP"
	}
	if i := bytes.IndexAny(b, exp); i >= 0 {
		b = b[:i]
	}
	return bytes.ContainsAny(b, digits)
}

// ErrNotANumber is the error of a label field holding text.
var ErrNotANumber = errors.New("is not a number")

// parseLabel parses a label field: empty (or NaN) is a missing label. Its
// error is the reason the field is no label, worded to follow the quoted
// field ("is not a number").
func parseLabel(b []byte) (float32, error) {
	if len(b) == 0 {
		return nan32, nil
	}
	v, err := strconv.ParseFloat(string(b), 64)
	switch {
	case err == nil && math.IsInf(v, 0):
		return 0, errors.New("is not a finite number")
	case errors.Is(err, strconv.ErrRange) && v != 0, err == nil && math.Abs(v) > math.MaxFloat32:
		// Overflows float64 (1e309) or float32 (1e39), where labels are kept.
		return 0, errors.New("is a number beyond the range of float32 labels (±3.4e38)")
	case err == nil && float32(v) == 0 && nonzero(b):
		// Underflows float64 (1e-400, which ParseFloat reads as 0 without
		// an error) or float32 (1e-46): it would be stored as 0, another
		// label.
		return 0, errors.New("is a number too close to 0 for float32 labels (below 1.4e-45 in magnitude, it would be stored as 0)")
	case err != nil:
		return 0, ErrNotANumber
	}
	return float32(v), nil
}

// gzipWriter writes text to a gzip stream through a buffer: the caller
// appends a line's text to buf and then calls endLine.
type gzipWriter struct {
	gz  *gzip.Writer
	buf []byte
}

func newGzipWriter(w io.Writer) *gzipWriter {
	return &gzipWriter{gz: gzip.NewWriter(w), buf: make([]byte, 0, 1<<16)}
}

// endLine finishes a line and writes the buffer once it is large.
func (w *gzipWriter) endLine() error {
	w.buf = append(w.buf, '\n')
	if len(w.buf) >= 1<<15 {
		return w.flush()
	}
	return nil
}

func (w *gzipWriter) flush() error {
	_, err := w.gz.Write(w.buf)
	w.buf = w.buf[:0]
	return err
}

func (w *gzipWriter) close() error {
	if err := w.flush(); err != nil {
		return err
	}
	return w.gz.Close()
}

// appendInts appends comma-separated integers.
func appendInts[T uint8 | int32](buf []byte, vals []T) []byte {
	for i, v := range vals {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = strconv.AppendInt(buf, int64(v), 10)
	}
	return buf
}

// appendLabel formats a label as OGB's files hold integer labels: whole
// numbers without a decimal point, other values in the shortest form that
// reads back as the same float32, a missing label as an empty field.
func appendLabel(buf []byte, v float32) []byte {
	switch {
	case v != v:
		return buf
	case v == float32(math.Trunc(float64(v))) && math.Abs(float64(v)) < 1e9:
		return strconv.AppendInt(buf, int64(v), 10)
	}
	return strconv.AppendFloat(buf, float64(v), 'g', -1, 32)
}

// csvReader reads a CSV file with encoding/csv and names file and line in
// its errors, including those (such as a truncated gzip stream) for which
// encoding/csv gives no line.
type csvReader struct {
	*csv.Reader
	path  string
	line  int  // line where the last record read ends
	utf16 bool // the text starts with a UTF-16 byte order mark
}

func newCSVReader(path string, r io.Reader) *csvReader {
	// A UTF-8 byte order mark at the start (Excel writes one) would become
	// part of the first column's name.
	br := bufio.NewReader(r)
	head, _ := br.Peek(len(utf8BOM))
	if bytes.Equal(head, utf8BOM) {
		br.Discard(len(utf8BOM))
	}
	utf16 := bytes.HasPrefix(head, []byte{0xff, 0xfe}) || bytes.HasPrefix(head, []byte{0xfe, 0xff})
	return &csvReader{Reader: csv.NewReader(&recordLimiter{r: br}), path: path, utf16: utf16}
}

// MaxLineBytes bounds a line of any file read as text (CSV, OGB's
// .csv.gz): 1 MiB, over a hundred times the longest SMILES admitted by
// default. A CSV row counts as one line even where a quoted field holds line
// breaks. Without it, a file without line breaks (/dev/zero) would be read
// into memory until the process dies.
const MaxLineBytes = 1 << 20

// errLongLine is the error of a line longer than MaxLineBytes.
var errLongLine = fmt.Errorf("line longer than %d bytes (1 MiB), the limit: not a CSV file of molecules?", MaxLineBytes)

// recordLimiter passes a CSV stream through and fails once a record — a
// line, or lines joined by a quoted field — exceeds MaxLineBytes. It follows
// quotes as encoding/csv does: a record ends at a line break outside them.
type recordLimiter struct {
	r       io.Reader
	inQuote bool
	n       int // bytes of the current record so far
	line    int // line breaks before the current record's start, from 0
	lines   int // line breaks read in all
	crs     int // carriage returns in the current record
	err     error
}

// utf8BOM is the byte order mark some editors put before a UTF-8 text.
var utf8BOM = []byte{0xef, 0xbb, 0xbf}

func (l *recordLimiter) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.r.Read(p)
	for i, c := range p[:n] {
		switch c {
		case '"':
			l.inQuote = !l.inQuote
		case '\r':
			l.crs++
		case '\n':
			l.lines++
			if !l.inQuote {
				l.n, l.crs, l.line = -1, 0, l.lines
			}
		}
		l.n++
		if l.n > MaxLineBytes {
			l.err = errLongLine
			if l.crs > 1 {
				l.err = fmt.Errorf("%w (it holds %d carriage returns: do the lines end with CR only? convert them to LF)", errLongLine, l.crs)
			}
			l.err = &csv.ParseError{StartLine: l.line + 1, Err: l.err}
			return i, l.err
		}
	}
	return n, err
}

// read returns the next record, or io.EOF after the last one. The record's
// strings are new; FieldPos locates its fields.
func (c *csvReader) read() ([]string, error) {
	rec, err := c.Read()
	switch {
	case err == io.EOF:
		return nil, err
	case err != nil:
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("%s:%d: %v", c.path, pe.StartLine, pe.Err)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = errors.New("gzip data truncated")
		}
		return nil, fmt.Errorf("%s:%d: %w", c.path, c.line+1, err)
	}
	c.line, _ = c.FieldPos(len(rec) - 1)
	return rec, nil
}

// header reads the first record, the column names, with the messages every
// reader of a CSV of molecules gives: an empty file, and lines ending with a
// carriage return only (classic Mac OS), which encoding/csv reads as a single
// line.
func (c *csvReader) header() ([]string, error) {
	if c.utf16 {
		return nil, fmt.Errorf("%s:1: the file is UTF-16 (it starts with a UTF-16 byte order mark): save it as UTF-8", c.path)
	}
	rec, err := c.read()
	if err == io.EOF {
		return nil, fmt.Errorf("%s:1: empty file: no header and no molecules", c.path)
	}
	if err != nil {
		return nil, err
	}
	for _, name := range rec {
		switch {
		case strings.ContainsRune(name, '\r'):
			return nil, fmt.Errorf("%s:1: lines end with a carriage return only (classic Mac OS): convert them to LF or CRLF line endings", c.path)
		case strings.ContainsRune(name, 0):
			return nil, fmt.Errorf("%s:1: the header holds NUL bytes: is the file UTF-16? save it as UTF-8", c.path)
		}
	}
	return rec, nil
}
