package metrics

import "math"

// NMI is the normalised mutual information of two labelings of the same
// items, I(a; b) / ((H(a) + H(b)) / 2), as scikit-learn's
// normalized_mutual_info_score with its default arithmetic normalisation.
// It is 1 when either labeling determines the other and 0 when they are
// independent; two constant labelings count as identical (1).
func NMI(a, b []int) float64 {
	n := float64(len(a))
	if len(a) != len(b) {
		panic("trainer: NMI of labelings of different lengths")
	}
	joint := map[[2]int]float64{}
	ca, cb := map[int]float64{}, map[int]float64{}
	for i := range a {
		joint[[2]int{a[i], b[i]}]++
		ca[a[i]]++
		cb[b[i]]++
	}
	if len(ca) == 1 && len(cb) == 1 || len(a) == 0 {
		return 1
	}
	entropy := func(c map[int]float64) float64 {
		var h float64
		for _, v := range c {
			h -= v / n * math.Log(v/n)
		}
		return h
	}
	var mi float64
	for k, v := range joint {
		mi += v / n * math.Log(v*n/(ca[k[0]]*cb[k[1]]))
	}
	ha, hb := entropy(ca), entropy(cb)
	if ha+hb == 0 {
		return 1
	}
	return max(0, mi/((ha+hb)/2))
}
