package nn

import (
	"math"

	"github.com/micrograph/micrograph/torch"
)

// fans is PyTorch's fan_in and fan_out of a weight: size(1) and size(0), times
// the receptive field (the product of the remaining dims).
func fans(t *torch.Tensor) (fanIn, fanOut float64) {
	shape := t.Shape()
	if len(shape) < 2 {
		panic("nn: fan of a tensor with fewer than 2 dimensions")
	}
	receptive := int64(1)
	for _, s := range shape[2:] {
		receptive *= s
	}
	return float64(shape[1] * receptive), float64(shape[0] * receptive)
}

// XavierUniform fills t from U(−a, a) with a = gain·√(6/(fan_in+fan_out)),
// as torch.nn.init.xavier_uniform_.
func XavierUniform(t *torch.Tensor, gain float64) {
	fanIn, fanOut := fans(t)
	a := gain * math.Sqrt(6/(fanIn+fanOut))
	torch.NoGrad(func() { t.FillUniform(-a, a) })
}

// KaimingUniform fills t from U(−b, b) with b = √(6/((1+a²)·fan_in)), as
// torch.nn.init.kaiming_uniform_ with the leaky-ReLU gain.
func KaimingUniform(t *torch.Tensor, a float64) {
	fanIn, _ := fans(t)
	b := math.Sqrt(6 / ((1 + a*a) * fanIn))
	torch.NoGrad(func() { t.FillUniform(-b, b) })
}

// Uniform fills t from U(lo, hi).
func Uniform(t *torch.Tensor, lo, hi float64) {
	torch.NoGrad(func() { t.FillUniform(lo, hi) })
}

// Normal fills t from N(mean, std²).
func Normal(t *torch.Tensor, mean, std float64) {
	torch.NoGrad(func() { t.FillNormal(mean, std) })
}
