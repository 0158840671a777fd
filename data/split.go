package data

import (
	"math/rand/v2"
	"slices"
)

// Split fractions of OGB's molecule datasets: 80 % train, 10 % valid, 10 % test.
const (
	trainFraction = 0.8
	validFraction = 0.1
)

// ScaffoldSplit is the deterministic Bemis–Murcko scaffold split that OGB's
// split files come from (docs/method.md §8): molecules are grouped by scaffold,
// the groups sorted by size and then by first index, both descending, and
// each group goes whole to train while train stays within 80 % of the
// molecules, else to valid while train+valid stay within 90 %, else to test.
// scaffolds[i] is the scaffold SMILES of molecule i ("" for acyclic ones,
// which thereby form one group).
func ScaffoldSplit(scaffolds []string) *Split {
	first := map[string]int{}
	var groups [][]int32
	for i, s := range scaffolds {
		g, ok := first[s]
		if !ok {
			g = len(groups)
			first[s] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], int32(i))
	}
	slices.SortStableFunc(groups, func(a, b []int32) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return int(b[0] - a[0])
	})
	n := float64(len(scaffolds))
	// The cut-offs are computed in float64 exactly as OGB's Python does.
	trainCut, validCut := trainFraction*n, (trainFraction+validFraction)*n
	s := &Split{Name: "scaffold"}
	for _, g := range groups {
		switch {
		case float64(len(s.Train)+len(g)) <= trainCut:
			s.Train = append(s.Train, g...)
		case float64(len(s.Train)+len(s.Valid)+len(g)) <= validCut:
			s.Valid = append(s.Valid, g...)
		default:
			s.Test = append(s.Test, g...)
		}
	}
	for _, part := range [][]int32{s.Train, s.Valid, s.Test} {
		slices.Sort(part)
	}
	return s
}

// RandomSplit assigns a random 80/10/10 % of n molecules to train, valid and
// test; the same seed gives the same split.
func RandomSplit(n int, seed uint64) *Split {
	perm := make([]int32, n)
	for i := range perm {
		perm[i] = int32(i)
	}
	r := rand.New(rand.NewPCG(seed, splitStream))
	r.Shuffle(n, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	nTrain := int(trainFraction * float64(n))
	nValid := int((trainFraction + validFraction) * float64(n))
	s := &Split{
		Name:  "random",
		Train: slices.Clone(perm[:nTrain]),
		Valid: slices.Clone(perm[nTrain:nValid]),
		Test:  slices.Clone(perm[nValid:]),
	}
	for _, part := range [][]int32{s.Train, s.Valid, s.Test} {
		slices.Sort(part)
	}
	return s
}

// splitStream is the second PCG seed word of random splits ("split" in
// ASCII), so that they never share a stream with the loader's shuffles, whose
// second word is the epoch, for the same user seed.
const splitStream = 0x73706c6974
