package corpus

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestOpenCorpusCost times opening the corpus named by
// MICROGRAPH_CORPUS_COST and, apart, the shard CRC check Open makes,
// alternating, three times each after one of each to warm up, and logs the
// times, the rate of the check and its share of Open (go test -v -run
// OpenCorpusCost). It is skipped without the variable.
func TestOpenCorpusCost(t *testing.T) {
	dir := os.Getenv("MICROGRAPH_CORPUS_COST")
	if dir == "" {
		t.Skip("MICROGRAPH_CORPUS_COST names no corpus")
	}
	m, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	open := func() time.Duration {
		start := time.Now()
		c, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		c.Close()
		return took
	}
	check := func() time.Duration {
		start := time.Now()
		for _, info := range m.Shards {
			if err := checkShardFile(filepath.Join(dir, info.File), info); err != nil {
				t.Fatal(err)
			}
		}
		return time.Since(start)
	}
	_, _, _, _, _, bytes := m.Totals()
	open() // the first open of a process pays for more than the check
	check()
	var opens, checks time.Duration
	for i := range 3 {
		a, b := open(), check()
		t.Logf("run %d: Open %v, of which the check alone takes %v", i+1, a, b)
		opens += a
		checks += b
	}
	t.Logf("%d shards, %.1f MB: mean Open %v, check %v (%.0f MB/s checked), the check's share %.0f %%",
		len(m.Shards), float64(bytes)/1e6, opens/3, checks/3, float64(bytes)/1e6/(checks/3).Seconds(), 100*float64(checks)/float64(opens))
}
