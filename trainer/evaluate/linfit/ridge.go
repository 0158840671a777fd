package linfit

import (
	"fmt"
	"math"
)

// Ridge is one ridge regression: prediction x·W + B.
type Ridge struct {
	Lambda float64
	W      []float64 // one weight per feature
	B      float64
}

// FitRidge fits, for each λ of lambdas, the ridge regression minimising
//
//	1/n Σ (x_i·w + b − y_i)² + λ‖w‖²
//
// over the rows i whose target y_i is not NaN, the intercept b unpenalised
// (scikit-learn's Ridge with alpha = λ·n). x holds n rows of d features,
// row-major. The solution is exact: the features and targets are centred on
// the labelled rows' means, the d×d normal equations (XᵀX/n + λI)w = Xᵀy/n
// are formed once and solved by Cholesky for every λ. λ must be positive,
// which keeps the system positive definite even with fewer rows than
// features.
func FitRidge(x []float32, d int, y []float32, lambdas []float64) ([]Ridge, error) {
	if d <= 0 || len(x) != d*len(y) {
		return nil, fmt.Errorf("ridge: %d feature values for %d rows of %d features", len(x), len(y), d)
	}
	var rows []int
	for i, v := range y {
		if v == v {
			rows = append(rows, i)
		}
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("ridge: no labelled rows")
	}
	n := float64(len(rows))
	mean := make([]float64, d)
	var yMean float64
	for _, i := range rows {
		for j, v := range x[i*d : (i+1)*d] {
			mean[j] += float64(v)
		}
		yMean += float64(y[i])
	}
	for j := range mean {
		mean[j] /= n
	}
	yMean /= n
	gram := make([]float64, d*d) // XcᵀXc/n, lower triangle filled
	rhs := make([]float64, d)    // Xcᵀyc/n
	xc := make([]float64, d)
	for _, i := range rows {
		for j, v := range x[i*d : (i+1)*d] {
			xc[j] = float64(v) - mean[j]
		}
		yc := float64(y[i]) - yMean
		for j := range d {
			rhs[j] += xc[j] * yc
			row := gram[j*d : j*d+j+1]
			for k := range row {
				row[k] += xc[j] * xc[k]
			}
		}
	}
	for j := range d {
		rhs[j] /= n
		for k := 0; k <= j; k++ {
			gram[j*d+k] /= n
		}
	}
	fits := make([]Ridge, len(lambdas))
	a := make([]float64, d*d)
	for g, lambda := range lambdas {
		if !(lambda > 0) || math.IsInf(lambda, 0) {
			return nil, fmt.Errorf("ridge: λ %g must be positive and finite", lambda)
		}
		copy(a, gram)
		for j := range d {
			a[j*d+j] += lambda
		}
		w, err := choleskySolve(a, d, rhs)
		if err != nil {
			return nil, fmt.Errorf("ridge, λ %g: %w", lambda, err)
		}
		b := yMean
		for j := range d {
			b -= mean[j] * w[j]
		}
		fits[g] = Ridge{Lambda: lambda, W: w, B: b}
	}
	return fits, nil
}

// Predict is x·W + B for each row of x (d features each, row-major).
func (f Ridge) Predict(x []float32) []float64 {
	d := len(f.W)
	out := make([]float64, len(x)/d)
	for i := range out {
		s := f.B
		for j, v := range x[i*d : (i+1)*d] {
			s += float64(v) * f.W[j]
		}
		out[i] = s
	}
	return out
}

// choleskySolve solves A w = b for a symmetric positive definite d×d A of
// which the lower triangle is read (and overwritten by its factor L, A =
// LLᵀ).
func choleskySolve(a []float64, d int, b []float64) ([]float64, error) {
	for j := range d {
		s := a[j*d+j]
		for k := range j {
			s -= a[j*d+k] * a[j*d+k]
		}
		if !(s > 0) {
			return nil, fmt.Errorf("the normal equations are not positive definite (pivot %d is %g)", j, s)
		}
		l := math.Sqrt(s)
		a[j*d+j] = l
		for i := j + 1; i < d; i++ {
			s := a[i*d+j]
			for k := range j {
				s -= a[i*d+k] * a[j*d+k]
			}
			a[i*d+j] = s / l
		}
	}
	// L z = b, then Lᵀ w = z.
	w := make([]float64, d)
	for i := range d {
		s := b[i]
		for k := range i {
			s -= a[i*d+k] * w[k]
		}
		w[i] = s / a[i*d+i]
	}
	for i := d - 1; i >= 0; i-- {
		s := w[i]
		for k := i + 1; k < d; k++ {
			s -= a[k*d+i] * w[k]
		}
		w[i] = s / a[i*d+i]
	}
	return w, nil
}
