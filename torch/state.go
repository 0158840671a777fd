package torch

import (
	"fmt"
	"slices"
	"strings"
)

// Named is one entry of a state dict: a tensor and its key.
type Named struct {
	Name   string
	Tensor *Tensor
}

// FreeNamed frees every tensor of state.
func FreeNamed(state []Named) {
	for _, n := range state {
		n.Tensor.Free()
	}
}

// LoadState copies each tensor of src into the tensor of dst with the same
// name, in place, converting dtype and device as needed (like PyTorch's
// load_state_dict). Every name of dst must be in src with the same shape and
// src may hold nothing else; otherwise nothing is copied and the error lists
// the missing, unexpected and mis-shaped keys.
func LoadState(dst, src []Named) error {
	byName := make(map[string]*Tensor, len(src))
	for _, n := range src {
		byName[n.Name] = n.Tensor
	}
	var missing, unexpected, misShaped []string
	seen := make(map[string]bool, len(dst))
	for _, d := range dst {
		seen[d.Name] = true
		s, ok := byName[d.Name]
		if !ok {
			missing = append(missing, d.Name)
			continue
		}
		if ds, ss := d.Tensor.Shape(), s.Shape(); !slices.Equal(ds, ss) {
			misShaped = append(misShaped, fmt.Sprintf("%s (want %v, file has %v)", d.Name, ds, ss))
		}
	}
	for _, s := range src {
		if !seen[s.Name] {
			unexpected = append(unexpected, s.Name)
		}
	}
	if len(missing)+len(unexpected)+len(misShaped) > 0 {
		var parts []string
		if len(missing) > 0 {
			parts = append(parts, "missing keys: "+strings.Join(missing, ", "))
		}
		if len(unexpected) > 0 {
			parts = append(parts, "unexpected keys: "+strings.Join(unexpected, ", "))
		}
		if len(misShaped) > 0 {
			parts = append(parts, "shape mismatch: "+strings.Join(misShaped, ", "))
		}
		return fmt.Errorf("state does not match: %s", strings.Join(parts, "; "))
	}
	NoGrad(func() {
		for _, d := range dst {
			d.Tensor.CopyFrom(byName[d.Name], false)
		}
	})
	return nil
}
