package field_test

import (
	"errors"
	"strings"
	"testing"
	"unsafe"

	"github.com/micrograph/micrograph/internal/field"
)

// A field error reads "name value reason", keeps what its reason wraps
// through Within, and Check wraps the failed check's error.
func TestErrorWrapsItsReason(t *testing.T) {
	missing := errors.New("split/ is missing")
	for _, tc := range []struct {
		name string
		err  error
		want string
		is   bool
	}{
		{"Errorf with %w", field.Errorf("protocol", "scaffold", "needs a split (%w)", missing),
			`protocol "scaffold" needs a split (split/ is missing)`, true},
		{"Errorf with %v", field.Errorf("protocol", "scaffold", "needs a split (%v)", missing),
			`protocol "scaffold" needs a split (split/ is missing)`, false},
		{"Within", field.Within("linear", field.Errorf("protocol", "scaffold", "needs a split (%w)", missing)),
			`linear.protocol "scaffold" needs a split (split/ is missing)`, true},
		{"Check", field.Check("data", "x.csv", missing), `data "x.csv" split/ is missing`, true},
		{"float", field.Errorf("lr", 0.5, "must be small"), "lr 0.5 must be small", false},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
		if errors.Is(tc.err, missing) != tc.is {
			t.Errorf("%s: errors.Is = %v, want %v", tc.name, !tc.is, tc.is)
		}
		var fe *field.Error
		if !errors.As(tc.err, &fe) {
			t.Errorf("%s: not a *field.Error", tc.name)
		}
	}
}

// Addr finds a field by its dotted JSON names, through nested structs and
// as a field of its parent through an embedded struct; a name of no field,
// or a path through a non-struct, finds none.
func TestAddr(t *testing.T) {
	type inner struct {
		Hidden int `json:"hidden"`
	}
	type embedded struct {
		Seeds int `json:"seeds"`
	}
	type config struct {
		embedded
		Encoder inner   `json:"encoder"`
		LR      float64 `json:"lr,omitempty"`
	}
	var c config
	for _, tc := range []struct {
		name string
		want uintptr
	}{
		{"encoder.hidden", uintptr(unsafe.Pointer(&c.Encoder.Hidden))},
		{"lr", uintptr(unsafe.Pointer(&c.LR))},
		{"seeds", uintptr(unsafe.Pointer(&c.Seeds))},
		{"encoder", uintptr(unsafe.Pointer(&c.Encoder))},
		{"hidden", 0},
		{"lr.x", 0},
	} {
		got, ok := field.Addr(&c, tc.name)
		if ok != (tc.want != 0) || got != tc.want {
			t.Errorf("Addr(%q) = %#x, %v; want %#x", tc.name, got, ok, tc.want)
		}
	}
}

// A string value is shown whole up to 256 bytes (a path under a long
// TMPDIR), and only a longer one, a file's content where a name was
// expected, is cut to its first 64 bytes and its length.
func TestFormatShowsPathsWhole(t *testing.T) {
	path := "/tmp/a-long-temporary-folder-for-issue-48-tests/TestSomething123/001/ogbg_molbace/encoder.pt"
	if got := field.Format(path); got != `"`+path+`"` {
		t.Errorf("Format(%d-byte path) = %s, want it whole", len(path), got)
	}
	long := strings.Repeat("x", 257)
	if got, want := field.Format(long), `"`+strings.Repeat("x", 64)+`"… (257 bytes)`; got != want {
		t.Errorf("Format(257 bytes) = %s, want %s", got, want)
	}
}
