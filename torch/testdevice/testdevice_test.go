package testdevice

import (
	"strings"
	"testing"

	"github.com/micrograph/micrograph/torch"
)

// The variable unset or "cpu" is the CPU; a name of no device is an error
// naming the variable.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  torch.Device
		err   string
	}{
		{"", torch.CPU, ""},
		{"cpu", torch.CPU, ""},
		{"tpu:0", torch.CPU, Env + "=tpu:0: "},
	} {
		t.Setenv(Env, tc.value)
		got, err := Parse()
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.HasPrefix(err.Error(), tc.err)) {
			t.Errorf("%s=%q: %v, %v; want %v, %q", Env, tc.value, got, err, tc.want, tc.err)
		}
	}
}
