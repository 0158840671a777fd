// Package inputfile is the one way the program opens a file it reads: an
// input must be a regular file. A FIFO, device, socket or folder given where
// a file is read is refused at once, naming the path and what it is, instead
// of blocking in open(2) until a writer comes (a FIFO) or streaming without
// end (/dev/urandom). Descriptions (JSON) are read within a size cap, and
// what a file holds is quoted in errors by at most a short prefix (Quote).
package inputfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"
)

// ErrNotRegular is the error of an input that exists but is not a regular
// file; NotRegularError says which and what it is.
var ErrNotRegular = errors.New("not a regular file")

// NotRegularError is an input that is a folder, FIFO, device or socket.
type NotRegularError struct {
	Path string
	Mode os.FileMode
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is %s, not a regular file", e.Path, Kind(e.Mode))
}

// Is makes errors.Is(err, ErrNotRegular) true.
func (e *NotRegularError) Is(target error) bool { return target == ErrNotRegular }

// Kind names a file's type for a message: "a folder", "a FIFO", "a device",
// "a socket", "a regular file".
func Kind(m os.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a folder"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeDevice != 0: // character devices too
		return "a device"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return "a " + m.Type().String() + " file"
}

// Open opens path for reading. The open never blocks (O_NONBLOCK, which
// changes nothing for a regular file), and anything but a regular file,
// after symbolic links, is closed again and refused with a
// *NotRegularError.
func Open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, &NotRegularError{Path: path, Mode: st.Mode()}
	}
	return f, nil
}

// Check is Open's verdict on path without reading it: nil for a regular
// file, else Open's error.
func Check(path string) error {
	f, err := Open(path)
	if err != nil {
		return err
	}
	return f.Close()
}

// MaxJSONBytes bounds a description the program reads whole: an encoder's
// or a saved model's .json, a run's config.json, a suite's or an
// evaluation's result. The largest real ones (a suite of seven benchmarks
// with every run's figures) are a few MB.
const MaxJSONBytes = 64 << 20

// ReadAll reads the regular file at path whole, refusing, before reading
// it, one of more than limit bytes.
func ReadAll(path string, limit int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d this file may have: is it the right file?", path, st.Size(), limit)
	}
	// The file may grow while it is read: never past the limit.
	b, err := io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if n, _ := f.Read(make([]byte, 1)); n > 0 {
		return nil, fmt.Errorf("%s grew past the %d bytes this file may have while it was read", path, limit)
	}
	return b, nil
}

// ReadJSON decodes the JSON file at path, of at most MaxJSONBytes, into v.
// Its errors name path and say where the JSON is wrong without repeating
// more than a short prefix of any value.
func ReadJSON(path string, v any) error {
	b, err := ReadAll(path, MaxJSONBytes)
	if err != nil {
		return err
	}
	if err := Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// ReadStrictJSON is ReadJSON refusing a key v has no field for (a setting
// edited by hand, misspelt or invented, is not silently ignored).
func ReadStrictJSON(path string, v any) error {
	b, err := ReadAll(path, MaxJSONBytes)
	if err != nil {
		return err
	}
	if err := UnmarshalStrict(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Unmarshal is json.Unmarshal with Explain's errors.
func Unmarshal(b []byte, v any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return errEmpty
	}
	return explainIn(b, json.Unmarshal(b, v))
}

var errEmpty = errors.New("empty: no JSON value")

// UnmarshalStrict is Unmarshal refusing keys v has no field for, and
// anything after the value.
func UnmarshalStrict(b []byte, v any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return errEmpty
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return explainIn(b, err)
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

// Explain rewords an error of encoding/json about a file's content so that
// it says where the content is wrong and quotes at most a short prefix of
// it: encoding/json's own messages repeat a number or key whole, however
// long. Other errors pass unchanged.
func Explain(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF):
		return errEmpty
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("the JSON ends early (truncated?)")
	case errors.As(err, &syntax):
		if strings.HasPrefix(syntax.Error(), "unexpected end of JSON input") {
			return errors.New("the JSON ends early (truncated?)")
		}
		return fmt.Errorf("not valid JSON at byte %d: %s", syntax.Offset, Shorten(strings.TrimPrefix(syntax.Error(), "json: ")))
	case errors.As(err, &typ):
		where := "the value"
		if typ.Field != "" {
			where = "field " + Quote(typ.Field)
		}
		return fmt.Errorf("%s holds %s (byte %d); want %s", where, Shorten(typ.Value), typ.Offset, typ.Type)
	}
	if key, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		unquoted, uerr := strconv.Unquote(key)
		if uerr != nil {
			unquoted = key
		}
		return &UnknownKeyError{Key: unquoted}
	}
	return errors.New(Shorten(err.Error()))
}

// explainIn is Explain for an error about the JSON text b, naming for a
// syntax error the last key before it (a NaN or a word where a value
// belongs is then found by its field).
func explainIn(b []byte, err error) error {
	var syntax *json.SyntaxError
	if !errors.As(err, &syntax) || syntax.Offset <= 0 || syntax.Offset > int64(len(b)) ||
		strings.HasPrefix(syntax.Error(), "unexpected end of JSON input") {
		return Explain(err)
	}
	before := b[:syntax.Offset-1]
	end := bytes.LastIndex(before, []byte(`":`))
	if end < 0 {
		return Explain(err)
	}
	start := bytes.LastIndexByte(before[:end], '"')
	if start < 0 {
		return Explain(err)
	}
	return fmt.Errorf("%w (after the key %s)", Explain(err), Quote(string(before[start+1:end])))
}

// UnknownKeyError is a key that a strictly read JSON file holds and its
// reader has no field for.
type UnknownKeyError struct{ Key string }

func (e *UnknownKeyError) Error() string { return "unknown key " + Quote(e.Key) }

// quoteBytes is how much of a string Quote shows.
const quoteBytes = 64

// Quote quotes s as Go's %q does, but of a long s only its first 64 bytes
// followed by its length: what a file holds goes into a message at most
// that long.
func Quote(s string) string {
	if len(s) <= quoteBytes {
		return strconv.Quote(s)
	}
	cut := quoteBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(s[:cut]), len(s))
}

// valueBytes is how much of a setting's value QuoteValue shows whole.
const valueBytes = 256

// QuoteValue quotes a setting's value (a flag's, or a field's read from a
// file) as Quote does, but whole up to 256 bytes: a path is shown whole, as
// the command line's messages show any word of that length, and only a
// longer value (a file's content where a name was expected) is cut to
// Quote's length.
func QuoteValue(s string) string {
	if len(s) <= valueBytes {
		return strconv.Quote(s)
	}
	return Quote(s)
}

// Shorten cuts text that may hold a file's content (a list it holds, a
// message that repeats a value) to Quote's length, without quotes.
func Shorten(s string) string {
	if len(s) <= quoteBytes {
		return s
	}
	cut := quoteBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:cut], len(s))
}
