package inputfile

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Every kind of input that is not a regular file is refused at once, naming
// the path and what it is; a FIFO without a writer would block a plain open
// forever, and a device would stream without end.
func TestOpenRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "regular.json")
	if err := os.WriteFile(regular, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	toFIFO := filepath.Join(dir, "link.json")
	if err := os.Symlink(fifo, toFIFO); err != nil {
		t.Fatal(err)
	}
	toDevice := filepath.Join(dir, "random.json")
	if err := os.Symlink("/dev/urandom", toDevice); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path, want string
	}{
		{regular, ""},
		{fifo, fifo + " is a FIFO, not a regular file"},
		{toFIFO, toFIFO + " is a FIFO, not a regular file"},
		{toDevice, toDevice + " is a device, not a regular file"},
		{"/dev/null", "/dev/null is a device, not a regular file"},
		{dir, dir + " is a folder, not a regular file"},
	}
	for _, tc := range tests {
		f, err := Open(tc.path)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.path, err)
		case tc.want == "":
			f.Close()
		case err == nil || err.Error() != tc.want || !errors.Is(err, ErrNotRegular):
			t.Errorf("%s: got %v, want %q", tc.path, err, tc.want)
		}
		if got := Check(tc.path); (got == nil) != (tc.want == "") {
			t.Errorf("Check(%s) = %v", tc.path, got)
		}
	}
	if _, err := Open(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}

// ReadAll reads a file up to its limit (none: math.MaxInt64) and refuses
// one over it before reading it.
func TestReadAllLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.json")
	if err := os.WriteFile(path, make([]byte, 1001), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int64{1001, math.MaxInt64} {
		if b, err := ReadAll(path, limit); err != nil || len(b) != 1001 {
			t.Errorf("limit %d: %d bytes, %v", limit, len(b), err)
		}
	}
	_, err := ReadAll(path, 1000)
	if want := path + " is 1001 bytes, more than the 1000 this file may have: is it the right file?"; err == nil || err.Error() != want {
		t.Errorf("over the limit: %v, want %q", err, want)
	}
}

// JSON errors name the file and the place, and quote at most a short
// prefix of a value: encoding/json's own message repeats a number whole.
func TestReadJSONErrors(t *testing.T) {
	dir := t.TempDir()
	type info struct {
		Hidden int    `json:"hidden"`
		Pool   string `json:"pool"`
	}
	long := strings.Repeat("9", 1<<20)
	tests := []struct {
		name, content string
		strict        bool
		want          string
	}{
		{"empty", "", false, "empty: no JSON value"},
		{"truncated", `{"hidden": 3, "po`, false, "the JSON ends early (truncated?)"},
		{"syntax", `{"hidden": NaN}`, false, `not valid JSON at byte 12: invalid character 'N' looking for beginning of value (after the key "hidden")`},
		{"syntax before any key", `[}`, false, "not valid JSON at byte 2: invalid character '}' looking for beginning of value"},
		{"long number", `{"hidden": ` + long + `}`, false, `field "hidden" holds number ` + strings.Repeat("9", 57) + `… (1048583 bytes) (byte ` + "1048587" + `); want int`},
		{"wrong type", `{"pool": 3}`, false, `field "pool" holds number (byte 10); want string`},
		{"unknown key", `{"hidden": 3, "objective": "released"}`, true, `unknown key "objective"`},
		{"long unknown key", `{"` + long + `": 1}`, true, `unknown key "` + strings.Repeat("9", 64) + `"… (1048576 bytes)`},
		{"unknown key, lenient", `{"hidden": 3, "objective": "released"}`, false, ""},
		{"two values", `{"hidden": 3} {}`, true, "more than one JSON value"},
	}
	for _, tc := range tests {
		path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".json")
		if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		var v info
		read := ReadJSON
		if tc.strict {
			read = ReadStrictJSON
		}
		err := read(path, &v)
		want := path + ": " + tc.want
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || err.Error() != want):
			t.Errorf("%s: got %v\nwant %s", tc.name, err, want)
		}
	}
}

func TestQuote(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `""`},
		{"motif", `"motif"`},
		{strings.Repeat("a", 64), `"` + strings.Repeat("a", 64) + `"`},
		{strings.Repeat("a", 65), `"` + strings.Repeat("a", 64) + `"… (65 bytes)`},
		// A cut inside a character moves back to its start.
		{strings.Repeat("a", 63) + "é" + "b", `"` + strings.Repeat("a", 63) + `"… (66 bytes)`},
		{"\xff\xfes\x00", `"\xff\xfes\x00"`},
	}
	for _, tc := range tests {
		if got := Quote(tc.in); got != tc.want {
			t.Errorf("Quote(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
