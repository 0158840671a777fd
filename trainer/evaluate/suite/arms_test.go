package suite_test

import (
	"strings"
	"testing"

	"github.com/micrograph/micrograph/trainer/evaluate"
	"github.com/micrograph/micrograph/trainer/evaluate/suite"
)

// armSuite is a linear scaffold suite with three replicates (one run each)
// per side on bace and bbbp.
func armSuite(bace, bbbp, randomBace, randomBBBP [3]float64) *suite.Result {
	r := &suite.Result{Config: suite.Config{
		Evaluations: []string{suite.EvaluationLinear}, Protocols: []evaluate.Protocol{evaluate.ProtocolScaffold}}}
	add := func(benchmark string, pretrained bool, runs [3]float64) {
		for k, v := range runs {
			e := fakeEntry(benchmark, suite.EvaluationLinear, pretrained, v)
			e.Replicate = k
			r.Entries = append(r.Entries, e)
		}
	}
	add("bace", true, bace)
	add("bbbp", true, bbbp)
	add("bace", false, randomBace)
	add("bbbp", false, randomBBBP)
	return r
}

// Two methods, worked by hand. Cells: mean ± population std of three runs
// (full bace 0.70, 0.72, 0.74: 72.00 ± 1.63). Δ vs random per replicate,
// averaged over the benchmarks: full (5+0)/2, (6+2)/2, (7+4)/2 = 2.5, 4, 5.5
// points: mean 4, sd 1.5, t = 4.62 with 2 degrees of freedom, interval
// 4 ± 4.3027·0.866 = [0.27, 7.73], p = 1 − t/√(t²+2) = 0.044; ablation (4+1)/2,
// (4+0)/2, (4+5)/2 = 2.5, 2, 4.5: mean 3, interval [−0.29, 6.29], p = 0.059.
// Full − ablation on the replicates' averages: 65 − 65, 67 − 65, 69 − 68 =
// 0, 2, 1: mean 1, sd 1, t = √3, p = 1 − √3/√5 = 0.225, interval
// 1 ± 4.3027/√3 = [−1.48, 3.48]. Per benchmark: bace 1, 2, 3 (mean 2,
// interval [−0.48, 4.48]), bbbp −1, 2, −1 (mean 0, sd √3, interval ±4.30).
func TestCompareArms(t *testing.T) {
	random := [2][3]float64{{0.65, 0.66, 0.67}, {0.60, 0.60, 0.60}}
	full := armSuite([3]float64{0.70, 0.72, 0.74}, [3]float64{0.60, 0.62, 0.64}, random[0], random[1])
	ablation := armSuite([3]float64{0.69, 0.70, 0.71}, [3]float64{0.61, 0.60, 0.65}, random[0], random[1])
	c, err := suite.CompareArms([]suite.Arm{{Name: "full", Result: full}, {Name: "random walk", Result: ablation}})
	if err != nil {
		t.Fatal(err)
	}
	want := `Feature extraction, scaffold:

| encoder | bace | bbbp | average | Δ vs random [95 %] | full − this |
| :-- | --: | --: | --: | --: | --: |
| random encoder | 66.00 ± 0.82 | 60.00 ± 0.00 | 63.00 | — | — |
| full | 72.00 ± 1.63 | 62.00 ± 1.63 | 67.00 | +4.00 [+0.27, +7.73]† | — |
| random walk | 70.00 ± 0.82 | 62.00 ± 2.16 | 66.00 | +3.00 [-0.29, +6.29] | +1.00 (p=0.225) |

full − this, per benchmark [95 % t interval over the replicates]:

| encoder | bace | bbbp | average |
| :-- | --: | --: | --: |
| random walk | +2.00 [-0.48, +4.48] | +0.00 [-4.30, +4.30] | +1.00 [-1.48, +3.48] |
`
	got := c.Markdown()
	if !strings.HasPrefix(got, want) {
		t.Errorf("table:\n%s\nwant it to begin with:\n%s", got, want)
	}
	if g := c.Tables[0].Arms[1].FromFirst; g == nil || g.Test == nil || len(g.Deltas) != 3 || g.Test.DF != 2 {
		t.Errorf("full − random walk: %+v, want a test over 3 pairs", g)
	}

	for _, tc := range []struct {
		name string
		arms []suite.Arm
		want string
	}{
		{"one arm", []suite.Arm{{Name: "full", Result: full}}, "at least two suites, got 1"},
		{"other benchmarks", []suite.Arm{{Name: "full", Result: full}, {Name: "bace only", Result: &suite.Result{
			Config:  full.Config,
			Entries: full.Entries[:3],
		}}}, "bace only ran bace, full ran bace, bbbp: compare suites of the same benchmarks"},
		{"other protocols", []suite.Arm{{Name: "full", Result: full}, {Name: "cv10", Result: &suite.Result{
			Config:  suite.Config{Evaluations: full.Config.Evaluations, Protocols: []evaluate.Protocol{evaluate.ProtocolCV10}},
			Entries: full.Entries,
		}}}, "cv10 ran linear under cv10, full ran linear under scaffold"},
	} {
		if _, err := suite.CompareArms(tc.arms); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}
