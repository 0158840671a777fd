// Package model holds the DeeperGCN encoder, the MICRO-Graph pre-training
// objective and the downstream graph-property head, as modules whose tensors
// are named like PyTorch state_dict keys. The method is
// ../shared/docs/method.md; section numbers below refer to it.
package model

import (
	"errors"
	"fmt"
)

// EncoderConfig is the DeeperGCN architecture (§2). It is all that is needed
// to rebuild an exported encoder.
type EncoderConfig struct {
	Hidden       int     `json:"hidden"`         // node embedding width d
	Layers       int     `json:"layers"`         // GENConv layers L
	Dropout      float64 `json:"dropout"`        // between layers and after the last norm
	MLPLayers    int     `json:"mlp_layers"`     // Linear layers of each GENConv's update MLP
	LearnT       bool    `json:"learn_t"`        // learn the softmax temperature of each layer
	T            float64 `json:"t"`              // softmax temperature (initial value when learned)
	BondPerLayer bool    `json:"bond_per_layer"` // one BondEncoder per layer instead of a shared one
}

// Samplers of motif-like subgraphs and the ablations of the paper's Table 3.
const (
	SamplerMotif      = "motif"
	SamplerRandomWalk = "random-walk"
	SamplerKHop       = "k-hop"
)

// Config is a MICRO-Graph model: its encoder and objective (§1–§6).
type Config struct {
	Encoder EncoderConfig `json:"encoder"`

	Motifs            int     `json:"motifs"`              // K, motif slots
	Tau               float64 `json:"tau"`                 // temperature of every cosine softmax
	SinkhornLambda    float64 `json:"sinkhorn_lambda"`     // λ
	SinkhornIters     int     `json:"sinkhorn_iters"`      //
	Eta               int     `json:"eta"`                 // smallest subgraph kept (nodes)
	Alpha             float64 `json:"alpha"`               // L = α·L_motif + (1−α)·L_contra
	LambdaNode        float64 `json:"lambda_node"`         // λ_n
	LambdaSub         float64 `json:"lambda_sub"`          // λ_s
	LambdaReg         float64 `json:"lambda_reg"`          // λ_r; 0 is the "without L_reg" ablation
	PDrop             float64 `json:"p_drop"`              // member drop probability (§4)
	PAdd              float64 `json:"p_add"`               // neighbour join probability (§4)
	Sampler           string  `json:"sampler"`             // motif, random-walk or k-hop
	SubgraphsPerGraph int     `json:"subgraphs_per_graph"` // for the ablation samplers
	OrthoSelected     bool    `json:"ortho_selected"`      // ortho term over selected motifs only (§5)
	// ContrastDetached contrasts graphs against subgraph embeddings cut from
	// the gradient, as the paper's Algorithm 1 pools them under no_grad (§6):
	// L_contra then trains the encoder through e only.
	ContrastDetached bool `json:"contrast_detached,omitempty"`
}

// DefaultEncoderConfig is §1's pre-training encoder: 5 layers of width 300,
// dropout 0.2, one-layer MLPs, t = 1 fixed, a shared BondEncoder.
func DefaultEncoderConfig() EncoderConfig {
	return EncoderConfig{Hidden: 300, Layers: 5, Dropout: 0.2, MLPLayers: 1, T: 1}
}

// DefaultConfig is §1's pre-training configuration.
func DefaultConfig() Config {
	return Config{
		Encoder:           DefaultEncoderConfig(),
		Motifs:            20,
		Tau:               0.05,
		SinkhornLambda:    20,
		SinkhornIters:     5,
		Eta:               4,
		Alpha:             0.5,
		LambdaNode:        1,
		LambdaSub:         1,
		LambdaReg:         5,
		PDrop:             0.1,
		PAdd:              0.1,
		Sampler:           SamplerMotif,
		SubgraphsPerGraph: 3,
	}
}

// Validate reports the first setting that cannot work.
func (c EncoderConfig) Validate() error {
	switch {
	case c.Hidden < 1:
		return fmt.Errorf("hidden width %d must be positive", c.Hidden)
	case c.Layers < 1:
		return fmt.Errorf("layers %d must be positive", c.Layers)
	case c.Dropout < 0 || c.Dropout >= 1:
		return fmt.Errorf("dropout %g must be in [0, 1)", c.Dropout)
	case c.MLPLayers < 1:
		return fmt.Errorf("mlp layers %d must be positive", c.MLPLayers)
	case !(c.T > 0):
		return fmt.Errorf("temperature t %g must be positive", c.T)
	}
	return nil
}

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	if err := c.Encoder.Validate(); err != nil {
		return err
	}
	prob := func(name string, p float64) error {
		if p < 0 || p > 1 {
			return fmt.Errorf("%s %g must be in [0, 1]", name, p)
		}
		return nil
	}
	switch {
	case c.Motifs < 1:
		return fmt.Errorf("motifs %d must be positive", c.Motifs)
	case !(c.Tau > 0):
		return fmt.Errorf("tau %g must be positive", c.Tau)
	case !(c.SinkhornLambda > 0) || c.SinkhornLambda > 80:
		return fmt.Errorf("sinkhorn lambda %g must be in (0, 80] (exp(λ) must fit in float32)", c.SinkhornLambda)
	case c.SinkhornIters < 0:
		return fmt.Errorf("sinkhorn iterations %d must not be negative", c.SinkhornIters)
	case c.Eta < 1:
		return fmt.Errorf("eta %d must be at least 1", c.Eta)
	case c.LambdaNode < 0 || c.LambdaSub < 0 || c.LambdaReg < 0:
		return errors.New("loss weights must not be negative")
	case c.Sampler != SamplerMotif && c.Sampler != SamplerRandomWalk && c.Sampler != SamplerKHop:
		return fmt.Errorf("unknown sampler %q (want motif, random-walk or k-hop)", c.Sampler)
	case c.Sampler != SamplerMotif && c.SubgraphsPerGraph < 1:
		return fmt.Errorf("subgraphs per graph %d must be positive", c.SubgraphsPerGraph)
	case c.OrthoSelected && c.Sampler != SamplerMotif:
		return errors.New("ortho over selected motifs needs the motif sampler")
	}
	if err := prob("alpha", c.Alpha); err != nil {
		return err
	}
	if err := prob("p_drop", c.PDrop); err != nil {
		return err
	}
	return prob("p_add", c.PAdd)
}
