package data_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/internal/testenv"
)

// cacheFiles lists the files in dir/sub, none when it does not exist.
func cacheFiles(t *testing.T, dir, sub string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, sub))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// OpenDataset keeps what it derives where --cache says (or in the user's
// cache folder) for every kind of dataset, and only reads the dataset: an OGB
// folder (writable or not) or a CSV file and the folder holding it.
func TestOpenDatasetCachesOnlyInTheCacheFolder(t *testing.T) {
	synth := filepath.Join(t.TempDir(), "synth")
	if _, err := synthetic.Write(synth, synthetic.Options{Molecules: 40, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	readOnly := testenv.ReadOnlyCopy(t, synth)
	csvDir := t.TempDir()
	csv := filepath.Join(csvDir, "tiny.csv")
	if err := os.WriteFile(csv, []byte("smiles,active\nCCO,1\nc1ccccc1O,0\nCC(=O)N,1\nCCCl,0\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name       string
		path       string // what --data names
		watch      string // the folder that must not change
		defaultDir bool   // no --cache: the user's cache folder
		graphs     int
		featurized int // folders expected in featurized/
	}{
		{"writable OGB folder", synth, synth, false, 40, 0},
		{"read-only OGB folder", readOnly, readOnly, false, 40, 0},
		{"OGB folder, default cache", synth, synth, true, 40, 0},
		{"CSV", csv, csvDir, false, 4, 1},
		{"CSV, default cache", csv, csvDir, true, 4, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cache, opt := t.TempDir(), data.OpenOptions{}
			if tc.defaultDir {
				t.Setenv("XDG_CACHE_HOME", cache)
				cache = filepath.Join(cache, "micrograph")
			} else {
				opt.CacheDir = cache
			}
			before := testenv.Listing(t, tc.watch)
			for range 2 {
				ds, err := data.Open(tc.path, opt)
				if err != nil {
					t.Fatal(err)
				}
				if ds.NumGraphs() != tc.graphs {
					t.Fatalf("%d molecules, want %d", ds.NumGraphs(), tc.graphs)
				}
			}
			if got := cacheFiles(t, cache, "datasets"); len(got) != 1 {
				t.Errorf("%s/datasets holds %q, want one cache file", cache, got)
			}
			if got := cacheFiles(t, cache, "featurized"); len(got) != tc.featurized {
				t.Errorf("%s/featurized holds %q, want %d folders", cache, got, tc.featurized)
			}
			if after := testenv.Listing(t, tc.watch); after != before {
				t.Errorf("%s changed:\nbefore\n%s\nafter\n%s", tc.watch, before, after)
			}
		})
	}
}

// A closed Stop ends a CSV's featurisation before its next molecule: Open
// returns ErrStopped and the cache holds nothing of the CSV, neither a
// published folder nor a temporary one, so that the next Open featurises it
// from the start (issue #28: Ctrl-C during the first pretrain on a CSV acted
// only after the whole CSV was featurised).
func TestOpenStopsTheFeaturisation(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "mols.csv")
	table := synthetic.Table(synthetic.Options{Molecules: 200, Seed: 3})
	content := "smiles\n"
	for _, s := range table.SMILES {
		content += s + "\n"
	}
	if err := os.WriteFile(csv, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "cache")
	stop := make(chan struct{})
	close(stop)
	if _, err := data.Open(csv, data.OpenOptions{CacheDir: cache, Stop: stop}); !errors.Is(err, data.ErrStopped) {
		t.Fatalf("Open with a closed Stop: %v; want ErrStopped", err)
	}
	if names := cacheFiles(t, cache, "featurized"); len(names) != 0 {
		t.Fatalf("a stopped featurisation left %v in the cache", names)
	}
	d, err := data.Open(csv, data.OpenOptions{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	if d.NumGraphs() != 200 {
		t.Fatalf("after a stop, Open featurised %d molecules of 200", d.NumGraphs())
	}
}
