package infer

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"time"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/graph"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/runenv"
)

// Level says what each row of a model's output describes.
type Level int

const (
	// PerMolecule outputs have a row per molecule: B rows for a batch of B.
	PerMolecule Level = iota
	// PerAtom outputs have a row per atom: N rows for a batch of N atoms,
	// each molecule's atoms together, in RDKit's order.
	PerAtom
)

// Model is what Stream runs over the input.
type Model struct {
	// Forward maps a batch to its outputs, a float32 tensor of Width
	// columns and a row per molecule or per atom as Level says. Stream
	// calls it without autograd, in a scope freed after each batch, so it
	// runs the model in evaluation mode and keeps nothing.
	Forward func(*graph.Graph) *torch.Tensor
	Level   Level
	Width   int
}

// Molecule is one input row as Stream hands it on, in input order. Its
// slices and Data are Stream's, valid only during the call.
type Molecule struct {
	Row    int    // input row, from 0
	SMILES string // as the input gives it; "" for a folder without SMILES
	// Rejected says why the featurisation refused the row (a CSV row RDKit
	// cannot read, or one beyond the limits); nil for a molecule.
	Rejected *data.Rejection
	// Data holds the molecule, at index Mol, as the model saw it: its atoms
	// in RDKit's order with their features, and its bonds. Nil when
	// Rejected.
	Data *data.Dataset
	Mol  int32
	// Out is the model's outputs for the molecule, row-major: Width values
	// (PerMolecule), or Data.NumAtoms(Mol)×Width (PerAtom). Nil when
	// Rejected.
	Out []float32
}

// progressEvery is how often Stream writes a progress line.
var progressEvery = 15 * time.Second

// Stream runs m over every row of the input opt names (a CSV file read,
// featurised and scored opt.Chunk rows at a time, or a dataset folder) and
// hands each row to each in input order: a molecule with its outputs, or a
// row the featurisation rejected, which also goes to opt.Rejected. Memory
// follows the chunk and the batch, not the input. env.Progress, when not
// nil, gets a line every 15 seconds with the rows done, the rejected ones
// and the rate. The outputs of a molecule do not depend on the chunk or
// batch sizes (evaluation mode). An output that is not finite is an error
// naming the row: the weights are damaged. Stream runs in the body of
// runenv.Run, where env's device and threads are in force; an error from
// each ends it and comes back as it is.
func Stream(opt Options, env runenv.Env, m Model, each func(*Molecule) error) (*Report, error) {
	if m.Forward == nil || m.Width < 1 || (m.Level != PerMolecule && m.Level != PerAtom) {
		return nil, fmt.Errorf("infer: a model needs a forward function, a level and a positive width (have width %d, level %d)", m.Width, m.Level)
	}
	chunk, batch := opt.Chunk, opt.BatchSize
	if chunk <= 0 {
		chunk = defaultChunk
	}
	if batch <= 0 {
		batch = defaultBatchSize
	}
	rep := &Report{}
	start := time.Now()
	src, err := openSource(opt, env)
	if err != nil {
		return nil, err
	}
	defer src.close()
	prog := progress{w: env.Progress, name: filepath.Base(opt.Data), start: start, last: start}
	var mol Molecule
	// reject hands on a rejected row.
	reject := func(r *data.Rejection) error {
		rep.Rows++
		rep.Invalid++
		if opt.Rejected != nil {
			opt.Rejected(*r)
		}
		mol = Molecule{Row: r.Row, SMILES: r.SMILES, Rejected: r}
		return each(&mol)
	}
	var b feed.Batch
	for {
		t0 := time.Now()
		c, err := src.next(chunk)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		rep.FeaturizeSeconds += time.Since(t0).Seconds()
		rejected := c.rejected
		for lo := 0; lo < len(c.mols); lo += batch {
			hi := min(lo+batch, len(c.mols))
			t1 := time.Now()
			out, err := runBatch(c.ds, c.mols[lo:hi], &b, env.Device, m)
			if err != nil {
				return nil, err
			}
			rep.ModelSeconds += time.Since(t1).Seconds()
			off := 0
			for i := lo; i < hi; i++ {
				for len(rejected) > 0 && rejected[0].Row < c.kept[i] {
					if err := reject(&rejected[0]); err != nil {
						return nil, err
					}
					rejected = rejected[1:]
				}
				n := m.Width
				if m.Level == PerAtom {
					n *= c.ds.NumAtoms(int(c.mols[i]))
				}
				mol = Molecule{Row: c.kept[i], SMILES: c.smiles(c.kept[i]), Data: c.ds, Mol: c.mols[i], Out: out[off : off+n]}
				off += n
				for _, v := range mol.Out {
					if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
						return nil, fmt.Errorf("%s row %d: the model's output is %v: its weights are damaged", opt.Data, mol.Row, v)
					}
				}
				rep.Rows++
				if err := each(&mol); err != nil {
					return nil, err
				}
			}
			prog.update(rep)
		}
		for i := range rejected {
			if err := reject(&rejected[i]); err != nil {
				return nil, err
			}
		}
		prog.update(rep)
	}
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

