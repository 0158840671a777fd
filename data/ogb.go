package data

import (
	"compress/gzip"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"github.com/micrograph/micrograph/internal/inputfile"
)

// Files of an OGB graph-property dataset folder (see ../shared/data/README.md),
// plus raw/node_group.csv.gz, which only synthetic datasets have (OGB loads it
// as an additional node file, whose names must start with "node_").
const (
	fileNumNodes  = "raw/num-node-list.csv.gz"
	fileNumBonds  = "raw/num-edge-list.csv.gz"
	fileNodeFeat  = "raw/node-feat.csv.gz"
	fileBonds     = "raw/edge.csv.gz"
	fileBondFeat  = "raw/edge-feat.csv.gz"
	fileLabels    = "raw/graph-label.csv.gz"
	fileNodeGroup = "raw/node_group.csv.gz"
	fileMapping   = "mapping/mol.csv.gz"
	dirSplit      = "split"
)

// splitParts are the files of a split folder, in the order they are read.
var splitParts = [3]string{"train", "valid", "test"}

// ReadOGB reads an OGB molecule dataset folder: raw/*.csv.gz, the split under
// split/ (scaffold if there are several), and mapping/mol.csv.gz when present.
// Every inconsistency (a damaged gzip stream, a wrong field count, a value
// that is not an integer, a feature or bond endpoint out of range, counts
// that disagree between files, no molecules, a missing split file) is an
// error naming the file and line.
func ReadOGB(dir string) (*Dataset, error) {
	d := &Dataset{Name: filepath.Base(filepath.Clean(dir))}
	nodes, err := readCounts(dir, fileNumNodes, -1)
	if err != nil {
		return nil, err
	}
	g := len(nodes)
	bonds, err := readCounts(dir, fileNumBonds, g)
	if err != nil {
		return nil, err
	}
	d.NodePtr, d.BondPtr = offsets(nodes), offsets(bonds)

	// The remaining files are independent of each other; read them in parallel.
	readers := []func() error{
		func() error { return readNodeFeat(dir, d) },
		func() error { return readBonds(dir, d) },
		func() error { return readBondFeat(dir, d) },
		func() error { return readLabels(dir, d) },
		func() error { return readSplit(dir, d) },
		func() error { return readNodeGroups(dir, d) },
	}
	errs := make([]error, len(readers))
	var wg sync.WaitGroup
	for i, read := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = read()
		}()
	}
	wg.Wait()
	// The first error in file order, so that the message does not depend on timing.
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	// The mapping names the tasks, so it is read once the labels are.
	if err := readMapping(dir, d); err != nil {
		return nil, err
	}
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return d, nil
}

// readCounts reads a file of one non-negative integer per molecule. want is
// the number of molecules, or -1 when this file defines it.
func readCounts(dir, name string, want int) ([]int64, error) {
	r, err := openLines(filepath.Join(dir, name))
	if err != nil {
		return nil, err
	}
	defer r.close()
	var counts []int64
	var v [1]int64
	for want < 0 || len(counts) < want {
		line, err := r.next()
		if err == io.EOF {
			if want >= 0 {
				return nil, fmt.Errorf("%s:%d: file ends after %d rows, want one per molecule (%d in %s)",
					r.path, r.line+1, r.line, want, fileNumNodes)
			}
			break
		}
		if err != nil {
			return nil, err
		}
		if err := r.ints(line, v[:]); err != nil {
			return nil, err
		}
		if v[0] < 0 || v[0] > 1<<30 {
			return nil, r.errorf("count %d out of range", v[0])
		}
		counts = append(counts, v[0])
	}
	if len(counts) == 0 {
		return nil, fmt.Errorf("%s:1: no molecules: the dataset is empty", r.path)
	}
	if err := r.finish(fmt.Sprintf("want one per molecule (%d in %s)", want, fileNumNodes)); err != nil {
		return nil, err
	}
	return counts, nil
}

// capacity is the room to reserve for width values per atom (or bond) of
// ptr. The counts come from the file being checked, so the reservation is
// capped: a corrupt count must cause an error about the row count, not an
// attempt to allocate terabytes.
func capacity(ptr []int64, width int) int {
	return int(min(ptr[len(ptr)-1], 1<<24)) * width
}

func offsets(counts []int64) []int64 {
	ptr := make([]int64, len(counts)+1)
	for i, c := range counts {
		ptr[i+1] = ptr[i] + c
	}
	return ptr
}

