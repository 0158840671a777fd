package corpus

import (
	"os"
	"testing"
	"time"
)

// TestOpenCorpusCost times opening the corpus named by
// MICROGRAPH_CORPUS_COST with and without the shard CRC check, alternating,
// three times each after one of each to warm up, and logs the times, the rate of the check and their
// ratio (go test -v -run OpenCorpusCost). It is skipped without the variable.
func TestOpenCorpusCost(t *testing.T) {
	dir := os.Getenv("MICROGRAPH_CORPUS_COST")
	if dir == "" {
		t.Skip("MICROGRAPH_CORPUS_COST names no corpus")
	}
	open := func(verify bool) time.Duration {
		start := time.Now()
		c, err := openShards(dir, verify)
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		c.Close()
		return took
	}
	m, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, _, _, bytes := m.Totals()
	open(false) // the first open of a process pays for more than the check
	open(true)
	var with, without time.Duration
	for i := range 3 {
		a, b := open(false), open(true)
		t.Logf("run %d: without the check %v, with %v", i+1, a, b)
		without += a
		with += b
	}
	t.Logf("%d shards, %.1f MB: mean %v without, %v with (%.0f MB/s checked), ratio %.1f",
		len(m.Shards), float64(bytes)/1e6, without/3, with/3, float64(bytes)/1e6/(with/3).Seconds(), float64(with)/float64(without))
}
