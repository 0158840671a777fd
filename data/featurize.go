package data

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/micrograph/micrograph/data/rdkit"
	"github.com/micrograph/micrograph/internal/atomicfile"
	"github.com/micrograph/micrograph/internal/inputfile"
)

// Table is molecules to featurise: SMILES with their labels, one row each.
type Table struct {
	Source     string    // where the rows come from, for messages
	SMILES     []string  // one per row
	Lines      []int     // line of each row in Source, from 1
	Tasks      []string  // label column names
	Labels     []float32 // rows×len(Tasks) row-major, NaN where missing
	MolIDs     []string  // the source's mol_id column, or nil to number rows from 0
	AtomGroups [][]int32 // synthetic data: the planted group of each atom in SMILES order; else nil
	// Note, when not empty, is a line saying how the SMILES column was
	// chosen (by the default rule, from its name), for the user to see.
	Note string
}

// RejectFile is the report of rows that could not be featurised, written
// into every featurised folder (header only when none were rejected).
const RejectFile = "rejected.csv"

// idColumn is OGB's molecule identifier column; it is carried into the
// mapping, never taken as a label.
const idColumn = "mol_id"

// ReadTable reads a CSV file with a header row, gzip-compressed or not,
// taking its SMILES and label columns as cols says. Labels must be numbers;
// an empty field is a missing label. A label column that cols did not name
// (the default: every column but the SMILES one) holding text is an error
// wrapping ErrNotANumber, so that a caller may say how to name the columns.
func ReadTable(path string, cols Columns) (*Table, error) {
	f, err := openCSV(path)
	if err != nil {
		return nil, err
	}
	defer f.close()
	sel, err := cols.selectColumns(path, f.header, true)
	if err != nil {
		return nil, err
	}
	t := &Table{Source: path, Note: sel.note}
	for _, c := range sel.labels {
		t.Tasks = append(t.Tasks, f.header[c])
	}
	if sel.id >= 0 {
		t.MolIDs = []string{}
	}
	for {
		rec, err := f.read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		line, _ := f.FieldPos(0)
		t.SMILES = append(t.SMILES, rec[sel.smiles])
		t.Lines = append(t.Lines, line)
		if sel.id >= 0 {
			t.MolIDs = append(t.MolIDs, rec[sel.id])
		}
		for _, c := range sel.labels {
			v, err := parseLabel([]byte(strings.TrimSpace(rec[c])))
			if err != nil {
				where := fmt.Sprintf("%s:%d: column %s: %s", path, line, inputfile.Quote(f.header[c]), inputfile.Quote(rec[c]))
				if cols.Targets != nil {
					return nil, fmt.Errorf("%s %v", where, err) // a column the user named a target
				}
				return nil, fmt.Errorf("%s %w", where, err)
			}
			t.Labels = append(t.Labels, v)
		}
	}
	if len(t.SMILES) == 0 {
		return nil, fmt.Errorf("%s:2: no molecules: the file has only a header", path)
	}
	return t, nil
}

// FeaturizeOptions control Featurize.
type FeaturizeOptions struct {
	Split   string // "scaffold" (the default when empty), "random" or "none"
	Seed    uint64 // seed of a random split
	Workers int    // parallel RDKit calls; 0 means GOMAXPROCS
	Limits  Limits // rows beyond them are rejected before RDKit; zero fields take DefaultLimits'
	// Stop, when closed (SIGINT in pretrain), ends the featurisation
	// before its next molecule: Featurize returns ErrStopped and writes
	// nothing. Nil never stops.
	Stop <-chan struct{}
}

// ErrStopped is Featurize's and Open's error when their Stop was closed:
// nothing was written.
var ErrStopped = errors.New("stopped")

// Rejection is a row that could not be featurised.
type Rejection struct {
	Row    int    // data row, from 0
	Line   int    // line in the source file, from 1
	SMILES string // the rejected SMILES
	Reason string // RDKit's reason, or the limit the row exceeds
}

// FeaturizeReport summarises a Featurize run.
type FeaturizeReport struct {
	Rows      int         // rows read
	Molecules int         // molecules written
	Atoms     int         // atoms over all molecules written
	Bonds     int         // bonds over all molecules written, each once
	Rejected  []Rejection // rows skipped, in row order
	Split     *Split      // the split written, or nil
}