// runBatch is m's outputs (row-major float32) for the molecules mols of ds,
// collated into b, without autograd; their count is checked against the
// molecules or atoms of the batch.
func runBatch(ds *data.Dataset, mols []int32, b *feed.Batch, dev torch.Device, m Model) ([]float32, error) {
	if err := feed.Collate(ds, mols, b); err != nil {
		return nil, err
	}
	rows := len(mols)
	if m.Level == PerAtom {
		rows = b.NumAtoms()
	}
	var out []float32
	var shape []int64
	err := torch.Catch(func() {
		s := torch.NewScope()
		defer s.Close()
		y := torch.NoGradValue(func() *torch.Tensor { return m.Forward(b.Graph(dev)) })
		shape, out = y.Shape(), torch.ToSlice[float32](y)
	})
	if err != nil {
		return nil, err
	}
	if len(shape) != 2 || shape[0] != int64(rows) || shape[1] != int64(m.Width) {
		return nil, fmt.Errorf("infer: the model's output has shape %v, want [%d %d]", shape, rows, m.Width)
	}
	return out, nil
}

// progress writes a line every progressEvery: the rows done, the rejected
// ones and the rate.
type progress struct {
	w           io.Writer // nil: silent
	name        string    // the input's base name
	start, last time.Time
}

func (p *progress) update(rep *Report) {
	if p.w == nil || time.Since(p.last) < progressEvery {
		return
	}
	p.last = time.Now()
	elapsed := time.Since(p.start)
	fmt.Fprintf(p.w, "%s: %d rows done, %d rejected, %.0f rows/s, %s\n",
		p.name, rep.Rows, rep.Invalid, float64(rep.Rows)/max(elapsed.Seconds(), 1e-9), elapsed.Round(time.Second))
}

// chunk is a run of input rows and the molecules made of those RDKit took.
type chunk struct {
	ds       *data.Dataset    // holds the kept rows' molecules
	mols     []int32          // the kept rows' molecules in ds, in order
	kept     []int            // input row of each of mols
	rejected []data.Rejection // the others, in order
	smiles   func(row int) string
}

// source yields the input a chunk at a time: a CSV file's rows featurised as
// they are read, or a dataset folder's molecules.
type source struct {
	next  func(n int) (*chunk, error) // io.EOF after the last
	close func()
}

func openSource(opt Options, env runenv.Env) (*source, error) {
	switch kind, err := data.KindOf(opt.Data); {
	case err != nil:
		return nil, err
	case kind == data.Corpus:
		return nil, &data.CorpusError{Path: opt.Data, Why: "no SMILES to score by"}
	case kind == data.OGBFolder:
		if err := opt.Columns.CheckFolder(opt.Data); err != nil {
			return nil, err
		}
		return folderSource(opt, env)
	}
	r, err := data.OpenSMILES(opt.Data, opt.Columns)
	if err != nil {
		return nil, err
	}
	if r.Note != "" && env.Dataset.Report != nil {
		fmt.Fprintf(env.Dataset.Report, "micrograph: %s\n", r.Note)
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
