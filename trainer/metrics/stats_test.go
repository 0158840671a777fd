package metrics_test

import (
	"errors"
	"math"
	"testing"

	"github.com/micrograph/micrograph/trainer/metrics"
)

// Student's t two-sided p-values against closed forms (df 1: Cauchy,
// 2 and 3: elementary CDFs) and against printed table values: the critical
// values of the two-sided 5 % and 1 % tests.
func TestStudentTTwoSided(t *testing.T) {
	closed := map[float64]func(t float64) float64{
		1: func(t float64) float64 { return 1 - 2*math.Atan(math.Abs(t))/math.Pi },
		2: func(t float64) float64 { return 1 - math.Abs(t)/math.Sqrt(t*t+2) },
		3: func(t float64) float64 {
			u := math.Abs(t) / math.Sqrt(3)
			return 1 - 2*(u/(1+u*u)+math.Atan(u))/math.Pi
		},
	}
	for df, p := range closed {
		for _, tv := range []float64{0, 0.1, -0.5, 1, 1.9867985, -2.5, 4, 10, 60} {
			if got, want := metrics.StudentTTwoSided(tv, df), p(tv); math.Abs(got-want) > 1e-12 {
				t.Errorf("t=%g df=%g: p %.15f, closed form %.15f", tv, df, got, want)
			}
		}
	}
	for _, tc := range []struct{ t, df, p float64 }{
		{2.262, 9, 0.05}, {2.228, 10, 0.05}, {12.706, 1, 0.05}, {4.303, 2, 0.05},
		{3.169, 10, 0.01}, {2.042, 30, 0.05}, {1.960, 1e7, 0.05}, {2.576, 1e7, 0.01},
	} {
		// Tables print three decimals of t, so p is right to about 1e-4.
		if got := metrics.StudentTTwoSided(tc.t, tc.df); math.Abs(got-tc.p) > 2e-4 {
			t.Errorf("t=%g df=%g: p %.6f, table %g", tc.t, tc.df, got, tc.p)
		}
	}
	if p := metrics.StudentTTwoSided(math.Inf(1), 3); p != 0 {
		t.Errorf("t=+Inf: p %g", p)
	}
	if got := metrics.StudentTCDF(-1, 1); math.Abs(got-0.25) > 1e-15 {
		t.Errorf("Cauchy CDF at −1: %g, want 0.25", got)
	}
}

// The quantiles are the tables' critical values, and invert the CDF.
func TestStudentTQuantile(t *testing.T) {
	for _, tc := range []struct{ p, df, t float64 }{
		{0.975, 1, 12.7062}, {0.975, 2, 4.3027}, {0.975, 3, 3.1824}, {0.975, 9, 2.2622},
		{0.995, 10, 3.1693}, {0.975, 1e7, 1.9600}, {0.025, 9, -2.2622},
	} {
		got := metrics.StudentTQuantile(tc.p, tc.df)
		if math.Abs(got-tc.t) > 1e-4 {
			t.Errorf("p=%g df=%g: %.6f, table %g", tc.p, tc.df, got, tc.t)
		}
		if back := metrics.StudentTCDF(got, tc.df); math.Abs(back-tc.p) > 1e-10 {
			t.Errorf("p=%g df=%g: CDF of the quantile %.12f", tc.p, tc.df, back)
		}
	}
	// df 2 has the closed form t = (2p−1)·√(2/(1−(2p−1)²)).
	for _, p := range []float64{0.6, 0.9, 0.999} {
		q := 2*p - 1
		if got, want := metrics.StudentTQuantile(p, 2), q*math.Sqrt(2/(1-q*q)); math.Abs(got-want) > 1e-9*want {
			t.Errorf("p=%g df=2: %.12f, closed form %.12f", p, got, want)
		}
	}
}

// I_x(a, b) at points with closed forms: I_x(a, 1) = x^a, I_x(1, b) =
// 1 − (1−x)^b, I_{1/2}(a, a) = 1/2, I_x(2, 2) = 3x² − 2x³.
func TestRegularizedIncompleteBeta(t *testing.T) {
	for _, tc := range []struct{ x, a, b, want float64 }{
		{0.3, 2.5, 1, math.Pow(0.3, 2.5)},
		{0.7, 1, 4, 1 - math.Pow(0.3, 4)},
		{0.5, 7.5, 7.5, 0.5},
		{0.5, 200, 200, 0.5},
		{0.2, 2, 2, 3*0.04 - 2*0.008},
		{0.9, 2, 2, 3*0.81 - 2*0.729},
		{0, 3, 4, 0},
		{1, 3, 4, 1},
	} {
		if got := metrics.RegularizedIncompleteBeta(tc.x, tc.a, tc.b); math.Abs(got-tc.want) > 1e-13 {
			t.Errorf("I_%g(%g, %g) = %.16f, want %.16f", tc.x, tc.a, tc.b, got, tc.want)
		}
	}
	for _, bad := range [][3]float64{{-0.1, 1, 1}, {1.1, 1, 1}, {0.5, 0, 1}, {0.5, 1, -1}, {math.NaN(), 1, 1}} {
		if got := metrics.RegularizedIncompleteBeta(bad[0], bad[1], bad[2]); !math.IsNaN(got) {
			t.Errorf("I_%g(%g, %g) = %g, want NaN", bad[0], bad[1], bad[2], got)
		}
	}
}

