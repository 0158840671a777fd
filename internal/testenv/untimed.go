package testenv

import (
	"encoding/json"
	"testing"
)

// Untimed is v's JSON without its timings (every "seconds",
// "epoch_seconds" and "embed_seconds" at any depth), which alone differ
// between two makings of the same runs. JSON writes each float64 so that
// it reads back to the same bits: equal texts are equal figures, bit for
// bit.
func Untimed(tb testing.TB, v any) string {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	var tree any
	if err := json.Unmarshal(b, &tree); err != nil {
		tb.Fatal(err)
	}
	var strip func(any)
	strip = func(n any) {
		switch n := n.(type) {
		case map[string]any:
			for _, k := range []string{"seconds", "epoch_seconds", "embed_seconds"} {
				delete(n, k)
			}
			for _, c := range n {
				strip(c)
			}
		case []any:
			for _, c := range n {
				strip(c)
			}
		}
	}
	strip(tree)
	out, _ := json.Marshal(tree)
	return string(out)
}
