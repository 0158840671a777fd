package data

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
		n, m := d.NumAtoms(int(g)), d.NumBonds(int(g))
		switch {
		case n < eta:
			st.TooSmall++
			continue
		case m == 0:
			st.NoBonds++
			continue
		}
		bonded = resize(bonded, n)
		clear(bonded)
		for _, a := range d.BondAtoms[2*d.BondPtr[g] : 2*d.BondPtr[g+1]] {
			bonded[a] = true
		}
		isolated := false
		for _, ok := range bonded {
			isolated = isolated || !ok
		}
		if isolated {
			st.IsolatedAtoms++
			continue
		}
		kept = append(kept, g)
	}
	st.Kept = len(kept)
	return kept, st
}