// Featurize turns every SMILES of t into a graph as OGB's smiles2graph does
// (through RDKit, docs/method.md §8) and writes the molecules in OGB's layout into
// the new folder out, with the split opt asks for (scaffold by default).
// Rows whose SMILES RDKit rejects are skipped and listed, with RDKit's
// reason, in the report and in out/rejected.csv. The folder appears only once
// it is complete; on error nothing is left behind.
func Featurize(t *Table, out string, opt FeaturizeOptions) (*FeaturizeReport, error) {
	split := opt.Split
	if split == "" {
		split = "scaffold"
	}
	if split != "scaffold" && split != "random" && split != "none" {
		return nil, fmt.Errorf("unknown split %q (want scaffold, random or none)", split)
	}
	limits := opt.Limits.OrDefault()
	if err := limits.Validate(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(out); err == nil {
		return nil, fmt.Errorf("%s already exists", out)
	}
	if err := rdkit.Load(); err != nil {
		return nil, err
	}
	graphs, rejected, stopped := featurizeAll(t.SMILES, split == "scaffold", opt.Workers, limits, opt.Stop)
	if stopped {
		return nil, ErrStopped
	}
	d := &Dataset{Name: filepath.Base(filepath.Clean(out)), Tasks: t.Tasks}
	rep := &FeaturizeReport{Rows: len(t.SMILES)}
	var kept []int
	for i, g := range graphs {
		if g == nil {
			rep.Rejected = append(rep.Rejected, Rejection{Row: i, Line: t.Lines[i], SMILES: t.SMILES[i], Reason: rejected[i]})
		} else {
			kept = append(kept, i)
		}
	}
	if len(kept) == 0 {
		return rep, fmt.Errorf("%s: none of the %d SMILES could be featurised (row 0: %s)", t.Source, len(t.SMILES), rejected[0])
	}
	if err := fillDataset(d, t, graphs, kept); err != nil {
		return rep, err
	}
	var molIDs []string
	if t.MolIDs != nil {
		for _, i := range kept {
			molIDs = append(molIDs, t.MolIDs[i])
		}
	} else {
		for _, i := range kept {
			molIDs = append(molIDs, strconv.Itoa(i))
		}
	}
	switch split {
	case "scaffold":
		scaffolds := make([]string, len(kept))
		for k, i := range kept {
			scaffolds[k] = graphs[i].Scaffold
		}
		d.Split = ScaffoldSplit(scaffolds)
	case "random":
		d.Split = RandomSplit(len(kept), opt.Seed)
	}
	if err := d.Validate(); err != nil {
		return rep, fmt.Errorf("%s: %w", t.Source, err)
	}
	err := atomicfile.WriteDir(out, func(tmp string) error {
		if err := writeOGB(tmp, d, molIDs); err != nil {
			return err
		}
		return WriteRejections(filepath.Join(tmp, RejectFile), rep.Rejected)
	})
	if err != nil {
		return rep, err
	}
	rep.Molecules, rep.Atoms, rep.Bonds, rep.Split = len(kept), d.TotalAtoms(), d.TotalBonds(), d.Split
	return rep, nil
}

// featurizeAll runs RDKit on every SMILES within limits with several
// goroutines; a nil graph marks a rejected row, whose reason is in the second
// result. Once stop is closed no worker starts another molecule, and
// stopped is true.
func featurizeAll(smiles []string, scaffolds bool, workers int, limits Limits, stop <-chan struct{}) (graphs []*rdkit.Graph, reasons []string, stopped bool) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	graphs = make([]*rdkit.Graph, len(smiles))
	reasons = make([]string, len(smiles))
	var next atomic.Int64
	var wasStopped atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					wasStopped.Store(true)
					return
				default:
				}
				i := int(next.Add(1) - 1)
				if i >= len(smiles) {
					return
				}
				if reasons[i] = limits.check(smiles[i]); reasons[i] != "" {
					continue
				}
				g, err := rdkit.SmilesToGraph(smiles[i], scaffolds)
				if err != nil {
					reasons[i] = err.Error()
				} else {
					graphs[i] = g
				}
			}
		}()
	}
	wg.Wait()
	return graphs, reasons, wasStopped.Load()
}

// fillDataset concatenates the kept rows' graphs, labels, SMILES and atom
// groups into d.
func fillDataset(d *Dataset, t *Table, graphs []*rdkit.Graph, kept []int) error {
	nt := len(t.Tasks)
	d.NodePtr = make([]int64, 1, len(kept)+1)
	d.BondPtr = make([]int64, 1, len(kept)+1)
	d.SMILES = make([]string, 0, len(kept))
	d.Labels = make([]float32, 0, len(kept)*nt)
	if t.AtomGroups != nil {
		d.AtomGroup = []int32{}
	}
	for _, i := range kept {
		g := graphs[i]
		d.NodePtr = append(d.NodePtr, d.NodePtr[len(d.NodePtr)-1]+int64(g.NumAtoms()))
		d.BondPtr = append(d.BondPtr, d.BondPtr[len(d.BondPtr)-1]+int64(g.NumBonds()))
		d.AtomFeat = append(d.AtomFeat, g.AtomFeatures...)
		d.BondAtoms = append(d.BondAtoms, g.BondAtoms...)
		d.BondFeat = append(d.BondFeat, g.BondFeatures...)
		d.SMILES = append(d.SMILES, t.SMILES[i])
		d.Labels = append(d.Labels, t.Labels[i*nt:(i+1)*nt]...)
		if t.AtomGroups != nil {
			if len(t.AtomGroups[i]) != g.NumAtoms() {
				return fmt.Errorf("%s row %d: %d atom groups for the %d atoms RDKit made of %s",
					t.Source, i, len(t.AtomGroups[i]), g.NumAtoms(), inputfile.Quote(t.SMILES[i]))
			}
			d.AtomGroup = append(d.AtomGroup, t.AtomGroups[i]...)
		}
	}
	return nil
}

// CountRejections is the number of rows listed in dir's RejectFile; a
// folder without one (OGB's own) rejected none.
func CountRejections(dir string) (int, error) {
	f, err := inputfile.Open(filepath.Join(dir, RejectFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r := csv.NewReader(bufio.NewReader(f))
	n := -1 // the header
	for {
		_, err := r.Read()
		if err == io.EOF {
			return max(n, 0), nil
		}
		if err != nil {
			return 0, fmt.Errorf("%s: %w", filepath.Join(dir, RejectFile), err)
		}
		n++
	}
}

// WriteRejections lists rejected rows in the CSV file path, atomically.
func WriteRejections(path string, rejected []Rejection) error {
	return atomicfile.Write(path, 0o644, func(f io.Writer) error {
		cw := csv.NewWriter(f)
		cw.Write([]string{"row", "line", "smiles", "reason"})
		for _, r := range rejected {
			cw.Write([]string{strconv.Itoa(r.Row), strconv.Itoa(r.Line), r.SMILES, r.Reason})
		}
		cw.Flush()
		return cw.Error()
	})
}
