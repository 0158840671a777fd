package metrics

// Significance of a paired comparison (pre-trained against random
// encoders): the paired t-test and a t interval for a mean, with Student's t
// distribution computed from the regularized incomplete beta function. The
// file depends on nothing else in the package.

import (
	"errors"
	"math"
)

// PairedTest is a two-sided paired t-test of the differences d_i = a_i − b_i.
type PairedTest struct {
	N     int     `json:"n"`      // pairs
	Mean  float64 `json:"mean"`   // mean difference
	SD    float64 `json:"sd"`     // sample standard deviation of the differences (n − 1)
	T     float64 `json:"t"`      // Mean / (SD/√N); ±Inf when every difference is the same non-zero value
	DF    int     `json:"df"`     // N − 1
	P     float64 `json:"p"`      // two-sided p-value
	Low95 float64 `json:"low_95"` // 95 % t interval of the mean difference
	Hi95  float64 `json:"hi_95"`
}

// OneSampleTTest tests whether the mean of d is zero (two-sided), and gives
// the 95 % t interval of that mean. It needs at least two values and no NaN.
func OneSampleTTest(d []float64) (PairedTest, error) {
	n := len(d)
	if n < 2 {
		return PairedTest{N: n}, errors.New("t-test: fewer than two pairs")
	}
	var sum float64
	for _, x := range d {
		if math.IsNaN(x) {
			return PairedTest{N: n}, errors.New("t-test: a difference is NaN")
		}
		sum += x
	}
	mean := sum / float64(n)
	var sq float64
	for _, x := range d {
		sq += (x - mean) * (x - mean)
	}
	sd := math.Sqrt(sq / float64(n-1))
	r := PairedTest{N: n, Mean: mean, SD: sd, DF: n - 1}
	se := sd / math.Sqrt(float64(n))
	switch {
	case se > 0:
		r.T = mean / se
	case mean == 0:
		r.T = 0 // no difference at all
	default:
		r.T = math.Copysign(math.Inf(1), mean)
	}
	r.P = StudentTTwoSided(r.T, float64(r.DF))
	half := StudentTQuantile(0.975, float64(r.DF)) * se
	r.Low95, r.Hi95 = mean-half, mean+half
	return r, nil
}

// StudentTTwoSided is P(|T| ≥ |t|) for T with Student's t distribution of df
// degrees of freedom: I_x(df/2, 1/2) with x = df/(df + t²).
func StudentTTwoSided(t, df float64) float64 {
	if math.IsNaN(t) || !(df > 0) {
		return math.NaN()
	}
	if math.IsInf(t, 0) {
		return 0
	}
	return RegularizedIncompleteBeta(df/(df+t*t), df/2, 0.5)
}

// StudentTCDF is P(T ≤ t) for Student's t distribution of df degrees of freedom.
func StudentTCDF(t, df float64) float64 {
	tail := StudentTTwoSided(t, df) / 2
	if t < 0 {
		return tail
	}
	return 1 - tail
}

// StudentTQuantile is the t with StudentTCDF(t, df) = p, for p in (0, 1),
// found by bisection (to about 1e-12 relative).
func StudentTQuantile(p, df float64) float64 {
	switch {
	case !(p > 0 && p < 1) || !(df > 0):
		return math.NaN()
	case p < 0.5:
		return -StudentTQuantile(1-p, df)
	case p == 0.5:
		return 0
	}
	lo, hi := 0.0, 1.0
	for StudentTCDF(hi, df) < p {
		lo, hi = hi, 2*hi
	}
	for range 200 {
		mid := (lo + hi) / 2
		if StudentTCDF(mid, df) < p {
			lo = mid
		} else {
			hi = mid
		}
		if hi-lo <= 1e-12*hi {
			break
		}
	}
	return (lo + hi) / 2
}

// RegularizedIncompleteBeta is I_x(a, b) = B(x; a, b)/B(a, b) for x in
// [0, 1] and a, b > 0, from its continued fraction, evaluated by the
// modified Lentz method; the symmetry I_x(a, b) = 1 − I_{1−x}(b, a) keeps x
// on the side where the fraction converges fast.
func RegularizedIncompleteBeta(x, a, b float64) float64 {
	switch {
	case math.IsNaN(x) || x < 0 || x > 1 || !(a > 0) || !(b > 0):
		return math.NaN()
	case x == 0:
		return 0
	case x == 1:
		return 1
	}
	lga, _ := math.Lgamma(a)
	lgb, _ := math.Lgamma(b)
	lgab, _ := math.Lgamma(a + b)
	// x^a (1−x)^b / B(a, b), the factor in front of the fraction.
	front := math.Exp(lgab - lga - lgb + a*math.Log(x) + b*math.Log1p(-x))
	if x < (a+1)/(a+b+2) {
		return front * betaFraction(x, a, b) / a
	}
	return 1 - front*betaFraction(1-x, b, a)/b
}

// betaFraction is the continued fraction 1/(1+ d1/(1+ d2/(1+ …))) of the
// incomplete beta function, with d_{2m+1} = −(a+m)(a+b+m)x/((a+2m)(a+2m+1))
// and d_{2m} = m(b−m)x/((a+2m−1)(a+2m)).
func betaFraction(x, a, b float64) float64 {
	const tiny, eps = 1e-300, 1e-15
	c, d := 1.0, 1-(a+b)*x/(a+1)
	if math.Abs(d) < tiny {
		d = tiny
	}
	d = 1 / d
	h := d
	step := func(coef float64) float64 {
		d = 1 + coef*d
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = 1 + coef/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		return d * c
	}
	for m := 1.0; m <= 1000; m++ {
		h *= step(m * (b - m) * x / ((a + 2*m - 1) * (a + 2*m)))
		delta := step(-(a + m) * (a + b + m) * x / ((a + 2*m) * (a + 2*m + 1)))
		h *= delta
		if math.Abs(delta-1) < eps {
			break
		}
	}
	return h
}
