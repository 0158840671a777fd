package field_test

import (
	"errors"
	"testing"

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
