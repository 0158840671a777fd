// Package sample draws the subgraphs of the released formulation
// (docs/method.md §12) on the host, one molecule at a time, in float64:
// spectral clusters of a molecule's atoms split into connected pieces
// (SpectralSubgraphs), random walks (RandomWalks) and k-hop balls (KHopBalls),
// and the k-means that both the spectral clustering and the motif table's
// initialisation use (KMeans). It knows nothing of tensors: package model
// hands it a batch's structure and embeddings and makes tensors of what it
// returns.
package sample

import (
	"math"
	"math/rand/v2"
	"slices"
)

// Molecule is one molecule's bond graph: Neighbors[i] lists the atoms bonded
// to atom i (0 … n−1, each once per bond).
type Molecule struct {
	Neighbors [][]int
}

// Size is the molecule's number of atoms.
func (m Molecule) Size() int { return len(m.Neighbors) }

// Molecules splits a batch in PyG's layout into its molecules: the incoming
// edges of atom i are [rowPtr[i], rowPtr[i+1]) with sources src (batch-wide
// atom indices), and molecule g's atoms are [graphPtr[g], graphPtr[g+1]).
// Atoms are renumbered from 0 within each molecule.
func Molecules(src, rowPtr, graphPtr []int64) []Molecule {
	out := make([]Molecule, len(graphPtr)-1)
	for g := range out {
		first, last := graphPtr[g], graphPtr[g+1]
		nb := make([][]int, last-first)
		for i := first; i < last; i++ {
			for e := rowPtr[i]; e < rowPtr[i+1]; e++ {
				nb[i-first] = append(nb[i-first], int(src[e]-first))
			}
		}
		out[g] = Molecule{Neighbors: nb}
	}
	return out
}

// Count is how many subgraphs the released formulation draws from a molecule
// of n atoms, and how many spectral clusters it cuts it into: ⌊√(n/4)⌋ + 1.
func Count(n int) int { return int(math.Sqrt(float64(n)/4)) + 1 }

// Components splits members (atom indices of m) into the connected pieces of
// the subgraph they induce, each in ascending order, pieces ordered by their
// smallest atom.
func Components(m Molecule, members []int) [][]int {
	in := make(map[int]bool, len(members))
	for _, a := range members {
		in[a] = true
	}
	seen := make(map[int]bool, len(members))
	var out [][]int
	for a := range m.Neighbors { // ascending atoms: pieces come out ordered
		if !in[a] || seen[a] {
			continue
		}
		piece := []int{a}
		seen[a] = true
		for q := 0; q < len(piece); q++ {
			for _, b := range m.Neighbors[piece[q]] {
				if in[b] && !seen[b] {
					seen[b] = true
					piece = append(piece, b)
				}
			}
		}
		slices.Sort(piece)
		out = append(out, piece)
	}
	return out
}

// RandomWalks draws Count(n) random walks on m: each starts at a uniformly
// drawn atom and takes a number of steps drawn uniformly from
// [minSteps, maxSteps), each to a uniformly drawn neighbour; a walk's
// subgraph is the set of atoms it visits (ascending). Subgraphs with fewer
// than minSize atoms are dropped.
func RandomWalks(m Molecule, minSteps, maxSteps, minSize int, rng *rand.Rand) [][]int {
	n := m.Size()
	var out [][]int
	for range Count(n) {
		at := rng.IntN(n)
		steps := minSteps + rng.IntN(maxSteps-minSteps)
		visited := map[int]bool{at: true}
		for range steps {
			nb := m.Neighbors[at]
			if len(nb) == 0 {
				break
			}
			at = nb[rng.IntN(len(nb))]
			visited[at] = true
		}
		if len(visited) >= minSize {
			out = append(out, keys(visited))
		}
	}
	return out
}

// KHopBalls draws Count(n) balls on m: a uniformly drawn centre and every atom
// within k bonds of it, k drawn uniformly from {minHops, …, maxHops}; balls
// with fewer than minSize atoms are dropped. Atoms ascend within a ball.
func KHopBalls(m Molecule, minHops, maxHops, minSize int, rng *rand.Rand) [][]int {
	n := m.Size()
	var out [][]int
	for range Count(n) {
		centre := rng.IntN(n)
		hops := minHops + rng.IntN(maxHops-minHops+1)
		dist := map[int]int{centre: 0}
		frontier := []int{centre}
		for h := 1; h <= hops; h++ {
			var next []int
			for _, a := range frontier {
				for _, b := range m.Neighbors[a] {
					if _, ok := dist[b]; !ok {
						dist[b] = h
						next = append(next, b)
					}
				}
			}
			frontier = next
		}
		if len(dist) >= minSize {
			ball := make(map[int]bool, len(dist))
			for a := range dist {
				ball[a] = true
			}
			out = append(out, keys(ball))
		}
	}
	return out
}

// keys is the set's members in ascending order.
func keys(set map[int]bool) []int {
	out := make([]int, 0, len(set))
	for a := range set {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}
