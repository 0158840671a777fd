package data_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/internal/field"
)

// A dataset folder has its columns fixed: a selection of columns given
// with one is refused, naming the field, and the folder is left as it was.
func TestColumnsRefusedForAFolder(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	synth := filepath.Join(dir, "synth")
	if _, err := synthetic.Write(synth, synthetic.Options{Molecules: 20, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := data.Open(synth, data.OpenOptions{CacheDir: cache}); err != nil {
		t.Fatal(err)
	}
	var fe *field.Error
	_, err := data.Open(synth, data.OpenOptions{CacheDir: cache, Columns: data.Columns{Targets: []string{"a"}}})
	if !errors.As(err, &fe) || fe.Name != "target_columns" || !strings.Contains(err.Error(), "applies to CSV files only") {
		t.Errorf("a folder with target columns: %v", err)
	}
	if _, err := os.Stat(filepath.Join(synth, "split")); err != nil {
		t.Fatal(err)
	}
}
