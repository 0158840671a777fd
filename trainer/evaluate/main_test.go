package evaluate_test

import (
	"os"
	"testing"

	"github.com/micrograph/micrograph/trainer/evaluate"
	"github.com/micrograph/micrograph/trainer/runpool"
)

// TestMain makes the test binary serve as a process of the pools the tests
// start (env.Jobs > 1), which run it again to make runs side by side.
func TestMain(m *testing.M) {
	runpool.ServeIfWorker(evaluate.Runs)
	os.Exit(m.Run())
}
