package data

import "slices"

// FilterStats counts what the pre-training filter kept and removed; a
// molecule failing several rules is counted under the first.
type FilterStats struct {
	Kept          int
	TooSmall      int // fewer than η atoms
	NoBonds       int // at least η atoms but not one bond
	IsolatedAtoms int // some atom without any bond (a separate ion, say)
}

// Removed is the number of molecules the filter dropped.
func (s FilterStats) Removed() int { return s.TooSmall + s.NoBonds + s.IsolatedAtoms }

// FilterClass is what the pre-training filter sees of a molecule apart from
// its size, which is all that depends on η.
type FilterClass uint8

const (
	classUsable   FilterClass = iota // bonded, every atom in a bond
	classNoBonds                     // not one bond
	classIsolated                    // some atom without any bond
)

// Classify returns the class of a molecule of n atoms with the bond
// endpoints bondAtoms; bonded is scratch space, returned for reuse.
func Classify(n int, bondAtoms []int32, bonded []bool) (FilterClass, []bool) {
	if len(bondAtoms) == 0 {
		return classNoBonds, bonded
	}
	bonded = slices.Grow(bonded[:0], n)[:n]
	clear(bonded)
	for _, a := range bondAtoms {
		bonded[a] = true
	}
	for _, ok := range bonded {
		if !ok {
			return classIsolated, bonded
		}
	}
	return classUsable, bonded
}

// Count adds a molecule of n atoms and class c to s, reporting whether the
// filter keeps it under η = eta.
func (s *FilterStats) Count(n int, c FilterClass, eta int) bool {
	switch {
	case n < eta:
		s.TooSmall++
	case c == classNoBonds:
		s.NoBonds++
	case c == classIsolated:
		s.IsolatedAtoms++
	default:
		s.Kept++
		return true
	}
	return false
}

// PretrainFilter keeps the molecules of idx that pre-training can use
// (docs/method.md §4): a molecule with fewer than eta atoms can never yield a
// motif-like subgraph, one without bonds gives message passing nothing to
// do, and an isolated atom (typically a counter-ion) would form a subgraph
// with no connection to the rest of the molecule.
func PretrainFilter(d *Dataset, idx []int32, eta int) ([]int32, FilterStats) {
	var st FilterStats
	kept := make([]int32, 0, len(idx))
	var bonded []bool
	for _, g := range idx {
		var c FilterClass
		n := d.NumAtoms(int(g))
		if n >= eta { // the bonds of a molecule too small are never read
			c, bonded = Classify(n, d.BondAtoms[2*d.BondPtr[g]:2*d.BondPtr[g+1]], bonded)
		}
		if st.Count(n, c, eta) {
			kept = append(kept, g)
		}
	}
	return kept, st
}
