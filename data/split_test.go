package data

import (
	"reflect"
	"slices"
	"testing"
)

// Ten molecules in five scaffold groups, worked through docs/method.md §8 by hand:
// groups A {0,2,5,9}, "" {3,7}, B {1,6}, D {8}, C {4} in that order (size,
// then first index, descending); cut-offs 8 and 9. A, "" and B fill train
// to exactly 8, D goes to valid (9 ≤ 9) and C to test.
func TestScaffoldSplitHandComputed(t *testing.T) {
	scaffolds := []string{"A", "B", "A", "", "C", "A", "B", "", "D", "A"}
	got := ScaffoldSplit(scaffolds)
	want := &Split{Name: "scaffold", Train: []int32{0, 1, 2, 3, 5, 6, 7, 9}, Valid: []int32{8}, Test: []int32{4}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ScaffoldSplit = %+v, want %+v", got, want)
	}
}

func TestRandomSplit(t *testing.T) {
	a, b, c := RandomSplit(1000, 7), RandomSplit(1000, 7), RandomSplit(1000, 8)
	if !reflect.DeepEqual(a, b) {
		t.Error("same seed, different splits")
	}
	if reflect.DeepEqual(a.Train, c.Train) {
		t.Error("different seeds, same split")
	}
	if len(a.Train) != 800 || len(a.Valid) != 100 || len(a.Test) != 100 || a.Name != "random" {
		t.Fatalf("sizes %d/%d/%d", len(a.Train), len(a.Valid), len(a.Test))
	}
	all := slices.Concat(a.Train, a.Valid, a.Test)
	slices.Sort(all)
	for i, v := range all {
		if int(v) != i {
			t.Fatalf("the parts do not cover 0..999 exactly once (position %d holds %d)", i, v)
		}
	}
	for _, part := range [][]int32{a.Train, a.Valid, a.Test} {
		if !slices.IsSorted(part) {
			t.Error("a part is not in increasing order")
		}
	}
}
