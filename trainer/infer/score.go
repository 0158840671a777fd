package infer

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/feed"
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
	Data      string
	SmilesCol string // a CSV's SMILES column; empty tries "smiles", then "mol"
	// SkipInvalid leaves rows RDKit rejects out of the output, whose "row"
	// column then says which input row each line is; otherwise they are
	// written as NaN rows, so that output row i is input row i. A .npy file
	// has no such column and needs SkipInvalid false.
	SkipInvalid  bool
	Chunk        int // CSV rows featurised at once (bounds memory); 0: 4096
	BatchSize    int // molecules per forward pass; 0: 256
	RDKitWorkers int // goroutines featurising CSV rows with RDKit; 0: GOMAXPROCS
	// Precision of the model's matrix products (docs/method.md §13); ""
	// is FP32.
	Precision model.Precision
}

// Report is what a scoring pass did.
type Report struct {
	Rows    int              // input rows
	Written int              // output rows
	Invalid []data.Rejection // rows RDKit (or the limits) rejected, in order
	// Seconds in all, and the parts spent reading and featurising the input
	// and in the model (the rest is writing).
	Seconds, FeaturizeSeconds, ModelSeconds float64
}

const (
	defaultChunk     = 4096
	defaultBatchSize = 256
)

// Embed writes to out (.npy or .csv, by its extension) the graph embedding
// of every input row, the mean over its atoms of the encoder's node
// embeddings in evaluation mode (what linear evaluation fits on and the
// PyTorch snippet of docs/pytorch.md computes). The encoder is arch with the weights of
// state (as model.LoadEncoder returns them). A .csv file has the columns
// row, smiles, e_0 … e_{d-1}. The model runs where env says (its Dataset
// gives a folder's cache and the CSV row limits).
func Embed(arch model.EncoderConfig, state []torch.Named, opt Options, env runenv.Env, out string) (*Report, error) {
	return runenv.Run(env, opt.checkPrecision(env), func() (*Report, error) { return embed(arch, state, opt, env, out) })
}

// checkPrecision is the check, for runenv.Run, that the precision can run
// where env says.
func (o Options) checkPrecision(env runenv.Env) func() error {
	return func() error { return cmp.Or(o.Precision, model.FP32).Check(env.Device) }
}

// embed is Embed after runenv's prologue.
func embed(arch model.EncoderConfig, state []torch.Named, opt Options, env runenv.Env, out string) (*Report, error) {
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
	names := make([]string, arch.Hidden)
	for j := range names {
		names[j] = "e_" + strconv.Itoa(j)
	}
	return score(opt, env, out, matrixfile.Columns{Values: names}, func(g *graph.Graph) *torch.Tensor {
		return ops.GraphPool(enc.Forward(g, false), g, ops.MeanPool)
	}, nil)
}

// Predict writes to out (.csv or .npy) the predictions of the saved model
// in dir for every input row: one column per task, named after it, the
// probability of class 1 for a classification task and the value in the
// label's units for a regression task, in double precision (so that
// probabilities keep the order of the logits they come from). The model
// runs where env says.
func Predict(dir string, opt Options, env runenv.Env, out string) (*SavedModel, *Report, error) {
	var m *SavedModel
	rep, err := runenv.Run(env, opt.checkPrecision(env), func() (rep *Report, err error) {
		m, rep, err = predict(dir, opt, env, out)
		return rep, err
	})
	return m, rep, err
}

// predict is Predict after runenv's prologue.
func predict(dir string, opt Options, env runenv.Env, out string) (_ *SavedModel, _ *Report, err error) {
	m, clf, err := LoadModel(dir, env.Device)
	if err != nil {
		return nil, nil, err
	}
	defer clf.Free()
	if err := opt.Precision.Apply(clf.Store); err != nil {
		return nil, nil, err
	}
	names := make([]string, len(m.Tasks))
	for i, t := range m.Tasks {
		names[i] = t.Name
	}
	rep, err := score(opt, env, out, matrixfile.Columns{Values: names, Float64: true}, func(g *graph.Graph) *torch.Tensor {
		return clf.Forward(g, false)
	}, m.outputs)
	return m, rep, err
}

