package main

import (
	"fmt"
	"strings"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/trainer/runfolder"
	"github.com/spf13/pflag"
)

// The flags below mean the same in every subcommand that has them. Each
// registers into a struct the caller filled with defaults.

// encoderFlags registers the DeeperGCN flags (docs/method.md §2) into c.
func encoderFlags(fs *pflag.FlagSet, c *model.EncoderConfig) {
	fs.IntVar(&c.Hidden, "hidden", c.Hidden, "width d of node, graph, motif and projection embeddings")
	fs.IntVar(&c.Layers, "layers", c.Layers, "GENConv layers")
	fs.Float64Var(&c.Dropout, "dropout", c.Dropout, "dropout between layers")
	fs.IntVar(&c.MLPLayers, "mlp-layers", c.MLPLayers, "Linear layers of each GENConv's update MLP")
	fs.BoolVar(&c.LearnT, "learn-t", c.LearnT, "learn the softmax aggregation temperature of each layer")
	fs.Float64Var(&c.T, "t", c.T, "softmax aggregation temperature (initial value with --learn-t)")
	fs.BoolVar(&c.BondPerLayer, "bond-per-layer", c.BondPerLayer, "one BondEncoder per layer instead of a shared one")
}

// objectiveFlags registers the MICRO-Graph objective's flags (§1, §3–§6) and
// the encoder's into c.
func objectiveFlags(fs *pflag.FlagSet, c *model.Config) {
	encoderFlags(fs, &c.Encoder)
	fs.IntVar(&c.Motifs, "motifs", c.Motifs, "K, motif slots")
	fs.Float64Var(&c.Tau, "tau", c.Tau, "temperature of every softmax over cosine similarities")
	fs.Float64Var(&c.Alpha, "alpha", c.Alpha, "L = alpha·L_motif + (1−alpha)·L_contra")
	fs.Float64Var(&c.LambdaNode, "lambda-node", c.LambdaNode, "weight of L_node-mot in L_motif")
	fs.Float64Var(&c.LambdaSub, "lambda-sub", c.LambdaSub, "weight of L_mot-sub in L_motif")
	fs.Float64Var(&c.LambdaReg, "lambda-reg", c.LambdaReg, "weight of the MinCut regulariser in L_motif (0: the without-L_reg ablation)")
	fs.Float64Var(&c.SinkhornLambda, "sinkhorn-lambda", c.SinkhornLambda, "Sinkhorn entropy parameter λ")
	fs.IntVar(&c.SinkhornIters, "sinkhorn-iters", c.SinkhornIters, "Sinkhorn iterations")
	fs.IntVar(&c.Eta, "eta", c.Eta, "smallest motif-like subgraph kept, in atoms; also the pre-training filter")
	fs.Float64Var(&c.PDrop, "p-drop", c.PDrop, "probability that a subgraph member is dropped (§4)")
	fs.Float64Var(&c.PAdd, "p-add", c.PAdd, "probability that an adjacent atom joins a subgraph (§4)")
	fs.StringVar(&c.Sampler, "sampler", c.Sampler, samplerHelp())
	fs.IntVar(&c.SubgraphsPerGraph, "subgraphs-per-graph", c.SubgraphsPerGraph, "subgraphs per molecule for the ablation samplers")
	fs.BoolVar(&c.OrthoSelected, "ortho-selected", c.OrthoSelected, "MinCut's orthogonality term over the motifs forming subgraphs only")
	fs.BoolVar(&c.ContrastDetached, "contrast-detached", c.ContrastDetached, "L_contra against subgraph embeddings cut from the gradient (the paper's Algorithm 1)")
}

// samplerHelp describes --sampler: each objective's samplers, its default
// first (model.Objectives).
func samplerHelp() string {
	var each []string
	for _, k := range model.Objectives {
		each = append(each, k.Name+": "+strings.Join(k.SamplerNames(), ", "))
	}
	return "subgraph sampler of the objective, its default first (the others are ablations):\n" + strings.Join(each, "; ")
}

// objectiveHelp describes --objective: each objective, and where its
// defaults differ from the default objective's (model.Objectives).
func objectiveHelp() string {
	base := runfolder.DefaultConfig()
	var each []string
	for _, k := range model.Objectives {
		line := k.Name + ", " + k.About
		c, _ := runfolder.DefaultConfigOf(k.Name)
		var differ []string
		if s := k.SamplerNames()[0]; s != base.Model.Sampler {
			differ = append(differ, "--sampler "+s)
		}
		if c.BatchSize != base.BatchSize {
			differ = append(differ, fmt.Sprintf("--batch-size %d", c.BatchSize))
		}
		if c.WeightDecay != base.WeightDecay {
			differ = append(differ, fmt.Sprintf("AdamW with --weight-decay %g", c.WeightDecay))
		}
		if c.ClipGradNorm != base.ClipGradNorm {
			differ = append(differ, fmt.Sprintf("--clip-grad-norm %g", c.ClipGradNorm))
		}
		if len(differ) > 0 {
			line += ",\nwhose defaults differ: " + strings.Join(differ, ", ")
		}
		each = append(each, line)
	}
	return "pre-training objective: " + strings.Join(each, ";\n")
}

// cacheFlagHelp describes --cache, the same in every command that reads a dataset.
const cacheFlagHelp = "folder for featurised CSVs and dataset caches; dataset folders are only read " +
	"(default: $XDG_CACHE_HOME/micrograph, else ~/.cache/micrograph)"

// precisionFlag registers --precision into p.
func precisionFlag(fs *pflag.FlagSet, p *model.Precision) {
	fs.StringVar((*string)(p), "precision", string(*p), model.PrecisionHelp)
}

// limitFlags registers the bounds on what one CSV row may ask of RDKit; rows
// beyond them are rejected and listed like rows RDKit refuses.
func limitFlags(fs *pflag.FlagSet, l *data.Limits) {
	*l = data.DefaultLimits()
	fs.IntVar(&l.MaxAtoms, "max-atoms", l.MaxAtoms, "reject a CSV row whose SMILES has more atoms (RDKit's time grows steeply with size)")
	fs.IntVar(&l.MaxSMILESBytes, "max-smiles-bytes", l.MaxSMILESBytes, "reject a CSV row whose SMILES is longer, in bytes")
}

// columnFlags registers the choice of a CSV's columns (data.Columns) into
// c, the same in every command that reads a CSV.
func columnFlags(fs *pflag.FlagSet, c *data.Columns) {
	fs.StringVar(&c.SMILES, "smiles-columns", c.SMILES, "a CSV's SMILES column, one name, case ignored (default: \"smiles\", else the\n"+
		"first whose name contains \"smiles\", said in a line, else \"mol\")")
	fs.StringSliceVar(&c.Targets, "target-columns", c.Targets, "a CSV's label columns (tasks), comma-separated, a name with a comma or space\n"+
		"quoted as CSV quotes it ('\"a, b\",c'); no other column is read (default: every column\n"+
		"but the SMILES one, mol_id and --ignore-columns)")
	fs.StringSliceVar(&c.Ignore, "ignore-columns", c.Ignore, "a CSV's columns that are neither SMILES nor labels (names, notes, descriptors),\n"+
		"written as --target-columns; every other column is a label")
	// featurize's names before --smiles-columns and --target-columns: they
	// still work, with a note naming the new flag (parseArgs).
	fs.StringVar(&c.SMILES, "smiles-col", c.SMILES, "")
	fs.StringSliceVar(&c.Targets, "label-cols", c.Targets, "")
	fs.MarkDeprecated("smiles-col", "--smiles-columns")
	fs.MarkDeprecated("label-cols", "--target-columns")
}
