package data

import "fmt"

// Molecules is a store of molecular graphs that batches are collated from:
// an in-memory Dataset, or a Corpus whose shards stay on disk, memory-mapped.
// Implementations are read-only, so loaders share them between goroutines.
type Molecules interface {
	// NumGraphs is the number of molecules, indexed 0..NumGraphs()-1.
	NumGraphs() int
	// NumTasks is the number of label columns.
	NumTasks() int
	// HasAtomGroups tells whether molecules carry planted atom groups.
	HasAtomGroups() bool
	// Graph returns molecule g as views into the store's memory, which the
	// caller must not modify; an error reports a molecule whose stored
	// form is inconsistent.
	Graph(g int) (GraphView, error)
}

// GraphView is one molecule as slices of its store.
type GraphView struct {
	AtomFeat  []uint8   // NumAtomFeatures per atom
	BondAtoms []int32   // both atoms of each bond (each bond once), local to the molecule
	BondFeat  []uint8   // NumBondFeatures per bond
	Labels    []float32 // one per task, NaN where missing
	AtomGroup []int32   // planted group per atom when the store has them; else nil
}

// NumAtoms is the number of atoms of the molecule.
func (v GraphView) NumAtoms() int { return len(v.AtomFeat) / NumAtomFeatures }

// NumBonds is the number of bonds of the molecule, each counted once.
func (v GraphView) NumBonds() int { return len(v.BondFeat) / NumBondFeatures }

// HasAtomGroups tells whether d records a planted group per atom.
func (d *Dataset) HasAtomGroups() bool { return d.AtomGroup != nil }

// Graph returns molecule g's slices of d.
func (d *Dataset) Graph(g int) (GraphView, error) {
	if g < 0 || g >= d.NumGraphs() {
		return GraphView{}, fmt.Errorf("molecule %d outside 0..%d", g, d.NumGraphs()-1)
	}
	a0, a1 := d.NodePtr[g], d.NodePtr[g+1]
	b0, b1 := d.BondPtr[g], d.BondPtr[g+1]
	nt := int64(len(d.Tasks))
	v := GraphView{
		AtomFeat:  d.AtomFeat[a0*NumAtomFeatures : a1*NumAtomFeatures],
		BondAtoms: d.BondAtoms[2*b0 : 2*b1],
		BondFeat:  d.BondFeat[b0*NumBondFeatures : b1*NumBondFeatures],
		Labels:    d.Labels[int64(g)*nt : int64(g+1)*nt],
	}
	if d.AtomGroup != nil {
		v.AtomGroup = d.AtomGroup[a0:a1]
	}
	return v, nil
}

// AllIndices lists 0 … n−1, the indices of every molecule of a set of n.
func AllIndices(n int) []int32 {
	idx := make([]int32, n)
	for i := range idx {
		idx[i] = int32(i)
	}
	return idx
}
