package infer

import (
	"encoding/binary"
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/graph"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/ops"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/runenv"
)

// atomsCSV has molecules whose atoms RDKit numbers in the order the SMILES
// writes them (a dummy atom and two fragments among them), and rejected
// rows first, between molecules and last.
const atomsCSV = "smiles\nQ\nOCC(=O)N\n*CCl\nC1CC\n[Na+].[Cl-]\nc1ccccc1O\nC(C)(C)(C)(C)C\n"

// atomsValid is each molecule of atomsCSV by input row: its atomic numbers
// in RDKit's order. Rows 0, 3 and 6 (lines 2, 5 and 8) are rejected.
var atomsValid = map[int][]int{
	1: {8, 6, 6, 8, 7},
	2: {0, 6, 17},
	4: {11, 17},
	5: {6, 6, 6, 6, 6, 6, 8},
}

var atomsRejectedLines = map[int]int{0: 2, 3: 5, 6: 8}

// writeInput writes content to dir/name and returns its path.
func writeInput(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// alone is what enc makes of smiles featurised and run on its own: the
// node embeddings (atoms×d, row-major) and their mean.
func alone(t *testing.T, enc *model.DeeperGCN, smiles string) (nodes, mean []float32) {
	t.Helper()
	ds, kept, _, err := data.FeaturizeRows([]data.Row{{SMILES: smiles}}, 1, data.Limits{})
	if err != nil || len(kept) != 1 {
		t.Fatalf("%s: %v", smiles, err)
	}
	var b feed.Batch
	if err := feed.Collate(ds, []int32{0}, &b); err != nil {
		t.Fatal(err)
	}
	torch.NoGrad(func() {
		g := b.Graph(torch.CPU)
		h := enc.Forward(g, false)
		nodes = torch.ToSlice[float32](h)
		mean = torch.ToSlice[float32](ops.GraphPool(h, g, ops.MeanPool))
	})
	return nodes, mean
}

// closeTo reports the first value of got more than tol away from want.
func closeTo(got, want []float32, tol float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d values, want %d", len(got), len(want))
	}
	for j := range got {
		if d := math.Abs(float64(got[j] - want[j])); !(d <= tol) {
			return fmt.Errorf("[%d] = %v, want %v", j, got[j], want[j])
		}
	}
	return nil
}

// Stream hands on every input row exactly once and in input order, whatever
// the chunk and batch sizes: each molecule with its outputs (per molecule,
// or per atom in RDKit's order), equal to what the encoder makes of it
// alone, and each rejected row, by line, also to Options.Rejected. It
// writes progress lines, the last counting every row.
func TestStreamHandsOnEveryRowInOrder(t *testing.T) {
	arch, _, enc := tinyEncoder(t)
	dir := t.TempDir()
	in := writeInput(t, dir, "in.csv", atomsCSV)
	smiles := strings.Split(atomsCSV, "\n")[1:]
	saved := progressEvery
	progressEvery = 0
	t.Cleanup(func() { progressEvery = saved })
	models := map[Level]Model{
		PerMolecule: {Level: PerMolecule, Width: arch.Hidden, Forward: func(g *graph.Graph) *torch.Tensor {
			return ops.GraphPool(enc.Forward(g, false), g, ops.MeanPool)
		}},
		PerAtom: {Level: PerAtom, Width: arch.Hidden, Forward: func(g *graph.Graph) *torch.Tensor { return enc.Forward(g, false) }},
	}
	for _, level := range []Level{PerMolecule, PerAtom} {
		for _, size := range []struct{ chunk, batch int }{{1, 1}, {2, 1}, {3, 2}, {4, 3}, {0, 0}} {
			name := fmt.Sprintf("level %d chunk %d batch %d", level, size.chunk, size.batch)
			var rejected []data.Rejection
			var progress strings.Builder
			opt := Options{Data: in, Chunk: size.chunk, BatchSize: size.batch, RDKitWorkers: 1,
				Rejected: func(r data.Rejection) { rejected = append(rejected, r) }}
			env := runenv.Default()
			env.Progress = &progress
			next := 0
			rep, err := Stream(opt, env, models[level], func(m *Molecule) error {
				if m.Row != next {
					return fmt.Errorf("row %d handed on after row %d", m.Row, next-1)
				}
				next++
				if m.SMILES != smiles[m.Row] {
					return fmt.Errorf("row %d: SMILES %q, want %q", m.Row, m.SMILES, smiles[m.Row])
				}
				if line, ok := atomsRejectedLines[m.Row]; ok {
					if m.Rejected == nil || m.Rejected.Line != line || m.Rejected.Row != m.Row || m.Out != nil || m.Data != nil {
						return fmt.Errorf("row %d: %+v, want rejected at line %d with no outputs", m.Row, m, line)
					}
					return nil
				}
				if m.Rejected != nil {
					return fmt.Errorf("row %d rejected: %s", m.Row, m.Rejected.Reason)
				}
				n := m.Data.NumAtoms(int(m.Mol))
				var z []int
				for a := range n {
					z = append(z, m.Data.AtomicNumber(int(m.Mol), a))
				}
				if !slices.Equal(z, atomsValid[m.Row]) {
					return fmt.Errorf("row %d: atomic numbers %v, want %v", m.Row, z, atomsValid[m.Row])
				}
				nodes, mean := alone(t, enc, m.SMILES)
				want := mean
				if level == PerAtom {
					want = nodes
				}
				if err := closeTo(m.Out, want, 1e-5); err != nil {
					return fmt.Errorf("row %d: outputs %v", m.Row, err)
				}
				return nil
			})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if next != 7 || rep.Rows != 7 || rep.Invalid != 3 || len(rejected) != 3 {
				t.Fatalf("%s: %d rows handed on, report %+v, rejected %+v", name, next, rep, rejected)
			}
			for i, row := range []int{0, 3, 6} {
				if rejected[i].Row != row || rejected[i].Line != atomsRejectedLines[row] || rejected[i].Reason == "" {
					t.Errorf("%s: rejection %d is %+v, want row %d at line %d with a reason", name, i, rejected[i], row, atomsRejectedLines[row])
				}
			}
			lines := strings.Split(strings.TrimSpace(progress.String()), "\n")
			if last := lines[len(lines)-1]; !strings.HasPrefix(last, "in.csv: 7 rows done, 3 rejected, ") {
				t.Errorf("%s: last progress line %q", name, last)
			}
		}
	}
}

