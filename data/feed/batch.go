package feed

import (
	"fmt"

	"github.com/micrograph/micrograph/data"
)

// Batch is B molecules collated into one disjoint graph (all index slices
// int64 for libtorch). Its slices are reused from batch to batch, so a Batch
// handed back to a Loader must no longer be read.
type Batch struct {
	Graphs    []int32   // dataset index of each molecule, len B
	X         []int64   // atom features, N×9 row-major
	EdgeSrc   []int64   // source atom of each directed edge (batch-global), len E
	EdgeDst   []int64   // destination atom, len E; edges sorted by destination (stable)
	RowPtr    []int64   // CSR offsets over EdgeDst, len N+1: incoming edges of atom i are [RowPtr[i], RowPtr[i+1])
	EdgeAttr  []int64   // bond features of each directed edge, E×3
	NodeGraph []int64   // molecule (0..B-1) of each atom, len N
	GraphPtr  []int64   // atom offsets per molecule, len B+1 (atoms per molecule = differences)
	Labels    []float32 // B×T, 0 where missing
	LabelMask []bool    // B×T, true where the label is present
	AtomGroup []int32   // synthetic datasets only: planted functional group of each atom (-1: linker); nil otherwise

	// Derived from the batch's structure alone: computed here once per batch
	// rather than by tensor ops in every step.
	MaxAtoms int     // atoms of the largest molecule
	Nodes    []int64 // 0 … N−1, each atom's own index
	InDegree []int64 // incoming edges of each atom (RowPtr differences), len N
	PadIndex []int64 // row of each atom in the B×MaxAtoms padded layout: molecule·MaxAtoms + its position in the molecule
	// Every pair of directed edges e' < e with the same destination, as e
	// (PairLater) and e' (PairEarlier), ordered by e then e': comparing what
	// the two edges carry finds an edge that repeats an earlier one into its
	// atom without sorting.
	PairLater, PairEarlier []int64

	// Pos is where the batch stands in the loader's sequence.
	Pos Position
	// Aux belongs to LoaderConfig.Prepare, which may keep per-buffer state
	// here (for example pinned host tensors); it survives buffer reuse.
	Aux any

	cursor []int64          // next free slot per destination atom during collation
	views  []data.GraphView // the molecules being collated
	job    *loaderJob       // the loader's work order for this buffer; nil outside a Loader
}

// NumGraphs is B, the number of molecules.
func (b *Batch) NumGraphs() int { return len(b.Graphs) }

// NumAtoms is N, the number of atoms over all molecules.
func (b *Batch) NumAtoms() int { return len(b.NodeGraph) }

// NumEdges is E, the number of directed edges (twice the bonds).
func (b *Batch) NumEdges() int { return len(b.EdgeSrc) }

// NumTasks is T, the number of label columns.
func (b *Batch) NumTasks() int {
	if len(b.Graphs) == 0 {
		return 0
	}
	return len(b.Labels) / len(b.Graphs)
}

// resize returns s with length n, reusing its memory when large enough; new
// memory gets a quarter extra so that slightly larger batches do not
// allocate again.
func resize[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n, n+n/4)
}