// A paired test computed by hand: differences 0.1, 0, 0.3, 0.1; mean 0.125;
// squared deviations sum to 0.0475, sd = √(0.0475/3) = 0.125831; se = sd/2 =
// 0.0629153; t = 1.986799 with 3 degrees of freedom; the df-3 closed form
// gives p = 0.141122; t(0.975, 3) = 3.182446, so the 95 % interval is
// 0.125 ± 0.200225.
func TestPairedTTestHandComputed(t *testing.T) {
	r, err := pairedTTest([]float64{0.8, 0.7, 0.9, 0.6}, []float64{0.7, 0.7, 0.6, 0.5})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		got, want float64
		tol       float64
	}{
		{"mean", r.Mean, 0.125, 1e-12},
		{"sd", r.SD, 0.1258306, 1e-7},
		{"t", r.T, 1.9867985, 1e-6},
		{"p", r.P, 0.1411219, 1e-6},
		{"low", r.Low95, 0.125 - 0.200225, 1e-6},
		{"high", r.Hi95, 0.125 + 0.200225, 1e-6},
	} {
		if math.Abs(c.got-c.want) > c.tol {
			t.Errorf("%s: %.8f, want %.8f", c.name, c.got, c.want)
		}
	}
	if r.N != 4 || r.DF != 3 {
		t.Errorf("n %d, df %d", r.N, r.DF)
	}

	// Equal differences: no spread, so t is infinite and p is 0; none at all: p 1.
	if r, _ := pairedTTest([]float64{0.5, 0.6}, []float64{0.4, 0.5}); !math.IsInf(r.T, 1) || r.P != 0 {
		t.Errorf("constant differences: t %g, p %g", r.T, r.P)
	}
	if r, _ := pairedTTest([]float64{0.5, 0.6}, []float64{0.5, 0.6}); r.T != 0 || r.P != 1 {
		t.Errorf("no differences: t %g, p %g", r.T, r.P)
	}
	for name, ab := range map[string][2][]float64{
		"one pair": {{0.5}, {0.4}},
		"lengths":  {{0.5, 0.6}, {0.4}},
		"NaN":      {{0.5, math.NaN()}, {0.4, 0.5}},
		"empty":    {nil, nil},
	} {
		if _, err := pairedTTest(ab[0], ab[1]); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// pairedTTest tests whether the mean of a_i − b_i is zero. It needs at least
// two pairs and no NaN.
func pairedTTest(a, b []float64) (metrics.PairedTest, error) {
	if len(a) != len(b) {
		return metrics.PairedTest{}, errors.New("paired t-test: the two samples differ in length")
	}
	d := make([]float64, len(a))
	for i := range a {
		d[i] = a[i] - b[i]
	}
	return metrics.OneSampleTTest(d)
}

// StatOf is the mean and the population standard deviation (numpy's std,
// ddof 0) of the values that are not NaN, on hand-computed cases.
func TestStatOfHandComputed(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name      string
		xs        []float64
		mean, std float64
		n         int
	}{
		{"textbook", []float64{2, 4, 4, 4, 5, 5, 7, 9}, 5, 2, 8}, // Σ(x−5)² = 32, 32/8 = 4
		{"NaN left out", []float64{1, nan, 3}, 2, 1, 2},
		{"one value", []float64{0.7}, 0.7, 0, 1},
		{"two values", []float64{0.6, 0.8}, 0.7, 0.1, 2}, // ddof 1 would give 0.1·√2
	}
	for _, tc := range tests {
		s := metrics.StatOf(tc.xs)
		if math.Abs(float64(s.Mean)-tc.mean) > 1e-12 || math.Abs(float64(s.Std)-tc.std) > 1e-12 || s.N != tc.n {
			t.Errorf("%s: %+v, want mean %v, std %v over %d", tc.name, s, tc.mean, tc.std, tc.n)
		}
	}
	if s := metrics.StatOf([]float64{nan, nan}); !math.IsNaN(float64(s.Mean)) || !math.IsNaN(float64(s.Std)) || s.N != 0 {
		t.Errorf("only NaN: %+v, want NaN ± NaN over 0", s)
	}
}
