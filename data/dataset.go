// Package data holds molecule datasets: what a path given as data holds
// (KindOf), OGB dataset folders, featurisation of SMILES files through
// RDKit (package data/rdkit), scaffold splits, a binary cache and the
// pre-training filter. Batching is package data/feed's; sharded
// pre-training corpora are data/corpus's, the synthetic dataset
// data/synthetic's.
package data

import (
	"fmt"
	"math"
)

// Feature counts per atom and per bond (docs/method.md §8).
const (
	NumAtomFeatures = 9
	NumBondFeatures = 3
)

// nan32 marks a missing label.
var nan32 = float32(math.NaN())

// AtomFeatureDims is the number of values of each atom feature, "misc"
// included: atomic number, chirality, degree, formal charge, hydrogens,
// radical electrons, hybridisation, aromatic, in ring (docs/method.md §2, §8).
var AtomFeatureDims = [NumAtomFeatures]int{119, 5, 12, 12, 10, 6, 6, 2, 2}

// BondFeatureDims is the number of values of each bond feature: type, stereo,
// conjugated.
var BondFeatureDims = [NumBondFeatures]int{5, 6, 2}

// Dataset is a set of molecules in flat arrays, graph g owning atoms
// NodePtr[g]..NodePtr[g+1] and bonds BondPtr[g]..BondPtr[g+1]. It is read-only
// once built, so loaders may share it between goroutines.
type Dataset struct {
	Name      string    // the folder's base name
	NodePtr   []int64   // atom offsets per molecule, len G+1
	BondPtr   []int64   // bond offsets per molecule, len G+1
	AtomFeat  []uint8   // NumAtomFeatures per atom
	BondAtoms []int32   // both atoms of each bond (each bond once), local to the molecule
	BondFeat  []uint8   // NumBondFeatures per bond
	Labels    []float32 // G×T row-major, NaN where missing
	Tasks     []string  // the T task names
	Split     *Split    // nil when the dataset has no split
	SMILES    []string  // one per molecule; nil without mapping/mol.csv.gz
	AtomGroup []int32   // synthetic datasets: planted group per atom, -1 for linkers; else nil
}

// Split lists the molecules of each part of a train/valid/test split, in the
// order of the split files (increasing in those micrograph and OGB write).
type Split struct {
	Name               string // folder under split/, e.g. "scaffold"
	Train, Valid, Test []int32
}

// NumGraphs is the number of molecules.
func (d *Dataset) NumGraphs() int { return len(d.NodePtr) - 1 }

// NumTasks is the number of label columns.
func (d *Dataset) NumTasks() int { return len(d.Tasks) }

// TotalAtoms is the number of atoms over all molecules.
func (d *Dataset) TotalAtoms() int { return len(d.AtomFeat) / NumAtomFeatures }

// TotalBonds is the number of bonds over all molecules, each counted once.
func (d *Dataset) TotalBonds() int { return len(d.BondFeat) / NumBondFeatures }

// NumAtoms is the number of atoms of molecule g.
func (d *Dataset) NumAtoms(g int) int { return int(d.NodePtr[g+1] - d.NodePtr[g]) }

// NumBonds is the number of bonds of molecule g.
func (d *Dataset) NumBonds(g int) int { return int(d.BondPtr[g+1] - d.BondPtr[g]) }

// AtomicNumber is the atomic number of atom i (RDKit's order) of molecule
// g, read back from its first feature; 0 for an atom that feature calls
// "misc" (a dummy atom, whose atomic number is 0).
func (d *Dataset) AtomicNumber(g, i int) int {
	f := int(d.AtomFeat[(int(d.NodePtr[g])+i)*NumAtomFeatures])
	if f >= AtomFeatureDims[0]-1 {
		return 0
	}
	return f + 1
}

// MoleculeBonds is molecule g's bonds as pairs of its atoms' indices (both
// atoms of each bond, each bond once), a view of BondAtoms.
func (d *Dataset) MoleculeBonds(g int) []int32 { return d.BondAtoms[2*d.BondPtr[g] : 2*d.BondPtr[g+1]] }

// All lists every molecule index in order.
func (d *Dataset) All() []int32 {
	return AllIndices(d.NumGraphs())
}