// readRows reads rows of width integers each, as many as the count files
// promise, and hands each parsed row to use with its molecule.
func readRows(dir, name string, width int, ptr []int64, what string, use func(r *lineReader, mol int, row []int64) error) error {
	r, err := openLines(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	defer r.close()
	total := ptr[len(ptr)-1]
	why := fmt.Sprintf("the sum of %s", what)
	row := make([]int64, width)
	for mol := 0; mol+1 < len(ptr); mol++ {
		for i := ptr[mol]; i < ptr[mol+1]; i++ {
			line, err := r.expectRow(total, why)
			if err != nil {
				return err
			}
			if err := r.ints(line, row); err != nil {
				return err
			}
			if err := use(r, mol, row); err != nil {
				return err
			}
		}
	}
	return r.finish(why + " is " + strconv.FormatInt(total, 10))
}

// checkFeatures stores a row of feature indices after checking each against
// its number of values.
func checkFeatures(r *lineReader, row []int64, dims []int, names []string, dst []uint8) error {
	for j, v := range row {
		if v < 0 || v >= int64(dims[j]) {
			return r.errorf("%s (field %d) is %d, outside its range 0..%d", names[j], j+1, v, dims[j]-1)
		}
		dst[j] = uint8(v)
	}
	return nil
}

var atomFeatureNames = []string{"atomic number", "chirality", "degree", "formal charge", "hydrogen count",
	"radical electrons", "hybridisation", "aromatic", "in ring"}

var bondFeatureNames = []string{"bond type", "bond stereo", "conjugated"}

func readNodeFeat(dir string, d *Dataset) error {
	d.AtomFeat = make([]uint8, 0, capacity(d.NodePtr, NumAtomFeatures))
	var f [NumAtomFeatures]uint8
	return readRows(dir, fileNodeFeat, NumAtomFeatures, d.NodePtr, fileNumNodes,
		func(r *lineReader, _ int, row []int64) error {
			if err := checkFeatures(r, row, AtomFeatureDims[:], atomFeatureNames, f[:]); err != nil {
				return err
			}
			d.AtomFeat = append(d.AtomFeat, f[:]...)
			return nil
		})
}

func readBondFeat(dir string, d *Dataset) error {
	d.BondFeat = make([]uint8, 0, capacity(d.BondPtr, NumBondFeatures))
	var f [NumBondFeatures]uint8
	return readRows(dir, fileBondFeat, NumBondFeatures, d.BondPtr, fileNumBonds,
		func(r *lineReader, _ int, row []int64) error {
			if err := checkFeatures(r, row, BondFeatureDims[:], bondFeatureNames, f[:]); err != nil {
				return err
			}
			d.BondFeat = append(d.BondFeat, f[:]...)
			return nil
		})
}

func readBonds(dir string, d *Dataset) error {
	d.BondAtoms = make([]int32, 0, capacity(d.BondPtr, 2))
	return readRows(dir, fileBonds, 2, d.BondPtr, fileNumBonds,
		func(r *lineReader, mol int, row []int64) error {
			n := d.NodePtr[mol+1] - d.NodePtr[mol]
			for _, a := range row {
				if a < 0 || a >= n {
					return r.errorf("bond endpoint %d outside molecule %d, which has %d atoms (%s)", a, mol, n, fileNumNodes)
				}
			}
			d.BondAtoms = append(d.BondAtoms, int32(row[0]), int32(row[1]))
			return nil
		})
}

func readNodeGroups(dir string, d *Dataset) error {
	if _, err := os.Stat(filepath.Join(dir, fileNodeGroup)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	d.AtomGroup = make([]int32, 0, capacity(d.NodePtr, 1))
	return readRows(dir, fileNodeGroup, 1, d.NodePtr, fileNumNodes,
		func(r *lineReader, _ int, row []int64) error {
			if row[0] < -1 || row[0] > 1<<20 {
				return r.errorf("group %d out of range (-1 for none)", row[0])
			}
			d.AtomGroup = append(d.AtomGroup, int32(row[0]))
			return nil
		})
}

// readLabels reads one row per molecule with one field per task; an empty
// field is a missing label (NaN). A missing file means no tasks.
func readLabels(dir string, d *Dataset) error {
	path := filepath.Join(dir, fileLabels)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	r, err := openLines(path)
	if err != nil {
		return err
	}
	defer r.close()
	g := len(d.NodePtr) - 1
	why := "one per molecule in " + fileNumNodes
	tasks := -1
	for mol := 0; mol < g; mol++ {
		line, err := r.expectRow(int64(g), why)
		if err != nil {
			return err
		}
		fields := splitFields(line)
		if tasks < 0 {
			tasks = len(fields)
			d.Labels = make([]float32, 0, g*tasks)
		} else if len(fields) != tasks {
			return r.errorf("%d fields, want %d like the first row", len(fields), tasks)
		}
		for j, f := range fields {
			v, err := parseLabel(f)
			if err != nil {
				return r.errorf("field %d %s %v", j+1, inputfile.Quote(string(f)), err)
			}
			d.Labels = append(d.Labels, v)
		}
	}
	if err := r.finish(fmt.Sprintf("want %d, %s", g, why)); err != nil {
		return err
	}
	d.Tasks = make([]string, tasks)
	for j := range d.Tasks {
		d.Tasks[j] = fmt.Sprintf("task_%d", j+1)
	}
	return nil
}

// splitFields splits a line at commas (no quoting: OGB's numeric files have none).
func splitFields(line []byte) [][]byte {
	var fields [][]byte
	for {
		i := slices.Index(line, ',')
		if i < 0 {
			return append(fields, line)
		}
		fields = append(fields, line[:i])
		line = line[i+1:]
	}
}

// readMapping reads mapping/mol.csv.gz, when present, for the SMILES and the
// task names (the columns before "smiles").
func readMapping(dir string, d *Dataset) error {
	path := filepath.Join(dir, fileMapping)
	f, err := inputfile.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: not a gzip file: %w", path, err)
	}
	cr := newCSVReader(path, gz)
	header, err := cr.header()
	if err != nil {
		return err
	}
	col := slices.Index(header, "smiles")
	if col < 0 {
		return fmt.Errorf("%s:1: no \"smiles\" column", path)
	}
	if col != len(d.Tasks) {
		return fmt.Errorf("%s:1: %d task columns before \"smiles\", but %s has %d", path, col, fileLabels, len(d.Tasks))
	}
	tasks := slices.Clone(header[:col])
	g := d.NumGraphs()
	d.SMILES = make([]string, 0, g)
	for {
		rec, err := cr.read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if len(d.SMILES) == g {
			line, _ := cr.FieldPos(0)
			return fmt.Errorf("%s:%d: extra row: want one per molecule (%d in %s)", path, line, g, fileNumNodes)
		}
		d.SMILES = append(d.SMILES, rec[col])
	}
	if len(d.SMILES) != g {
		return fmt.Errorf("%s:%d: file ends after %d rows, want one per molecule (%d in %s)",
			path, len(d.SMILES)+2, len(d.SMILES), g, fileNumNodes)
	}
	d.Tasks = tasks
	return nil
}

// ErrNoSplit says that a dataset folder has no split, which the scaffold
// protocol evaluates on: errors that wrap it name the dataset.
var ErrNoSplit = errors.New("split/ is missing")

// LacksSplit tells whether path is an OGB dataset folder without a split/
// folder, such as featurisation without a split writes. A CSV file is
// featurised with a scaffold split, so it never lacks one.
func LacksSplit(path string) bool {
	if kind, err := KindOf(path); err != nil || kind != OGBFolder {
		return false
	}
	_, err := os.Stat(filepath.Join(path, dirSplit))
	return errors.Is(err, fs.ErrNotExist)
}

// readSplit reads split/NAME/{train,valid,test}.csv.gz, NAME being
// "scaffold" or else the only folder under split/. No split/ folder means no
// split; a split folder lacking one of its three files is an error.
func readSplit(dir string, d *Dataset) error {
	entries, err := os.ReadDir(filepath.Join(dir, dirSplit))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	var name string
	switch {
	case slices.Contains(names, "scaffold"):
		name = "scaffold"
	case len(names) == 1:
		name = names[0]
	default:
		return fmt.Errorf("%s: want a \"scaffold\" folder or exactly one split folder, found %q", filepath.Join(dir, dirSplit), names)
	}
	g := d.NumGraphs()
	s := &Split{Name: name}
	seen := make([]bool, g)
	parts := []*[]int32{&s.Train, &s.Valid, &s.Test}
	for i, part := range splitParts {
		path := filepath.Join(dir, dirSplit, name, part+".csv.gz")
		r, err := openLines(path)
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: missing split file", path)
		}
		if err != nil {
			return err
		}
		var v [1]int64
		for {
			line, err := r.next()
			if err == io.EOF {
				break
			}
			if err == nil {
				err = r.ints(line, v[:])
			}
			if err == nil && (v[0] < 0 || v[0] >= int64(g)) {
				err = r.errorf("molecule %d outside 0..%d (%s)", v[0], g-1, fileNumNodes)
			}
			if err == nil && seen[v[0]] {
				err = r.errorf("molecule %d is listed twice in the split", v[0])
			}
			if err != nil {
				r.close()
				return err
			}
			seen[v[0]] = true
			*parts[i] = append(*parts[i], int32(v[0]))
		}
		r.close()
	}
	d.Split = s
	return nil
}

