package nn

import "github.com/micrograph/micrograph/torch"

// Dropout zeroes each element with probability P during training and scales
// the survivors by 1/(1−P), so that evaluation needs no scaling.
type Dropout struct {
	P float64
}

// Forward applies dropout when train is true and is the identity otherwise.
// Where the fused kernel takes x, it draws the mask (torch.FusedDropout).
func (d Dropout) Forward(x *torch.Tensor, train bool) *torch.Tensor {
	if train && d.P > 0 && d.P < 1 && torch.FusedKernelsFor(x) {
		return torch.FusedDropout(x, d.P)
	}
	return torch.Dropout(x, d.P, train && d.P > 0)
}

// ForwardReLU is Forward(x.Relu(), train), in one fused pass where Forward
// would use the fused kernel (torch.FusedReluDropout).
func (d Dropout) ForwardReLU(x *torch.Tensor, train bool) *torch.Tensor {
	if train && d.P > 0 && d.P < 1 && torch.FusedKernelsFor(x) {
		return torch.FusedReluDropout(x, d.P)
	}
	return d.Forward(x.Relu(), train)
}