// score streams the input through forward (B molecules → B×k outputs,
// evaluation mode) and writes one row per input row; finish, when not nil,
// maps each chunk's raw outputs (n×k) in place before they are written.
func score(opt Options, env runenv.Env, out string, cols matrixfile.Columns, forward func(*graph.Graph) *torch.Tensor, finish func([]float32)) (*Report, error) {
	format, err := matrixfile.Format(out)
	if err != nil {
		return nil, err
	}
	if opt.SkipInvalid && format == ".npy" {
		return nil, fmt.Errorf("%s: a .npy file has no row column to say which rows were skipped; write .csv, or keep invalid rows as NaN rows", out)
	}
	chunk, batch := opt.Chunk, opt.BatchSize
	if chunk <= 0 {
		chunk = defaultChunk
	}
	if batch <= 0 {
		batch = defaultBatchSize
	}
	cols.Keys = []string{"row", "smiles"}
	k := len(cols.Values)
	rep := &Report{}
	start := time.Now()
	src, err := openSource(opt, env)
	if err != nil {
		return nil, err
	}
	defer src.close()
	err = matrixfile.Write(out, cols, func(add matrixfile.AddFunc) error {
		row := make([]float64, k)
		nan := make([]float64, k)
		for j := range nan {
			nan[j] = math.NaN()
		}
		for {
			t0 := time.Now()
			c, err := src.next(chunk)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			rep.FeaturizeSeconds += time.Since(t0).Seconds()
			t1 := time.Now()
			outputs, err := runModel(c.ds, c.mols, batch, env.Device, k, forward)
			if err != nil {
				return err
			}
			rep.ModelSeconds += time.Since(t1).Seconds()
			for i, v := range outputs {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					return fmt.Errorf("%s row %d: the model's output is %v: its weights are damaged", opt.Data, c.kept[i/k], v)
				}
			}
			if finish != nil {
				finish(outputs)
			}
			rep.Invalid = append(rep.Invalid, c.rejected...)
			// Rows in input order: the kept ones from outputs, the others NaN.
			m := 0
			for _, idx := range c.rows {
				keys := []string{strconv.Itoa(idx), c.smiles(idx)}
				if m < len(c.kept) && c.kept[m] == idx {
					for j, v := range outputs[m*k : (m+1)*k] {
						row[j] = float64(v)
					}
					m++
					if err := add(keys, row); err != nil {
						return err
					}
				} else {
					if opt.SkipInvalid {
						continue
					}
					if err := add(keys, nan); err != nil {
						return err
					}
				}
				rep.Written++
			}
			rep.Rows += len(c.rows)
		}
	})
	if err != nil {
		return nil, err
	}
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

// runModel is forward's outputs (len(mols)×k row-major, float32) for the
// molecules mols of ds, batch at a time, without autograd.
func runModel(ds *data.Dataset, mols []int32, batch int, dev torch.Device, k int, forward func(*graph.Graph) *torch.Tensor) ([]float32, error) {
	outputs := make([]float32, 0, len(mols)*k)
	var b feed.Batch
	for lo := 0; lo < len(mols); lo += batch {
		if err := feed.Collate(ds, mols[lo:min(lo+batch, len(mols))], &b); err != nil {
			return nil, err
		}
		err := torch.Catch(func() {
			s := torch.NewScope()
			defer s.Close()
			outputs = append(outputs, torch.NoGradValue(func() []float32 { return torch.ToSlice[float32](forward(b.Graph(dev))) })...)
		})
		if err != nil {
			return nil, err
		}
	}
	return outputs, nil
}

// chunk is a run of input rows and the molecules made of those RDKit took.
type chunk struct {
	rows     []int            // input row indices, in order
	ds       *data.Dataset    // holds the kept rows' molecules
	mols     []int32          // the kept rows' molecules in ds, in order
	kept     []int            // input row of each of mols
	rejected []data.Rejection // the others
	smiles   func(row int) string
}

// source yields the input a chunk at a time: a CSV file's rows featurised as
// they are read, or a dataset folder's molecules.
type source struct {
	next  func(n int) (*chunk, error) // io.EOF after the last
	close func()
}

func openSource(opt Options, env runenv.Env) (*source, error) {
	st, err := os.Stat(opt.Data)
	if err != nil {
		return nil, fmt.Errorf("data %s: %w", opt.Data, errors.Unwrap(err))
	}
	if st.IsDir() && data.IsCorpus(opt.Data) {
		return nil, fmt.Errorf("data %s is a pre-training corpus, which keeps no SMILES to score by: give the CSV it was made from", opt.Data)
	}
	if st.IsDir() {
		return folderSource(opt, env)
	}
	r, err := data.OpenSMILES(opt.Data, opt.SmilesCol)
	if err != nil {
		return nil, err
	}
	return &source{
		close: func() { r.Close() },
		next: func(n int) (*chunk, error) {
			rows, err := r.Read(n)
			if err != nil {
				return nil, err
			}
			ds, kept, rejected, err := data.FeaturizeRows(rows, opt.RDKitWorkers, env.Dataset.Limits)
			if err != nil {
				return nil, err
			}
			c := &chunk{ds: ds, mols: ds.All(), kept: kept, rejected: rejected}
			first := rows[0].Index
			for _, row := range rows {
				c.rows = append(c.rows, row.Index)
			}
			c.smiles = func(i int) string { return rows[i-first].SMILES }
			return c, nil
		},
	}, nil
}

// folderSource is a dataset folder's molecules in order, n at a time: every
// one was featurised already, so none is invalid.
func folderSource(opt Options, env runenv.Env) (*source, error) {
	d, _, err := data.Load(opt.Data, data.LoadOptions{CacheDir: env.Dataset.CacheDir})
	if err != nil {
		return nil, err
	}
	pos := 0
	return &source{
		close: func() {},
		next: func(n int) (*chunk, error) {
			if pos == d.NumGraphs() {
				return nil, io.EOF
			}
			end := min(pos+n, d.NumGraphs())
			c := &chunk{ds: d}
			for i := pos; i < end; i++ {
				c.rows = append(c.rows, i)
				c.mols = append(c.mols, int32(i))
				c.kept = append(c.kept, i)
			}
			c.smiles = func(i int) string {
				if d.SMILES == nil {
					return ""
				}
				return d.SMILES[i]
			}
			pos = end
			return c, nil
		},
	}, nil
}