// writeOGB writes d into dir (a new, empty folder) in OGB's layout, which
// OGB's own loaders read: headerless gzip CSV files under raw/, the split
// under split/NAME/, and mapping/mol.csv.gz with molIDs as its mol_id column
// (or molecule indices when molIDs is nil). The files are compressed in
// parallel.
func writeOGB(dir string, d *Dataset, molIDs []string) error {
	type file struct {
		name string
		fill func(w *gzipWriter) error
	}
	g := d.NumGraphs()
	files := []file{
		{fileNumNodes, func(w *gzipWriter) error { return writeCounts(w, d.NodePtr) }},
		{fileNumBonds, func(w *gzipWriter) error { return writeCounts(w, d.BondPtr) }},
		{fileNodeFeat, func(w *gzipWriter) error { return writeRows(w, d.AtomFeat, NumAtomFeatures) }},
		{fileBonds, func(w *gzipWriter) error { return writeRows(w, d.BondAtoms, 2) }},
		{fileBondFeat, func(w *gzipWriter) error { return writeRows(w, d.BondFeat, NumBondFeatures) }},
	}
	// pandas cannot read a file of empty lines, so a dataset without tasks has no label file.
	if len(d.Tasks) > 0 {
		files = append(files, file{fileLabels, func(w *gzipWriter) error {
			t := len(d.Tasks)
			for i := 0; i < g; i++ {
				for j, v := range d.Labels[i*t : (i+1)*t] {
					if j > 0 {
						w.buf = append(w.buf, ',')
					}
					w.buf = appendLabel(w.buf, v)
				}
				if err := w.endLine(); err != nil {
					return err
				}
			}
			return nil
		}})
	}
	if d.AtomGroup != nil {
		files = append(files, file{fileNodeGroup, func(w *gzipWriter) error { return writeRows(w, d.AtomGroup, 1) }})
	}
	if d.Split != nil {
		for i, part := range [][]int32{d.Split.Train, d.Split.Valid, d.Split.Test} {
			files = append(files, file{filepath.Join(dirSplit, d.Split.Name, splitParts[i]+".csv.gz"),
				func(w *gzipWriter) error { return writeRows(w, part, 1) }})
		}
	}
	if d.SMILES != nil {
		files = append(files, file{fileMapping, func(w *gzipWriter) error { return writeMapping(w, d, molIDs) }})
	}
	errs := make([]error, len(files))
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = writeGzip(filepath.Join(dir, f.name), f.fill)
		}()
	}
	wg.Wait()
	// The first failure in file order: a full disk fails every file at
	// once, and one line says it.
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func writeGzip(path string, fill func(w *gzipWriter) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := newGzipWriter(f)
	if err := fill(w); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := w.close(); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// writeCounts writes the difference of consecutive offsets, one per line.
func writeCounts(w *gzipWriter, ptr []int64) error {
	for i := 1; i < len(ptr); i++ {
		w.buf = strconv.AppendInt(w.buf, ptr[i]-ptr[i-1], 10)
		if err := w.endLine(); err != nil {
			return err
		}
	}
	return nil
}

func writeRows[T uint8 | int32](w *gzipWriter, vals []T, width int) error {
	for i := 0; i < len(vals); i += width {
		w.buf = appendInts(w.buf, vals[i:i+width])
		if err := w.endLine(); err != nil {
			return err
		}
	}
	return nil
}

// writeMapping writes OGB's mapping file: "task_1,...,task_n,smiles,mol_id".
func writeMapping(w *gzipWriter, d *Dataset, molIDs []string) error {
	cw := csv.NewWriter(w.gz)
	rec := append(slices.Clone(d.Tasks), "smiles", "mol_id")
	if err := cw.Write(rec); err != nil {
		return err
	}
	t := len(d.Tasks)
	var num []byte
	for i, s := range d.SMILES {
		for j := 0; j < t; j++ {
			num = appendLabel(num[:0], d.Labels[i*t+j])
			rec[j] = string(num)
		}
		rec[t] = s
		if molIDs != nil {
			rec[t+1] = molIDs[i]
		} else {
			rec[t+1] = strconv.Itoa(i)
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