// Validate checks the invariants every consumer relies on; a cache that
// fails it is rebuilt. The readers of source files report violations with
// file and line themselves and call this afterwards as a last check.
func (d *Dataset) Validate() error {
	g := len(d.NodePtr) - 1
	switch {
	case g < 1:
		return fmt.Errorf("dataset %s is empty", d.Name)
	case len(d.BondPtr) != g+1:
		return fmt.Errorf("bond offsets cover %d molecules, atom offsets %d", len(d.BondPtr)-1, g)
	case d.NodePtr[0] != 0 || d.BondPtr[0] != 0:
		return fmt.Errorf("offsets do not start at 0")
	}
	for i := 0; i < g; i++ {
		if d.NodePtr[i+1] < d.NodePtr[i] || d.BondPtr[i+1] < d.BondPtr[i] {
			return fmt.Errorf("molecule %d: offsets decrease", i)
		}
	}
	atoms, bonds := d.NodePtr[g], d.BondPtr[g]
	switch {
	case int64(len(d.AtomFeat)) != atoms*NumAtomFeatures:
		return fmt.Errorf("%d atom feature values for %d atoms", len(d.AtomFeat), atoms)
	case int64(len(d.BondFeat)) != bonds*NumBondFeatures:
		return fmt.Errorf("%d bond feature values for %d bonds", len(d.BondFeat), bonds)
	case int64(len(d.BondAtoms)) != 2*bonds:
		return fmt.Errorf("%d bond endpoints for %d bonds", len(d.BondAtoms), bonds)
	case len(d.Labels) != g*len(d.Tasks):
		return fmt.Errorf("%d labels for %d molecules and %d tasks", len(d.Labels), g, len(d.Tasks))
	case d.SMILES != nil && len(d.SMILES) != g:
		return fmt.Errorf("%d SMILES for %d molecules", len(d.SMILES), g)
	case d.AtomGroup != nil && int64(len(d.AtomGroup)) != atoms:
		return fmt.Errorf("%d atom groups for %d atoms", len(d.AtomGroup), atoms)
	}
	for i, v := range d.AtomFeat {
		if j := i % NumAtomFeatures; int(v) >= AtomFeatureDims[j] {
			return fmt.Errorf("atom %d: feature %d is %d, outside 0..%d", i/NumAtomFeatures, j, v, AtomFeatureDims[j]-1)
		}
	}
	for i, v := range d.BondFeat {
		if j := i % NumBondFeatures; int(v) >= BondFeatureDims[j] {
			return fmt.Errorf("bond %d: feature %d is %d, outside 0..%d", i/NumBondFeatures, j, v, BondFeatureDims[j]-1)
		}
	}
	for m := 0; m < g; m++ {
		n := int32(d.NumAtoms(m))
		for _, a := range d.BondAtoms[2*d.BondPtr[m] : 2*d.BondPtr[m+1]] {
			if a < 0 || a >= n {
				return fmt.Errorf("molecule %d: bond endpoint %d outside its %d atoms", m, a, n)
			}
		}
	}
	for _, v := range d.AtomGroup {
		if v < -1 {
			return fmt.Errorf("atom group %d below -1", v)
		}
	}
	for _, v := range d.Labels {
		if math.IsInf(float64(v), 0) {
			return fmt.Errorf("infinite label")
		}
	}
	if d.Split != nil {
		return d.Split.validate(g)
	}
	return nil
}

// validate checks that every index lies in 0..n-1 and appears at most once
// over the three parts.
func (s *Split) validate(n int) error {
	seen := make([]bool, n)
	for _, part := range []struct {
		name string
		idx  []int32
	}{{"train", s.Train}, {"valid", s.Valid}, {"test", s.Test}} {
		for _, v := range part.idx {
			if v < 0 || int(v) >= n {
				return fmt.Errorf("split %s/%s: index %d outside 0..%d", s.Name, part.name, v, n-1)
			}
			if seen[v] {
				return fmt.Errorf("split %s/%s: molecule %d listed twice", s.Name, part.name, v)
			}
			seen[v] = true
		}
	}
	return nil
}
