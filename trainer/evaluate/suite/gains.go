package suite

import (
	"maps"
	"math"
	"slices"

	"github.com/micrograph/micrograph/trainer/evaluate"
	"github.com/micrograph/micrograph/trainer/metrics"
)

// Gain is Δ = pre-trained − random, in ROC-AUC, on one benchmark under one
// evaluation and protocol, with a two-sided paired t-test of Δ = 0 (or, for
// the average over benchmarks, the same over the per-pair averages). Pairs
// are the replicates (one per encoder, each the mean of its runs) when the
// suite had several encoders; with one encoder they are its runs, paired by
// seed (scaffold) or by seed and fold (cross-validation), which carry the
// evaluation's variance but not pre-training's.
type Gain struct {
	Benchmark   string              `json:"benchmark"`
	Evaluation  string              `json:"evaluation"`
	Protocol    evaluate.Protocol   `json:"protocol"`
	PairedBy    string              `json:"paired_by"` // "encoder", "seed" or "seed×fold"
	Delta       metrics.Value       `json:"delta"`     // mean Δ over pairs
	Deltas      []metrics.Value     `json:"deltas"`    // Δ of each pair
	Test        *metrics.PairedTest `json:"test"`      // nil with fewer than two pairs
	Significant bool                `json:"significant"`
}

// SignificanceLevel is the two-sided p-value under which a Δ is marked
// significant.
const SignificanceLevel = 0.05

// side is what the entries of one benchmark, evaluation, protocol and
// encoder kind hold: every run's test ROC-AUC, replicate by replicate.
type side struct {
	replicates map[int][]metrics.Value
}

// sides gathers the entries of one benchmark, evaluation and protocol.
func (r *Result) sides(benchmark, evaluation string, protocol evaluate.Protocol) (pre, random side) {
	pre, random = side{map[int][]metrics.Value{}}, side{map[int][]metrics.Value{}}
	for _, e := range r.Entries {
		if e.Benchmark != benchmark || e.Evaluation != evaluation || e.Protocol != protocol {
			continue
		}
		s := random
		if e.Pretrained {
			s = pre
		}
		s.replicates[e.Replicate] = e.RunTests
	}
	return pre, random
}

// runs is every run's test ROC-AUC, replicates in order.
func (s side) runs() []metrics.Value {
	keys := slices.Sorted(maps.Keys(s.replicates))
	var out []metrics.Value
	for _, k := range keys {
		out = append(out, s.replicates[k]...)
	}
	return out
}

// stat summarises every run of the side.
func (s side) stat() metrics.Stat {
	runs := s.runs()
	xs := make([]float64, len(runs))
	for i, v := range runs {
		xs[i] = float64(v)
	}
	return metrics.StatOf(xs)
}

// ComputeGains is the Δ of every benchmark, evaluation and protocol that has
// both sides, and for each evaluation and protocol the average over its
// benchmarks (see Gain). Pairs with a NaN on either side are left out.
func (r *Result) ComputeGains() (gains, averages []Gain) {
	for _, evaluation := range r.Config.Evaluations {
		for _, protocol := range r.Config.Protocols {
			var group []Gain
			for _, b := range Benchmarks {
				pre, random := r.sides(b, evaluation, protocol)
				g, ok := pairGain(pre, random, protocol)
				if !ok {
					continue
				}
				g.Benchmark, g.Evaluation, g.Protocol = b, evaluation, protocol
				group = append(group, g)
			}
			gains = append(gains, group...)
			if len(group) == 0 {
				continue
			}
			avg := Gain{Benchmark: "average", Evaluation: evaluation, Protocol: protocol, PairedBy: group[0].PairedBy}
			var sum float64
			pairs := len(group[0].Deltas)
			for _, g := range group {
				sum += float64(g.Delta)
				if len(g.Deltas) != pairs || g.PairedBy != avg.PairedBy {
					pairs = -1
				}
			}
			avg.Delta = metrics.Value(sum / float64(len(group)))
			if pairs > 0 {
				// Δ of pair k averaged over the benchmarks: the pairs keep
				// what the benchmarks share (the encoder, the seed).
				avg.Deltas = make([]metrics.Value, pairs)
				for k := range pairs {
					for _, g := range group {
						avg.Deltas[k] += g.Deltas[k] / metrics.Value(len(group))
					}
				}
				avg.Test, avg.Significant = tTest(avg.Deltas)
			}
			averages = append(averages, avg)
		}
	}
	return gains, averages
}

// pairGain pairs the two sides of one benchmark, evaluation and protocol.
func pairGain(pre, random side, protocol evaluate.Protocol) (Gain, bool) {
	var both []int
	for k := range pre.replicates {
		if _, ok := random.replicates[k]; ok {
			both = append(both, k)
		}
	}
	slices.Sort(both)
	if len(both) == 0 {
		return Gain{}, false
	}
	var g Gain
	switch {
	case len(both) > 1:
		g.PairedBy = "encoder"
		for _, k := range both {
			g.Deltas = append(g.Deltas, metrics.Value(meanOfValues(pre.replicates[k])-meanOfValues(random.replicates[k])))
		}
	default:
		g.PairedBy = protocol.PairedBy()
		a, b := pre.replicates[both[0]], random.replicates[both[0]]
		if len(a) != len(b) {
			return Gain{}, false
		}
		for i := range a {
			g.Deltas = append(g.Deltas, a[i]-b[i])
		}
	}
	g.Deltas = slices.DeleteFunc(g.Deltas, func(v metrics.Value) bool { return math.IsNaN(float64(v)) })
	if len(g.Deltas) == 0 {
		return Gain{}, false
	}
	g.Delta = metrics.Value(meanOfValues(g.Deltas))
	g.Test, g.Significant = tTest(g.Deltas)
	return g, true
}

// tTest is the one-sample t-test of deltas, nil with fewer than two.
func tTest(deltas []metrics.Value) (*metrics.PairedTest, bool) {
	xs := make([]float64, len(deltas))
	for i, v := range deltas {
		xs[i] = float64(v)
	}
	t, err := metrics.OneSampleTTest(xs)
	if err != nil {
		return nil, false
	}
	return &t, t.P < SignificanceLevel
}

// meanOfValues is the mean of the defined values of vs (NaN if none).
func meanOfValues(vs []metrics.Value) float64 {
	var sum float64
	n := 0
	for _, v := range vs {
		if !math.IsNaN(float64(v)) {
			sum += float64(v)
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return sum / float64(n)
}
