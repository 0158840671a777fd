package infer

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/graph"
	"github.com/micrograph/micrograph/internal/matrixfile"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/ops"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/nn"
	"github.com/micrograph/micrograph/trainer/runenv"
)

// Options say which molecules are scored and how.
type Options struct {
	// Data is a CSV file of SMILES (gzip-compressed or not), read as a
	// stream, or an OGB dataset folder, whose molecules are scored in order.
	Data string
	// Columns say which column of a CSV holds the SMILES (data.Columns);
	// the others are not read, but those it names must exist. A dataset
	// folder takes none.
	Columns data.Columns
	// SkipInvalid leaves rows RDKit rejects out of a per-molecule output,
	// whose "row" column then says which input row each line is; otherwise
	// they are written as NaN rows, so that output row i is input row i. A
	// .npy file has no such column and needs SkipInvalid false; per-atom
	// output never holds rejected rows (they have no atoms) and needs it
	// false too.
	SkipInvalid bool
	// Rejected, when not nil, is called with each row the featurisation
	// rejects, in input order, as the stream reaches it.
	Rejected     func(data.Rejection)
	Chunk        int // CSV rows featurised at once (bounds memory); 0: 4096
	BatchSize    int // molecules per forward pass; 0: 256
	RDKitWorkers int // goroutines featurising CSV rows with RDKit; 0: GOMAXPROCS
	// Precision of the model's matrix products (docs/method.md §13); ""
	// is FP32.
	Precision model.Precision
}

// Report is what a scoring pass did.
type Report struct {
	Rows    int // input rows
	Invalid int // rows the featurisation rejected (handed to Options.Rejected)
	Written int // output rows: one per input row (or per molecule), or one per atom
	// Seconds in all, and the parts spent reading and featurising the input
	// and in the model (the rest is writing).
	Seconds, FeaturizeSeconds, ModelSeconds float64
}

const (
	defaultChunk     = 4096
	defaultBatchSize = 256
)

// Index columns of a per-atom output (EmbedAtoms), and the field of a
// structured .npy file that holds the embedding.
const (
	AtomRowColumn       = "row"        // the molecule's input row, from 0
	AtomIndexColumn     = "atom"       // the atom's index in RDKit's order, from 0
	AtomicNumberColumn  = "atomic_num" // the atom's atomic number (0 for a dummy atom)
	AtomEmbeddingField  = "e"          // the embedding, d values; e_0 … e_{d-1} in a CSV file
	embeddingNamePrefix = "e_"
)

// Embed writes to out (.npy or .csv, by its extension) the graph embedding
// of every input row, the mean over its atoms of the encoder's node
// embeddings in evaluation mode (what linear evaluation fits on and the
// PyTorch snippet of docs/pytorch.md computes). The encoder is arch with the weights of
// state (as model.LoadEncoder returns them). A .npy file is float32 N×d; a
// .csv file has the columns row, smiles, e_0 … e_{d-1}. The model runs
// where env says (its Dataset gives a folder's cache and the CSV row
// limits).
func Embed(arch model.EncoderConfig, state []torch.Named, opt Options, env runenv.Env, out string) (*Report, error) {
	return runenv.Run(env, opt.checkPrecision(env), func() (*Report, error) {
		return withEncoder(arch, state, opt, env, func(enc *model.DeeperGCN) (*Report, error) {
			m := Model{Level: PerMolecule, Width: arch.Hidden, Forward: func(g *graph.Graph) *torch.Tensor {
				return ops.GraphPool(enc.Forward(g, false), g, ops.MeanPool)
			}}
			return writeMolecules(opt, env, out, matrixfile.Columns{Values: embeddingNames(arch.Hidden)}, m, nil)
		})
	})
}

// EmbedAtoms writes to out (.npy or .csv) the embedding of every atom of
// every molecule: the encoder's node embeddings in evaluation mode, whose
// mean over a molecule's atoms is what Embed writes. Rows come in input
// order, each molecule's atoms in RDKit's order, and carry their input row,
// atom index and atomic number: a .npy file is a structured array of
// records (row, atom, atomic_num: int64; e: float32, d values), a .csv file
// has the columns row, atom, atomic_num, e_0 … e_{d-1}. A row the
// featurisation rejects has no atoms and so no output rows; it goes to
// opt.Rejected and Report.Invalid counts it.
func EmbedAtoms(arch model.EncoderConfig, state []torch.Named, opt Options, env runenv.Env, out string) (*Report, error) {
	return runenv.Run(env, opt.checkPrecision(env), func() (*Report, error) {
		return withEncoder(arch, state, opt, env, func(enc *model.DeeperGCN) (*Report, error) {
			return writeAtoms(opt, env, out, embeddingNames(arch.Hidden), func(g *graph.Graph) *torch.Tensor {
				return enc.Forward(g, false)
			})
		})
	})
}

// embeddingNames are the columns of a d-dimensional embedding: e_0 … e_{d-1}.
func embeddingNames(d int) []string {
	names := make([]string, d)
	for j := range names {
		names[j] = embeddingNamePrefix + strconv.Itoa(j)
	}
	return names
}

// checkPrecision is the check, for runenv.Run, that the precision can run
// where env says.
func (o Options) checkPrecision(env runenv.Env) func() error {
	return func() error { return cmp.Or(o.Precision, model.FP32).Check(env.Device) }
}

