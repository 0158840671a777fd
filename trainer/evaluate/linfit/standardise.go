package linfit

import (
	"math"

	"github.com/micrograph/micrograph/torch"
)

// Standardisation is the mean and population std (1×d) of the rows of x,
// a std below 1e-6 (a constant feature) replaced by 1: (x − mean)/std
// standardises, in x's dtype on x's device.
func Standardisation(x *torch.Tensor) (mean, std *torch.Tensor) {
	mean = x.MeanDim(0, true)
	std = x.Sub(mean).PowScalar(2).MeanDim(0, true).Sqrt()
	return mean, std.MaskedFill(std.LtScalar(1e-6), 1)
}

// Standardiser is Standardisation on the host, in float64, for the exact
// fits: the statistics of some rows of a matrix of n rows of d features
// (row-major), applied to any of its rows.
type Standardiser struct {
	x         []float32
	d         int
	mean, std []float64
}

// NewStandardiser takes the mean and population std of the rows on of x (d
// features each), a std below 1e-6 (a constant feature) replaced by 1.
func NewStandardiser(x []float32, d int, on []int32) Standardiser {
	mean, std := make([]float64, d), make([]float64, d)
	for _, g := range on {
		for j, v := range x[int(g)*d : int(g+1)*d] {
			mean[j] += float64(v)
		}
	}
	for j := range mean {
		mean[j] /= float64(len(on))
	}
	for _, g := range on {
		for j, v := range x[int(g)*d : int(g+1)*d] {
			std[j] += (float64(v) - mean[j]) * (float64(v) - mean[j])
		}
	}
	for j := range std {
		if std[j] = math.Sqrt(std[j] / float64(len(on))); std[j] < 1e-6 {
			std[j] = 1
		}
	}
	return Standardiser{x: x, d: d, mean: mean, std: std}
}

// Rows is the rows idx of the matrix, standardised: len(idx)×d, row-major.
func (s Standardiser) Rows(idx []int32) []float32 {
	out := make([]float32, 0, len(idx)*s.d)
	for _, g := range idx {
		for j, v := range s.x[int(g)*s.d : int(g+1)*s.d] {
			out = append(out, float32((float64(v)-s.mean[j])/s.std[j]))
		}
	}
	return out
}
