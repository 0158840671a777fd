package feed

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/internal/testenv"
)

var synthOnce struct {
	sync.Once
	dir string
	d   *data.Dataset
	err error
}

// synthDataset is the default synthetic dataset (2000 molecules, seed 1),
// featurised once per test binary.
func synthDataset(tb testing.TB) *data.Dataset {
	tb.Helper()
	synthOnce.Do(func() {
		synthOnce.dir, synthOnce.err = os.MkdirTemp("", "micrograph-synth-")
		if synthOnce.err != nil {
			return
		}
		out := filepath.Join(synthOnce.dir, "synth")
		if _, synthOnce.err = synthetic.Write(out, synthetic.Options{Seed: 1}); synthOnce.err != nil {
			return
		}
		synthOnce.d, synthOnce.err = data.ReadOGB(out)
	})
	if synthOnce.err != nil {
		tb.Fatal(synthOnce.err)
	}
	return synthOnce.d
}

func TestMain(m *testing.M) {
	code := testenv.RunWithPrivateUserCache(m)
	if synthOnce.dir != "" {
		os.RemoveAll(synthOnce.dir)
	}
	os.Exit(code)
}
