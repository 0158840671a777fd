package diagnose

import (
	"errors"

	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/trainer/metrics"
)

// Options say which encoder is measured on which molecules. Exactly
// one of Checkpoint, Encoder and Random is set.
type Options struct {
	Checkpoint string        `json:"checkpoint"` // a pre-training checkpoint: the whole model
	Encoder    string        `json:"encoder"`    // an exported encoder: only the encoder's measures
	Random     *model.Config `json:"random"`     // a freshly initialised model of this configuration, from Seed
	// Seed draws the molecule sample, the random walks, the dropout masks
	// and a random model.
	Seed uint64 `json:"seed"`

	Data       string   `json:"data"`        // dataset to sample
	Molecules  int      `json:"molecules"`   // molecules sampled (all usable ones when fewer)
	BatchSize  int      `json:"batch_size"`  // molecules per forward pass (Sinkhorn and the contrast are per batch)
	Probes     []string `json:"probes"`      // labelled datasets for linear probes on e and W_e·e
	ProbeSeeds int      `json:"probe_seeds"` // classifier seeds per probe

	// Where and how the diagnosis runs is the runenv.Env it is given.
}

// ErrSource is Validate's error when not exactly one of Checkpoint, Encoder
// and Random is set.
var ErrSource = errors.New("want exactly one of a checkpoint, an exported encoder and a random model")

// Validate reports the first setting that cannot work, naming its field
// (a random model's by its own names, inside "random").
func (o Options) Validate() error {
	sources := 0
	for _, set := range []bool{o.Checkpoint != "", o.Encoder != "", o.Random != nil} {
		if set {
			sources++
		}
	}
	if sources != 1 {
		return ErrSource
	}
	if o.Random != nil {
		if err := o.Random.Validate(); err != nil {
			return field.Within("random", err)
		}
	}
	switch {
	case o.Data == "":
		return field.Errorf("data", o.Data, "must name a dataset folder or CSV file")
	case o.Molecules < 2:
		return field.Errorf("molecules", o.Molecules, "must be at least 2")
	case o.BatchSize < 2:
		return field.Errorf("batch_size", o.BatchSize, "must be at least 2")
	case o.ProbeSeeds < 1:
		return field.Errorf("probe_seeds", o.ProbeSeeds, "must be positive")
	}
	return nil
}

// Diagnosis is what Run measured, written as JSON.
type Diagnosis struct {
	Source    string              `json:"source"` // checkpoint or encoder path, or "random"
	Step      int64               `json:"step"`
	Model     *model.Config       `json:"model,omitempty"` // without it only the encoder is known
	Encoder   model.EncoderConfig `json:"encoder"`
	Data      string              `json:"data"`
	Seed      uint64              `json:"seed"`
	BatchSize int                 `json:"batch_size"`
	Molecules int                 `json:"molecules"`
	Atoms     int                 `json:"atoms"`
	Sizes     metrics.Quantiles   `json:"molecule_atoms"`
	Graph     EmbeddingStats      `json:"graph"`               // e, mean-pooled h
	Projected *EmbeddingStats     `json:"projected,omitempty"` // W_e·e
	Nodes     NodeStats           `json:"nodes"`
	Motifs    *MotifStats         `json:"motifs,omitempty"`
	Subgraphs []SubgraphStats     `json:"subgraphs"`
	Gradients []PartGradient      `json:"gradients,omitempty"`
	BatchNorm []NormShift         `json:"batch_norm"`
	Dropout   DropoutStats        `json:"dropout"`
	Probes    []ProbeResult       `json:"probes,omitempty"`
	Seconds   float64             `json:"seconds"`
	Notes     map[string]string   `json:"notes"`
}

// EmbeddingStats describe a set of embedding vectors (one per molecule).
type EmbeddingStats struct {
	EffectiveRank metrics.Value     `json:"effective_rank"` // of the centred matrix
	TopShare      metrics.Value     `json:"top_share"`      // largest singular value / their sum
	Uniformity    metrics.Value     `json:"uniformity"`     // Wang & Isola, t = 2
	MeanCosine    metrics.Value     `json:"mean_cosine"`    // over pairs of molecules
	Std           metrics.Quantiles `json:"std"`            // per dimension
}

