// Package model holds the DeeperGCN encoder, the MICRO-Graph pre-training
// objective and the downstream graph-property head, as modules whose tensors
// are named like PyTorch state_dict keys. The method is
// docs/method.md; section numbers below refer to it.
package model

import "github.com/micrograph/micrograph/internal/field"

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

// ReleasedConfig holds the settings of the formulation MICRO-Graph's authors
// released as code (docs/method.md §12) that the paper's has no counterpart
// for; K, τ (motif and contrast softmaxes), the Sinkhorn settings, η and the
// sampler are Config's.
type ReleasedConfig struct {
	ClusterTau     float64 `json:"cluster_tau"`     // temperature of the atoms' affinity softmax (§12.1)
	MotifWeight    float64 `json:"motif_weight"`    // weight of L_motif (§12.3)
	ContraWeight   float64 `json:"contra_weight"`   // weight of L_contra
	SamplerWeight  float64 `json:"sampler_weight"`  // weight of L_sampler
	TopFraction    float64 `json:"top_fraction"`    // share of subgraphs most similar to each motif that L_sampler takes
	KMeansRestarts int     `json:"kmeans_restarts"` // k-means++ starts of every k-means (spectral labels, motif initialisation)
	InitBatches    int     `json:"init_batches"`    // batches whose subgraphs initialise the motif table
}

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
	Sampler           string  `json:"sampler"`             // the objective's sampler: Sampler* names
	SubgraphsPerGraph int     `json:"subgraphs_per_graph"` // for the ablation samplers
	OrthoSelected     bool    `json:"ortho_selected"`      // ortho term over selected motifs only (§5)
	// ContrastDetached contrasts graphs against subgraph embeddings cut from
	// the gradient, as the paper's Algorithm 1 pools them under no_grad (§6):
	// L_contra then trains the encoder through e only.
	ContrastDetached bool `json:"contrast_detached,omitempty"`

	// Released, when set, trains the authors' released formulation (§12)
	// instead of the paper's (its entry in Objectives); the paper-only settings
	// (α, λ_n, λ_s, λ_r, p_drop, p_add, subgraphs per graph,
	// ortho-selected, contrast-detached) are then 0.
	Released *ReleasedConfig `json:"released,omitempty"`
}

// Objectives of pre-training: the paper's (§3) and its authors' released
// code's (§12).
const (
	ObjectivePaper    = "paper"
	ObjectiveReleased = "released"
)

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

// ReleasedModelConfig is §12's pre-training model: §1's encoder, K, τ,
// Sinkhorn settings and η, the spectral sampler, the released losses'
// weights, and the paper-only settings at 0.
func ReleasedModelConfig() Config {
	c := DefaultConfig()
	c.Alpha, c.LambdaNode, c.LambdaSub, c.LambdaReg, c.PDrop, c.PAdd, c.SubgraphsPerGraph = 0, 0, 0, 0, 0, 0, 0
	c.Sampler = SamplerSpectral
	c.Released = &ReleasedConfig{
		ClusterTau: 0.2, MotifWeight: 1, ContraWeight: 0.05, SamplerWeight: 0.05,
		TopFraction: 0.1, KMeansRestarts: 10, InitBatches: 2,
	}
	return c
}

// Validate reports the first setting that cannot work, naming its field.
func (c EncoderConfig) Validate() error {
	if err := field.First(field.Finite("dropout", c.Dropout), field.Finite("t", c.T)); err != nil {
		return err
	}
	switch {
	case c.Hidden < 1:
		return field.Errorf("hidden", c.Hidden, "must be positive")
	case c.Layers < 1:
		return field.Errorf("layers", c.Layers, "must be positive")
	case c.Dropout < 0 || c.Dropout >= 1:
		return field.Errorf("dropout", c.Dropout, "must be in [0, 1)")
	case c.MLPLayers < 1:
		return field.Errorf("mlp_layers", c.MLPLayers, "must be positive")
	case !(c.T > 0):
		return field.Errorf("t", c.T, "must be positive")
	}
	return nil
}

// Validate reports the first setting that cannot work, naming its field
// (the encoder's inside "encoder"): the settings every objective shares,
// then its objective's own (Objective.Check).
func (c Config) Validate() error {
	if err := c.Encoder.Validate(); err != nil {
		return field.Within("encoder", err)
	}
	floats := []struct {
		name string
		v    float64
	}{{"tau", c.Tau}, {"sinkhorn_lambda", c.SinkhornLambda}, {"alpha", c.Alpha}, {"lambda_node", c.LambdaNode},
		{"lambda_sub", c.LambdaSub}, {"lambda_reg", c.LambdaReg}, {"p_drop", c.PDrop}, {"p_add", c.PAdd}}
	for _, f := range floats {
		if err := field.Finite(f.name, f.v); err != nil {
			return err
		}
	}
	switch {
	case c.Motifs < 1:
		return field.Errorf("motifs", c.Motifs, "must be positive")
	case !(c.Tau > 0):
		return field.Errorf("tau", c.Tau, "must be positive")
	case !(c.SinkhornLambda > 0) || c.SinkhornLambda > 80:
		return field.Errorf("sinkhorn_lambda", c.SinkhornLambda, "must be in (0, 80] (exp(λ) must fit in float32)")
	case c.SinkhornIters < 0:
		return field.Errorf("sinkhorn_iters", c.SinkhornIters, "must not be negative")
	case c.Eta < 1:
		return field.Errorf("eta", c.Eta, "must be at least 1")
	case c.LambdaNode < 0:
		return field.Errorf("lambda_node", c.LambdaNode, "must not be negative")
	case c.LambdaSub < 0:
		return field.Errorf("lambda_sub", c.LambdaSub, "must not be negative")
	case c.LambdaReg < 0:
		return field.Errorf("lambda_reg", c.LambdaReg, "must not be negative")
	}
	return c.NewObjective().Check()
}

// probability is the error of a field p that must be a probability.
func probability(name string, p float64) error {
	if p < 0 || p > 1 {
		return field.Errorf(name, p, "must be in [0, 1]")
	}
	return nil
}
