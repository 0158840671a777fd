package synthetic

import (
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/rdkit"
)

func TestTableDeterministic(t *testing.T) {
	a := Table(Options{Molecules: 50, Seed: 3})
	b := Table(Options{Molecules: 50, Seed: 3})
	c := Table(Options{Molecules: 50, Seed: 4})
	if !reflect.DeepEqual(a, b) {
		t.Error("same seed, different tables")
	}
	if slices.Equal(a.SMILES, c.SMILES) {
		t.Error("seeds 3 and 4 give the same molecules")
	}
}

// A synthetic dataset's molecules are the first of its seed's sequence,
// whatever its size and noise: what cmd/synth-recording relies on to record
// every small synthetic dataset of a seed at once.
func TestTablePrefixOfItsSeed(t *testing.T) {
	long := Table(Options{Molecules: 300, Seed: 7})
	for _, opt := range []Options{{Molecules: 40, Seed: 7}, {Molecules: 299, Seed: 7, Noise: 0.3}, {Molecules: 120, Seed: 7, Noise: -1}} {
		short := Table(opt)
		if !slices.Equal(short.SMILES, long.SMILES[:opt.Molecules]) {
			t.Errorf("%+v: not the first %d molecules of seed 7", opt, opt.Molecules)
		}
	}
}

// Every synthetic molecule parses in RDKit with the atom order the generator
// recorded, has 10–50 atoms and at least two planted groups.
func TestSyntheticMolecules(t *testing.T) {
	tab := Table(Options{Molecules: 500, Seed: 9})
	atomicNumber := map[string]uint8{"C": 6, "c": 6, "N": 7, "n": 7, "O": 8, "o": 8, "S": 16, "s": 16, "F": 9, "Cl": 17}
	for i, smi := range tab.SMILES {
		g, err := rdkit.SmilesToGraph(smi, false)
		if err != nil {
			t.Fatalf("%q: %v", smi, err)
		}
		groups := tab.AtomGroups[i]
		if n := g.NumAtoms(); n != len(groups) || n < synthMinAtoms || n > synthMaxAtoms {
			t.Fatalf("%q: %d atoms, %d groups", smi, n, len(groups))
		}
		for k, a := range synthAtoms(smi) {
			if got := g.AtomFeatures[k*rdkit.NumAtomFeatures] + 1; got != atomicNumber[a.element] {
				t.Fatalf("%q atom %d: RDKit has atomic number %d, the generator wrote %s", smi, k, got, a.element)
			}
			if groups[k] < 0 && a.element != "C" {
				t.Fatalf("%q atom %d: linker atom %s is not a carbon", smi, k, a.element)
			}
		}
		if n := sum(groupInstances(t, groups)); n < synthMinGroups {
			t.Fatalf("%q has %d planted groups", smi, n)
		}
	}
}

// groupInstances counts the planted instances of each group in a molecule
// from its atoms: every instance contributes exactly its template's atoms.
func groupInstances(t *testing.T, groups []int32) []int {
	t.Helper()
	atoms := make([]int, len(synthGroups))
	for _, g := range groups {
		if g >= 0 {
			atoms[g]++
		}
	}
	count := make([]int, len(synthGroups))
	for g, sg := range synthGroups {
		size := len(synthAtoms(sg.smiles))
		if atoms[g]%size != 0 {
			t.Fatalf("%d atoms of %s, not a multiple of its %d", atoms[g], sg.name, size)
		}
		count[g] = atoms[g] / size
	}
	return count
}

func sum(v []int) int {
	s := 0
	for _, x := range v {
		s += x
	}
	return s
}

// Labels follow the task rules except for the label noise, whose rate is
// about the one asked for (0.07 by default, none when negative).
func TestSyntheticLabelsFollowRulesWithNoise(t *testing.T) {
	for _, tc := range []struct{ noise, rate float64 }{{0, 0.07}, {-1, 0}, {0.2, 0.2}} {
		tab := Table(Options{Molecules: 2000, Seed: 5, Noise: tc.noise})
		flips, total := 0, 0
		for i := range tab.SMILES {
			count := groupInstances(t, tab.AtomGroups[i])
			for j, task := range synthTasks {
				want := float32(0)
				if task.rule(count) {
					want = 1
				}
				if tab.Labels[i*len(synthTasks)+j] != want {
					flips++
				}
				total++
			}
		}
		if rate := float64(flips) / float64(total); math.Abs(rate-tc.rate) > 0.015 || (tc.rate == 0 && flips > 0) {
			t.Errorf("noise %v: %.3f of labels disagree with their rule, want about %v", tc.noise, rate, tc.rate)
		}
	}
}

func TestSynthTaskRules(t *testing.T) {
	count := func(groups ...int) []int {
		c := make([]int, len(synthGroups))
		for _, g := range groups {
			c[g]++
		}
		return c
	}
	tests := []struct {
		groups []int
		want   []bool // per task, in Tasks order
	}{
		{[]int{gBenzene, gNitro}, []bool{true, false, false, false, false}},
		{[]int{gCyclohexane, gNitro, gCarboxyl}, []bool{false, true, false, false, false}},
		{[]int{gCarboxyl, gAmine, gChlorobenzene, gSulfonyl}, []bool{false, false, true, false, false}},
		{[]int{gEster, gMorpholine, gPyridine}, []bool{false, false, false, true, true}},
		{[]int{gAmide, gThiophene}, []bool{false, false, false, true, false}},
	}
	for _, tc := range tests {
		for j, task := range synthTasks {
			if got := task.rule(count(tc.groups...)); got != tc.want[j] {
				t.Errorf("groups %v, task %s: %v, want %v", tc.groups, task.name, got, tc.want[j])
			}
		}
	}
}

// The written dataset carries the planted groups through OGB's layout.
func TestWrite(t *testing.T) {
	out := filepath.Join(t.TempDir(), "synth")
	rep, err := Write(out, Options{Molecules: 200, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	d, err := data.ReadOGB(out)
	if err != nil {
		t.Fatal(err)
	}
	tab := Table(Options{Molecules: 200, Seed: 2})
	if d.NumGraphs() != 200 || rep.Molecules != 200 || !slices.Equal(d.SMILES, tab.SMILES) ||
		!slices.Equal(d.Tasks, Tasks) || d.Split == nil {
		t.Fatalf("%d molecules, tasks %q", d.NumGraphs(), d.Tasks)
	}
	if !slices.Equal(d.AtomGroup, slices.Concat(tab.AtomGroups...)) {
		t.Error("atom groups differ from the generator's")
	}
}