// An error from the caller stops the stream and comes back as it is; a
// model whose output does not fit its level is refused with its shape.
func TestStreamErrors(t *testing.T) {
	arch, _, enc := tinyEncoder(t)
	in := writeInput(t, t.TempDir(), "in.csv", atomsCSV)
	stop := fmt.Errorf("enough")
	calls := 0
	_, err := Stream(Options{Data: in}, runenv.Default(), Model{Level: PerAtom, Width: arch.Hidden,
		Forward: func(g *graph.Graph) *torch.Tensor { return enc.Forward(g, false) }}, func(*Molecule) error {
		calls++
		return stop
	})
	if err != stop || calls != 1 {
		t.Errorf("error %v after %d calls, want %v after 1", err, calls, stop)
	}
	_, err = Stream(Options{Data: in}, runenv.Default(), Model{Level: PerMolecule, Width: arch.Hidden,
		Forward: func(g *graph.Graph) *torch.Tensor { return enc.Forward(g, false) }}, func(*Molecule) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "the model's output has shape [17 8], want [4 8]") {
		t.Errorf("per-atom outputs at the molecule level: error %v", err)
	}
}

// atomRecord is one record of a per-atom .npy file.
type atomRecord struct {
	row, atom, z int64
	e            []float32
}

// readAtomsNPY reads the structured .npy file EmbedAtoms writes for
// embeddings of width d, checking its dtype.
func readAtomsNPY(t *testing.T, path string, d int) []atomRecord {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	body := b[10+int(binary.LittleEndian.Uint16(b[8:10])):]
	descr := fmt.Sprintf("'descr': [('row', '<i8'), ('atom', '<i8'), ('atomic_num', '<i8'), ('e', '<f4', (%d,))]", d)
	if !strings.Contains(string(b[:len(b)-len(body)]), descr) {
		t.Fatalf("%s: header %q, want %s", path, b[:len(b)-len(body)], descr)
	}
	size := 24 + 4*d
	if len(body)%size != 0 {
		t.Fatalf("%s: %d bytes of records of %d", path, len(body), size)
	}
	var recs []atomRecord
	for p := body; len(p) > 0; p = p[size:] {
		r := atomRecord{
			row: int64(binary.LittleEndian.Uint64(p)), atom: int64(binary.LittleEndian.Uint64(p[8:])),
			z: int64(binary.LittleEndian.Uint64(p[16:])), e: make([]float32, d),
		}
		for j := range r.e {
			r.e[j] = math.Float32frombits(binary.LittleEndian.Uint32(p[24+4*j:]))
		}
		recs = append(recs, r)
	}
	return recs
}