// NodeStats say how node embeddings spread within and between molecules.
type NodeStats struct {
	BetweenGraphShare metrics.Value `json:"between_graph_share"` // variance explained by the molecule
	CosineSameGraph   metrics.Value `json:"cosine_same_graph"`
	CosineOtherGraphs metrics.Value `json:"cosine_other_graphs"`
}

// MotifStats are the node-to-motif assignment's figures (full models only).
type MotifStats struct {
	Sinkhorn          metrics.Usage     `json:"sinkhorn"`   // argmax of the balanced assignment, per atom
	RawArgmax         metrics.Usage     `json:"raw_argmax"` // argmax of Q, per atom
	Agreement         metrics.Value     `json:"agreement"`  // share of atoms where both agree
	MaxQ              metrics.Quantiles `json:"max_q"`
	MotifsPerMolecule metrics.Quantiles `json:"motifs_per_molecule"` // distinct Sinkhorn motifs among a molecule's atoms
	// MinCut's parts, mean over batches: the cut, and the orthogonality
	// term over all K columns (the default) and over the columns of the
	// motifs that form subgraphs (the paper's).
	Cut           metrics.Value `json:"cut"`
	OrthoAll      metrics.Value `json:"ortho_all"`
	OrthoSelected metrics.Value `json:"ortho_selected"`
}

// SubgraphStats describe one sampler's subgraphs, and the contrast on them.
type SubgraphStats struct {
	Sampler     string            `json:"sampler"`
	PerMolecule metrics.Quantiles `json:"per_molecule"`
	Atoms       metrics.Quantiles `json:"atoms"`
	Coverage    metrics.Quantiles `json:"coverage"` // atoms of the subgraph / atoms of its molecule
	Over50      metrics.Value     `json:"over_50"`  // share of subgraphs covering more than half their molecule
	Over80      metrics.Value     `json:"over_80"`
	Components  metrics.Quantiles `json:"components"` // connected components per subgraph
	Uncovered   metrics.Value     `json:"uncovered"`  // share of atoms in no subgraph
	MaxP        metrics.Quantiles `json:"max_p"`      // motif sampler: max_k P of each subgraph
	// Wang & Isola alignment of each subgraph with its molecule: s against
	// e, and against W_e·e (which the contrast compares).
	AlignGraph     metrics.Value `json:"align_graph"`
	AlignProjected metrics.Value `json:"align_projected"`
	// PositiveMass is, per molecule with a subgraph, the softmax mass of row
	// i of Y = cos(W_e e_i, s_j)/τ on its own subgraphs; Chance is that
	// mass if Y were constant (own subgraphs / all of the batch's), averaged.
	PositiveMass metrics.Quantiles `json:"positive_mass"`
	Chance       metrics.Value     `json:"chance"`
}

// PartGradient is the norm of the gradient a weighted loss part sends into
// the encoder's parameters on one training-mode batch.
type PartGradient struct {
	Part string        `json:"part"`
	Norm metrics.Value `json:"norm"`
}

// NormShift compares norm l's running statistics with the batches' own:
// MeanAbsZ is the mean |x − running mean| / running std over entries (about
// 0.80 for a standard normal), Shift the mean over channels of |batch mean −
// running mean| / running std, VarRatio the geometric mean over channels of
// batch variance / running variance; all averaged over batches.
type NormShift struct {
	Layer    int           `json:"layer"`
	MeanAbsZ metrics.Value `json:"mean_abs_z"`
	Shift    metrics.Value `json:"shift"`
	VarRatio metrics.Value `json:"var_ratio"`
}

// DropoutStats are per-molecule cosines between e in evaluation mode and e
// with dropout only, with batch statistics only, and in training mode.
type DropoutStats struct {
	Dropout    metrics.Quantiles `json:"dropout"`
	BatchStats metrics.Quantiles `json:"batch_stats"`
	Train      metrics.Quantiles `json:"train"`
}

// ProbeResult is a linear probe (LinearEval's classifier, docs/method.md §7) on
// one labelled dataset's scaffold split, on e or on W_e·e.
type ProbeResult struct {
	Data     string          `json:"data"`
	Features string          `json:"features"` // "e" or "W_e·e"
	Test     metrics.Stat    `json:"test"`
	Runs     []metrics.Value `json:"runs"`
}
