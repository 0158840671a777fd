package data_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/synthetic"
)

// openChildEnv makes the test binary a process that opens one CSV through
// one cache folder, given as CSV|CACHE, and prints the molecules it read.
const openChildEnv = "MICROGRAPH_TEST_OPEN_CHILD"

func TestOpenChild(t *testing.T) {
	job := os.Getenv(openChildEnv)
	if job == "" {
		t.Skip("run by TestConcurrentOpensShareOneCache")
	}
	csv, cache, _ := strings.Cut(job, "|")
	d, err := data.Open(csv, data.OpenOptions{CacheDir: cache})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("molecules %d\n", d.NumGraphs())
}

// Processes started together on one new CSV with one fresh cache all open
// it, with the same molecules (issue #28: 3, 2 and 5 of 9 failed racing to
// publish the featurised folder), and leave one featurised folder, one
// binary cache and no temporary file behind. Three rounds, nine processes.
func TestConcurrentOpensShareOneCache(t *testing.T) {
	dir := t.TempDir()
	src := writeSynthSMILES(t, dir, 12)
	ref, err := data.Open(src, data.OpenOptions{CacheDir: filepath.Join(dir, "reference")})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("molecules %d\n", ref.NumGraphs())
	for round := range 3 {
		cache := filepath.Join(dir, fmt.Sprintf("cache%d", round))
		var wg sync.WaitGroup
		outs := make([]string, 9)
		errs := make([]error, 9)
		for i := range outs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cmd := exec.Command(os.Args[0], "-test.run=^TestOpenChild$")
				cmd.Env = append(os.Environ(), openChildEnv+"="+src+"|"+cache)
				var stderr strings.Builder
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				outs[i] = string(out)
				if err != nil {
					errs[i] = fmt.Errorf("%v: %s", err, stderr.String())
				}
			}()
		}
		wg.Wait()
		for i := range outs {
			if errs[i] != nil || !strings.Contains(outs[i], want) {
				t.Errorf("round %d, process %d: %q, %v; want %q", round, i, outs[i], errs[i], want)
			}
		}
		featurized, _ := os.ReadDir(filepath.Join(cache, "featurized"))
		datasets, _ := os.ReadDir(filepath.Join(cache, "datasets"))
		if len(featurized) != 1 || strings.HasPrefix(featurized[0].Name(), ".") || len(datasets) != 1 || strings.HasPrefix(datasets[0].Name(), ".") {
			t.Errorf("round %d: the cache holds featurized/%v and datasets/%v; want one of each, no temporary", round, featurized, datasets)
		}
	}
}

// writeSynthSMILES writes n synthetic molecules (seed 5) as a CSV of SMILES
// in dir and returns its path.
func writeSynthSMILES(t *testing.T, dir string, n int) string {
	t.Helper()
	path := filepath.Join(dir, "corpus.csv")
	var b strings.Builder
	b.WriteString("mol_id,smiles\n")
	for i, s := range synthetic.Table(synthetic.Options{Molecules: n, Seed: 5}).SMILES {
		fmt.Fprintf(&b, "%d,%s\n", i, s)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
