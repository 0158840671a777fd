package model

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/nn"
)

// A description read from a file (an encoder's .json, a saved model's
// model.json, a checkpoint's configuration) says how large a model is, and
// building that model allocates what it says: "layers": 1000000 or
// "hidden": 46341 would take gigabytes before the weights beside it could be
// compared with the model. The checks below compare every size setting with
// the shapes of the weights first, reading them from the tensors already
// loaded; once they agree, the model built is as large as its weights.

// CheckSizes compares the encoder's size settings (hidden, layers,
// mlp_layers) and the switches that decide which tensors exist (learn_t,
// bond_per_layer) with the tensors of state whose names start with prefix
// (the encoder's, as "encoder." in a checkpoint), without building
// anything. A setting the weights contradict is a field error naming it.
func (c EncoderConfig) CheckSizes(state []torch.Named, prefix string) error {
	shapes := map[string][]int64{}
	for _, n := range state {
		shapes[n.Name] = n.Tensor.Shape()
	}
	has := func(name string) bool { _, ok := shapes[prefix+name]; return ok }

	atom := "atom_encoder.embeddings.0.weight"
	w, ok := shapes[prefix+atom]
	switch {
	case !ok:
		return fmt.Errorf("the weights hold no %s%s", prefix, atom)
	case len(w) != 2:
		return fmt.Errorf("the weights' %s%s is %v, not a matrix", prefix, atom, w)
	case w[1] != int64(c.Hidden):
		return field.Errorf("hidden", c.Hidden, "differs from the weights, which are %d wide (%s%s is %v)", w[1], prefix, atom, w)
	}
	layers := 0
	for has("norms." + strconv.Itoa(layers) + ".weight") {
		layers++
	}
	if layers != c.Layers {
		return field.Errorf("layers", c.Layers, "differs from the weights, which have %d (%snorms.0 … %snorms.%d)", layers, prefix, prefix, layers-1)
	}
	mlp := 1
	if !has("convs.0.lin.weight") {
		// Linear layers sit at every third index of the Sequential (NewGENConv).
		mlp = 0
		for has("convs.0.mlp." + strconv.Itoa(3*mlp) + ".weight") {
			mlp++
		}
	}
	if mlp != c.MLPLayers {
		return field.Errorf("mlp_layers", c.MLPLayers, "differs from the weights, which have %d in %sconvs.0", mlp, prefix)
	}
	// The switches decide which tensors exist: a learned temperature per
	// layer, and a bond encoder per layer instead of a shared one.
	for _, sw := range []struct {
		name    string
		value   bool // the setting
		present bool // whether it makes tensor exist
		tensor  string
	}{
		{"learn_t", c.LearnT, c.LearnT, "convs.0.t"},
		{"bond_per_layer", c.BondPerLayer, c.BondPerLayer, "convs.0.bond_encoder.embeddings.0.weight"},
		{"bond_per_layer", c.BondPerLayer, !c.BondPerLayer, "bond_encoder.embeddings.0.weight"},
	} {
		if sw.present != has(sw.tensor) {
			holds := "hold no"
			if !sw.present {
				holds = "hold"
			}
			return field.Errorf(sw.name, sw.value, "differs from the weights, which %s %s%s", holds, prefix, sw.tensor)
		}
	}
	return nil
}

// CheckSizes compares the model's size settings (the encoder's, under
// "encoder", and motifs) with the tensors of state, named as the model's
// Store names them, without building anything.
func (c Config) CheckSizes(state []torch.Named) error {
	if err := c.Encoder.CheckSizes(state, "encoder."); err != nil {
		return field.Within("encoder", err)
	}
	return checkRows(state, "motif_embeddings", "motifs", c.Motifs)
}

// CheckClassifierSizes compares the size settings of a classifier for
// tasks tasks (its encoder's, under "encoder") with the tensors of state,
// named as Classifier's Store names them, without building anything.
func CheckClassifierSizes(c EncoderConfig, tasks int, state []torch.Named) error {
	if err := c.CheckSizes(state, "encoder."); err != nil {
		return field.Within("encoder", err)
	}
	return checkRows(state, "head.lin2.weight", "tasks", tasks)
}

// checkRows compares the rows of the matrix name in state with the count
// the setting setting gives.
func checkRows(state []torch.Named, name, setting string, count int) error {
	i := slices.IndexFunc(state, func(n torch.Named) bool { return n.Name == name })
	if i < 0 {
		return fmt.Errorf("the weights hold no %s", name)
	}
	shape := state[i].Tensor.Shape()
	if len(shape) != 2 {
		return fmt.Errorf("the weights' %s is %v, not a matrix", name, shape)
	}
	if shape[0] != int64(count) {
		return field.Errorf(setting, count, "differs from the weights, which have %d (%s is %v)", shape[0], name, shape)
	}
	return nil
}

// outOfMemory names the size setting behind err, a failure to allocate
// the weights of a model being built into s (whose tensors registered so far
// say how far it got), with the setting's name as the model's
// configuration spells it: hidden while the encoder's tables or first
// layer were being made (each of their tensors grows with it), layers once
// a later layer failed, then the table after the encoder: the motifs'
// (MicroGraph) or the head's last layer, tasks (Classifier). Any other
// error passes unchanged.
func outOfMemory(s *nn.Store, c EncoderConfig, table string, setting string, count int, err error) error {
	var te *torch.Error
	if !errors.As(err, &te) {
		return err
	}
	registered := func(prefix string) bool {
		return slices.ContainsFunc(s.Vars(), func(v nn.Var) bool { return strings.HasPrefix(v.Name, prefix) })
	}
	name, value := "encoder.hidden", c.Hidden
	switch {
	case registered("encoder.norms.0."):
		// The encoder was made: the table after it, or another d×d matrix.
		if !registered(table) {
			name, value = setting, count
		}
	case registered("encoder.convs.1."):
		name, value = "encoder.layers", c.Layers
	}
	return field.Errorf(name, value, "makes weights that do not fit in memory (%v)", err)
}
