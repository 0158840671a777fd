package data_test

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/synthetic"
)

// A random split is its seed's: the same for the same seed, another for
// another, and RandomSplit's.
func TestFeaturizeRandomSplit(t *testing.T) {
	tab := synthetic.Table(synthetic.Options{Molecules: 100, Seed: 1})
	var splits []*data.Split
	for _, seed := range []uint64{5, 5, 6} {
		rep, err := data.Featurize(tab, filepath.Join(t.TempDir(), "out"), data.FeaturizeOptions{Split: "random", Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		splits = append(splits, rep.Split)
	}
	if !reflect.DeepEqual(splits[0], data.RandomSplit(100, 5)) || !reflect.DeepEqual(splits[0], splits[1]) || reflect.DeepEqual(splits[0], splits[2]) {
		t.Error("random split is not the seed's")
	}
}