// withEncoder builds the encoder arch with the weights of state where env
// says, in opt's precision, and runs body with it; body runs after
// runenv's prologue.
func withEncoder(arch model.EncoderConfig, state []torch.Named, opt Options, env runenv.Env, body func(*model.DeeperGCN) (*Report, error)) (*Report, error) {
	store := nn.NewStore(env.Device, torch.Float32)
	defer store.Free()
	if err := opt.Precision.Apply(store); err != nil {
		return nil, err
	}
	// At the store's root the tensors are named as in an exported encoder.
	enc := model.NewDeeperGCN(store.Root(), arch)
	defer enc.Free()
	if err := torch.LoadState(store.State(), state); err != nil {
		return nil, fmt.Errorf("encoder: %w", err)
	}
	return body(enc)
}

// Predict writes to out (.csv or .npy) the predictions of the saved model
// or ensemble in dir (LoadEnsemble) for every input row: per task, named
// after it, the mean over the members of the probability of class 1 for a
// classification task or of the value in the label's units for a
// regression task; then per task, named after it with StdSuffix, the
// members' population standard deviation of the same; then MembersColumn,
// the number of members. A single saved model is an ensemble of one, whose
// deviations are 0. Values are double precision (so that probabilities keep
// the order of the logits they come from). The models run where env says.
func Predict(dir string, opt Options, env runenv.Env, out string) (*Ensemble, *Report, error) {
	var e *Ensemble
	rep, err := runenv.Run(env, opt.checkPrecision(env), func() (rep *Report, err error) {
		e, rep, err = predict(dir, opt, env, out)
		return rep, err
	})
	return e, rep, err
}

// predict is Predict after runenv's prologue.
func predict(dir string, opt Options, env runenv.Env, out string) (_ *Ensemble, _ *Report, err error) {
	e, err := LoadEnsemble(dir, env.Device)
	if err != nil {
		return nil, nil, err
	}
	defer e.Free()
	for _, clf := range e.models {
		if err := opt.Precision.Apply(clf.Store); err != nil {
			return nil, nil, err
		}
	}
	names, err := e.columns()
	if err != nil {
		return nil, nil, err
	}
	m := Model{Level: PerMolecule, Width: len(e.models) * len(e.Tasks()), Forward: func(g *graph.Graph) *torch.Tensor {
		outs := make([]*torch.Tensor, len(e.models))
		for i, clf := range e.models {
			outs[i] = clf.Forward(g, false)
		}
		return torch.Cat(outs, 1)
	}}
	rep, err := writeMolecules(opt, env, out, matrixfile.Columns{Values: names, Float64: true}, m, e.summarise)
	return e, rep, err
}

// writeMolecules streams the input through m (B molecules → B×m.Width
// outputs) into out, one row per input row in order with the keys row and
// smiles, a rejected row NaN or, with opt.SkipInvalid, left out; summarise,
// when not nil, turns a molecule's outputs into the row's values (else
// they are the values).
func writeMolecules(opt Options, env runenv.Env, out string, cols matrixfile.Columns, m Model, summarise func([]float32, []float64)) (*Report, error) {
	format, err := matrixfile.Format(out)
	if err != nil {
		return nil, err
	}
	if opt.SkipInvalid && format == ".npy" {
		return nil, fmt.Errorf("%s: a .npy file has no row column to say which rows were skipped; write .csv, or keep invalid rows as NaN rows", out)
	}
	cols.Keys = []string{"row", "smiles"}
	var rep *Report
	written := 0
	err = matrixfile.Write(out, cols, func(add matrixfile.AddFunc) error {
		row := matrixfile.Row{Keys: make([]string, 2), Values: make([]float64, len(cols.Values))}
		var err error
		rep, err = Stream(opt, env, m, func(mol *Molecule) error {
			if mol.Rejected != nil && opt.SkipInvalid {
				return nil
			}
			row.Keys[0], row.Keys[1] = strconv.Itoa(mol.Row), mol.SMILES
			switch {
			case mol.Rejected != nil:
				for j := range row.Values {
					row.Values[j] = math.NaN()
				}
			case summarise != nil:
				summarise(mol.Out, row.Values)
			default:
				for j, v := range mol.Out {
					row.Values[j] = float64(v)
				}
			}
			written++
			return add(row)
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	rep.Written = written
	return rep, nil
}

// writeAtoms streams the input through forward (N atoms → N×k outputs)
// into out, one row per atom in input order with the index columns row,
// atom and atomic_num; rejected rows have no atoms and no rows.
func writeAtoms(opt Options, env runenv.Env, out string, names []string, forward func(*graph.Graph) *torch.Tensor) (*Report, error) {
	if _, err := matrixfile.Format(out); err != nil {
		return nil, err
	}
	if opt.SkipInvalid {
		return nil, errors.New("per-atom output never holds rejected rows (they have no atoms): leave SkipInvalid false")
	}
	cols := matrixfile.Columns{Index: []string{AtomRowColumn, AtomIndexColumn, AtomicNumberColumn}, Field: AtomEmbeddingField, Values: names}
	k := len(names)
	var rep *Report
	written := 0
	err := matrixfile.Write(out, cols, func(add matrixfile.AddFunc) error {
		row := matrixfile.Row{Index: make([]int64, 3), Values: make([]float64, k)}
		var err error
		rep, err = Stream(opt, env, Model{Forward: forward, Level: PerAtom, Width: k}, func(m *Molecule) error {
			if m.Rejected != nil {
				return nil
			}
			for a := range m.Data.NumAtoms(int(m.Mol)) {
				row.Index[0], row.Index[1], row.Index[2] = int64(m.Row), int64(a), int64(m.Data.AtomicNumber(int(m.Mol), a))
				for j, v := range m.Out[a*k : (a+1)*k] {
					row.Values[j] = float64(v)
				}
				written++
				if err := add(row); err != nil {
					return err
				}
			}
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	rep.Written = written
	return rep, nil
}
