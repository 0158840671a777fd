package nn

import "github.com/micrograph/micrograph/torch"

// Dropout zeroes each element with probability P during training and scales
// the survivors by 1/(1−P), so that evaluation needs no scaling.
type Dropout struct {
	P float64
}

// Forward applies dropout when train is true and is the identity otherwise.
func (d Dropout) Forward(x *torch.Tensor, train bool) *torch.Tensor {
	return torch.Dropout(x, d.P, train && d.P > 0)
}