// EmbedAtoms writes one record per atom: the molecules in input order,
// each one's atoms numbered 0… in RDKit's order with their atomic numbers,
// no record for a rejected row; the mean of a molecule's atom rows is
// Embed's graph embedding to float32 rounding; the CSV file holds the same
// numbers under the columns row, atom, atomic_num, e_0 …; and none of it
// depends on the chunk and batch sizes.
func TestEmbedAtomsMeansAreGraphEmbeddings(t *testing.T) {
	arch, state, _ := tinyEncoder(t)
	d := arch.Hidden
	dir := t.TempDir()
	in := writeInput(t, dir, "in.csv", atomsCSV)
	graphs := filepath.Join(dir, "graphs.npy")
	if _, err := Embed(arch, state, Options{Data: in}, runenv.Default(), graphs); err != nil {
		t.Fatal(err)
	}
	graph := readNPY(t, graphs)
	var first []atomRecord
	for _, size := range []struct{ chunk, batch int }{{0, 0}, {2, 1}, {3, 2}} {
		name := fmt.Sprintf("chunk %d batch %d", size.chunk, size.batch)
		npy, csvOut := filepath.Join(dir, "atoms.npy"), filepath.Join(dir, "atoms.csv")
		opt := Options{Data: in, Chunk: size.chunk, BatchSize: size.batch}
		rep, err := EmbedAtoms(arch, state, opt, runenv.Default(), npy)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Rows != 7 || rep.Invalid != 3 || rep.Written != 17 {
			t.Fatalf("%s: report %+v, want 7 rows, 3 invalid, 17 atom rows", name, rep)
		}
		recs := readAtomsNPY(t, npy, d)
		k := 0
		for _, row := range []int{1, 2, 4, 5} {
			z := atomsValid[row]
			sum := make([]float64, d)
			largest := 0.0
			for a := range z {
				r := recs[k]
				k++
				if r.row != int64(row) || r.atom != int64(a) || r.z != int64(z[a]) {
					t.Fatalf("%s: record %d is (row %d, atom %d, atomic_num %d), want (%d, %d, %d)", name, k-1, r.row, r.atom, r.z, row, a, z[a])
				}
				for j, v := range r.e {
					sum[j] += float64(v)
					largest = max(largest, math.Abs(float64(v)))
				}
			}
			// float32 rounding of a mean of len(z) values of at most largest.
			tol := float64(len(z)+1) * largest * 0x1p-23
			for j := range sum {
				mean, want := sum[j]/float64(len(z)), float64(graph[row*d+j])
				if math.Abs(mean-want) > tol {
					t.Errorf("%s: row %d e_%d: mean of the atoms %v, embed %v (tolerance %.2g)", name, row, j, mean, want, tol)
				}
			}
		}
		if k != len(recs) {
			t.Fatalf("%s: %d records, want %d", name, len(recs), k)
		}
		if first == nil {
			first = recs
		} else {
			for i := range recs {
				if err := closeTo(recs[i].e, first[i].e, 1e-5); err != nil {
					t.Errorf("%s: record %d differs from the default sizes' %v", name, i, err)
				}
			}
		}

		if _, err := EmbedAtoms(arch, state, opt, runenv.Default(), csvOut); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(csvOut)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := csv.NewReader(f).ReadAll()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(lines) != 1+len(recs) || strings.Join(lines[0][:4], ",") != "row,atom,atomic_num,e_0" || lines[0][3+d-1] != "e_7" || len(lines[0]) != 3+d {
			t.Fatalf("%s: CSV of %d lines, header %q", name, len(lines), lines[0])
		}
		for i, r := range recs {
			line := lines[i+1]
			if line[0] != strconv.FormatInt(r.row, 10) || line[1] != strconv.FormatInt(r.atom, 10) || line[2] != strconv.FormatInt(r.z, 10) {
				t.Errorf("%s: CSV line %d %q, .npy record (%d, %d, %d)", name, i+2, line[:3], r.row, r.atom, r.z)
			}
			for j, v := range r.e {
				if x, err := strconv.ParseFloat(line[3+j], 32); err != nil || float32(x) != v {
					t.Errorf("%s: CSV line %d e_%d %q, .npy %v", name, i+2, j, line[3+j], v)
				}
			}
		}
	}
}

// Per-atom output has no rows for rejected rows, so leaving them out is no
// option: asking is refused before anything is written.
func TestEmbedAtomsRefusesSkipInvalid(t *testing.T) {
	arch, state, _ := tinyEncoder(t)
	dir := t.TempDir()
	in := writeInput(t, dir, "in.csv", atomsCSV)
	_, err := EmbedAtoms(arch, state, Options{Data: in, SkipInvalid: true}, runenv.Default(), filepath.Join(dir, "a.csv"))
	if err == nil || !strings.Contains(err.Error(), "per-atom output never holds rejected rows") {
		t.Fatalf("error %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("left %v behind", entries)
	}
}