// Collate fills b with the molecules graphs of d as one disjoint graph,
// reusing b's slices (no allocation once they are large enough). Each bond
// (u,v) becomes the directed edges u→v and v→u, in OGB's order, and the edges
// are then sorted stably by destination with a counting sort, which also
// yields the CSR offsets. What else follows from the structure alone (the
// fields after AtomGroup) is derived here too, so that no step recomputes it.
func Collate(d data.Molecules, graphs []int32, b *Batch) error {
	nt := d.NumTasks()
	natoms, nbonds, most := 0, 0, 0
	b.views = resize(b.views, len(graphs))
	for i, g := range graphs {
		if g < 0 || int(g) >= d.NumGraphs() {
			return fmt.Errorf("collate: molecule %d outside 0..%d", g, d.NumGraphs()-1)
		}
		v, err := d.Graph(int(g))
		if err != nil {
			return fmt.Errorf("collate: %w", err)
		}
		b.views[i] = v
		natoms += v.NumAtoms()
		most = max(most, v.NumAtoms())
		nbonds += v.NumBonds()
	}
	nedges := 2 * nbonds
	b.MaxAtoms = most
	b.Graphs = append(b.Graphs[:0], graphs...)
	b.X = resize(b.X, natoms*data.NumAtomFeatures)
	b.EdgeSrc = resize(b.EdgeSrc, nedges)
	b.EdgeDst = resize(b.EdgeDst, nedges)
	b.EdgeAttr = resize(b.EdgeAttr, nedges*data.NumBondFeatures)
	b.RowPtr = resize(b.RowPtr, natoms+1)
	b.NodeGraph = resize(b.NodeGraph, natoms)
	b.GraphPtr = resize(b.GraphPtr, len(graphs)+1)
	b.Labels = resize(b.Labels, len(graphs)*nt)
	b.LabelMask = resize(b.LabelMask, len(graphs)*nt)
	b.cursor = resize(b.cursor, natoms)
	b.Nodes = resize(b.Nodes, natoms)
	b.InDegree = resize(b.InDegree, natoms)
	b.PadIndex = resize(b.PadIndex, natoms)
	if d.HasAtomGroups() {
		b.AtomGroup = resize(b.AtomGroup, natoms)
	} else {
		b.AtomGroup = nil
	}

	// Atoms, molecule membership, padded rows, labels, and in-degrees
	// (counted one slot ahead in RowPtr, so that the prefix sum below gives
	// the offsets).
	clear(b.RowPtr)
	b.GraphPtr[0] = 0
	off := 0
	for i, v := range b.views {
		n := v.NumAtoms()
		x := b.X[off*data.NumAtomFeatures : (off+n)*data.NumAtomFeatures]
		for k, f := range v.AtomFeat {
			x[k] = int64(f)
		}
		ng := b.NodeGraph[off : off+n]
		for k := range ng {
			ng[k] = int64(i)
			b.PadIndex[off+k] = int64(i*b.MaxAtoms + k)
		}
		if b.AtomGroup != nil {
			copy(b.AtomGroup[off:off+n], v.AtomGroup)
		}
		indeg := b.RowPtr[off+1 : off+n+1]
		for _, a := range v.BondAtoms {
			if a < 0 || int(a) >= n {
				return fmt.Errorf("collate: molecule %d: bond endpoint %d outside its %d atoms", graphs[i], a, n)
			}
			indeg[a]++ // each endpoint is the destination of one of the bond's two edges
		}
		for j, y := range v.Labels {
			present := y == y
			b.LabelMask[i*nt+j] = present
			if !present {
				y = 0
			}
			b.Labels[i*nt+j] = y
		}
		off += n
		b.GraphPtr[i+1] = int64(off)
	}
	// The prefix sum, keeping the in-degrees and counting the pairs of edges
	// into the same atom.
	npairs := 0
	for i := 0; i < natoms; i++ {
		deg := b.RowPtr[i+1]
		b.InDegree[i] = deg
		npairs += int(deg * (deg - 1) / 2)
		b.RowPtr[i+1] += b.RowPtr[i]
		b.Nodes[i] = int64(i)
	}
	copy(b.cursor, b.RowPtr[:natoms])

	// Place the edges in OGB's order at their destination's next free slot.
	for i, v := range b.views {
		o := b.GraphPtr[i]
		for k := 0; k < len(v.BondAtoms); k += 2 {
			u, w := o+int64(v.BondAtoms[k]), o+int64(v.BondAtoms[k+1])
			f := v.BondFeat[k/2*data.NumBondFeatures : k/2*data.NumBondFeatures+data.NumBondFeatures]
			b.placeEdge(u, w, f)
			b.placeEdge(w, u, f)
		}
	}
	clear(b.views) // a corpus's views point into mappings that may be closed

	// The edges into atom a are RowPtr[a] … RowPtr[a+1]−1: pair each with
	// every earlier one.
	b.PairLater = resize(b.PairLater, npairs)
	b.PairEarlier = resize(b.PairEarlier, npairs)
	p := 0
	for a := 0; a < natoms; a++ {
		for e := b.RowPtr[a] + 1; e < b.RowPtr[a+1]; e++ {
			for earlier := b.RowPtr[a]; earlier < e; earlier++ {
				b.PairLater[p], b.PairEarlier[p] = e, earlier
				p++
			}
		}
	}
	return nil
}

func (b *Batch) placeEdge(src, dst int64, f []uint8) {
	p := b.cursor[dst]
	b.cursor[dst] = p + 1
	b.EdgeSrc[p] = src
	b.EdgeDst[p] = dst
	a := b.EdgeAttr[p*data.NumBondFeatures : p*data.NumBondFeatures+data.NumBondFeatures]
	a[0], a[1], a[2] = int64(f[0]), int64(f[1]), int64(f[2])
}
