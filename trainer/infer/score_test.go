package infer

import (
	"encoding/binary"
	"encoding/csv"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/internal/testenv"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/ops"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/nn"
	"github.com/micrograph/micrograph/trainer/runenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunWithPrivateUserCache(m)) }

// tinyEncoder is a randomly initialised 2-layer encoder of width 8 and its
// state, named as in an exported encoder.
func tinyEncoder(t *testing.T) (model.EncoderConfig, []torch.Named, *model.DeeperGCN) {
	t.Helper()
	arch := model.EncoderConfig{Hidden: 8, Layers: 2, MLPLayers: 1, T: 1}
	torch.ManualSeed(3)
	store := nn.NewStore(torch.CPU, torch.Float32)
	t.Cleanup(store.Free)
	enc := model.NewDeeperGCN(store.Root(), arch)
	t.Cleanup(enc.Free)
	return arch, store.State(), enc
}

// readNPY is the float32 values of a .npy file matrixfile wrote (after its
// header of 128 bytes), row-major.
func readNPY(t *testing.T, path string) []float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	body := b[128:]
	out := make([]float32, len(body)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(body[4*i:]))
	}
	return out
}

// streamCSV has invalid rows at a chunk boundary (rows 1 and 2 with chunks
// of 2 rows), at the start of a chunk and at the end of the file.
const streamCSV = "smiles\nCCO\nC1CC\nQ\nc1ccccc1O\nCC(=O)Nc1ccccc1\nCCN(CC)CC\nC(C)(C)(C)(C)C\n"

// Row i of the output is input row i whatever the chunk and batch sizes (the
// invalid rows NaN), and each valid row is the embedding the encoder gives
// the molecule on its own.
func TestEmbedKeepsRowOrderAcrossChunks(t *testing.T) {
	arch, state, enc := tinyEncoder(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(in, []byte(streamCSV), 0o644); err != nil {
		t.Fatal(err)
	}
	valid := []int{0, 3, 4, 5}
	var want [][]float32 // each valid molecule embedded alone
	for _, i := range valid {
		smiles := strings.Split(streamCSV, "\n")[i+1]
		ds, kept, _, err := data.FeaturizeRows([]data.Row{{SMILES: smiles}}, 1, data.Limits{})
		if err != nil || len(kept) != 1 {
			t.Fatalf("%s: %v", smiles, err)
		}
		var b feed.Batch
		if err := feed.Collate(ds, []int32{0}, &b); err != nil {
			t.Fatal(err)
		}
		g := b.Graph(torch.CPU)
		want = append(want, torch.NoGradValue(func() []float32 { return torch.ToSlice[float32](ops.GraphPool(enc.Forward(g, false), g, ops.MeanPool)) }))
	}
	for _, size := range []struct{ chunk, batch int }{{2, 1}, {3, 2}, {0, 0}} {
		out := filepath.Join(dir, "e.npy")
		var invalid []data.Rejection
		opt := Options{Data: in, Chunk: size.chunk, BatchSize: size.batch, RDKitWorkers: 1,
			Rejected: func(r data.Rejection) { invalid = append(invalid, r) }}
		rep, err := Embed(arch, state, opt, runenv.Default(), out)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Rows != 7 || rep.Written != 7 || rep.Invalid != 3 || len(invalid) != 3 ||
			invalid[0].Row != 1 || invalid[1].Row != 2 || invalid[2].Row != 6 || invalid[2].Line != 8 {
			t.Fatalf("chunk %d: report %+v, rejected %+v", size.chunk, rep, invalid)
		}
		got := readNPY(t, out)
		if len(got) != 7*8 {
			t.Fatalf("chunk %d: %d values, want 7×8", size.chunk, len(got))
		}
		for i := range 7 {
			row := got[i*8 : (i+1)*8]
			k := slices.Index(valid, i)
			if k < 0 {
				if !slices.ContainsFunc(row, func(v float32) bool { return v == v }) {
					continue
				}
				t.Errorf("chunk %d: invalid row %d = %v, want NaN", size.chunk, i, row)
				continue
			}
			for j := range row {
				if d := math.Abs(float64(row[j] - want[k][j])); d > 1e-5 {
					t.Errorf("chunk %d: row %d [%d] = %v, alone %v", size.chunk, i, j, row[j], want[k][j])
				}
			}
		}
	}
}

// A dataset folder is scored molecule by molecule in its order, and a CSV
// file that names the same molecules gives the same rows: the same values
// in a .npy, the same row numbers, SMILES and values in a .csv, chunk after
// chunk.
func TestEmbedFolderMatchesCSV(t *testing.T) {
	arch, state, _ := tinyEncoder(t)
	dir := t.TempDir()
	folder := filepath.Join(dir, "synth")
	if _, err := synthetic.Write(folder, synthetic.Options{Molecules: 40, Seed: 2}); err != nil {
		t.Fatal(err)
	}
	d, _, err := data.Load(folder, data.LoadOptions{CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	csv := filepath.Join(dir, "synth.csv")
	if err := os.WriteFile(csv, []byte("smiles\n"+strings.Join(d.SMILES, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, b := filepath.Join(dir, "a.npy"), filepath.Join(dir, "b.npy")
	if _, err := Embed(arch, state, Options{Data: folder, Chunk: 16}, runenv.Env{Device: torch.CPU, Workers: 2, Dataset: data.OpenOptions{CacheDir: dir}}, a); err != nil {
		t.Fatal(err)
	}
	if _, err := Embed(arch, state, Options{Data: csv, Chunk: 7}, runenv.Default(), b); err != nil {
		t.Fatal(err)
	}
	x, y := readNPY(t, a), readNPY(t, b)
	if len(x) != 40*8 || len(y) != len(x) {
		t.Fatalf("%d and %d values, want 320", len(x), len(y))
	}
	for i := range x {
		if math.Abs(float64(x[i]-y[i])) > 1e-5 {
			t.Fatalf("value %d: folder %v, CSV %v", i, x[i], y[i])
		}
	}
	// As .csv, past the first chunk too: the same rows, SMILES and values.
	a, b = filepath.Join(dir, "a.csv"), filepath.Join(dir, "b.csv")
	if _, err := Embed(arch, state, Options{Data: folder, Chunk: 16}, runenv.Env{Device: torch.CPU, Workers: 2, Dataset: data.OpenOptions{CacheDir: dir}}, a); err != nil {
		t.Fatal(err)
	}
	if _, err := Embed(arch, state, Options{Data: csv, Chunk: 7}, runenv.Default(), b); err != nil {
		t.Fatal(err)
	}
	fromFolder, fromCSV := readCSVFile(t, a), readCSVFile(t, b)
	if len(fromFolder) != 41 || len(fromCSV) != 41 || !slices.Equal(fromFolder[0], fromCSV[0]) {
		t.Fatalf("%d and %d lines, headers %q and %q", len(fromFolder), len(fromCSV), fromFolder[0], fromCSV[0])
	}
	for i := 1; i <= 40; i++ {
		f, c := fromFolder[i], fromCSV[i]
		if f[0] != strconv.Itoa(i-1) || c[0] != f[0] || f[1] != d.SMILES[i-1] || c[1] != f[1] {
			t.Fatalf("line %d: folder %q %q, CSV %q %q; want row %d, %q", i, f[0], f[1], c[0], c[1], i-1, d.SMILES[i-1])
		}
		for j := 2; j < len(f); j++ {
			u, _ := strconv.ParseFloat(f[j], 64)
			v, _ := strconv.ParseFloat(c[j], 64)
			if math.Abs(u-v) > 1e-5 {
				t.Fatalf("line %d, column %d: folder %v, CSV %v", i, j, u, v)
			}
		}
	}
}

// readCSVFile is every record of a CSV file.
func readCSVFile(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	records, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return records
}

// A .npy output cannot leave rows out: it has no row column.
func TestSkipInvalidNeedsCSV(t *testing.T) {
	arch, state, _ := tinyEncoder(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.csv")
	os.WriteFile(in, []byte(streamCSV), 0o644)
	_, err := Embed(arch, state, Options{Data: in, SkipInvalid: true}, runenv.Default(), filepath.Join(dir, "e.npy"))
	if err == nil || !strings.Contains(err.Error(), "has no row column") {
		t.Fatalf("error %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("left %v behind", entries)
	}
}

// A pre-training corpus keeps no SMILES: embedding one says so and what to
// give instead, and writes nothing.
func TestEmbedRefusesACorpus(t *testing.T) {
	arch, state, _ := tinyEncoder(t)
	dir := t.TempDir()
	corpus := filepath.Join(dir, "corpus")
	if err := os.Mkdir(corpus, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(corpus, data.CorpusManifestFile), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "e.npy")
	_, err := Embed(arch, state, Options{Data: corpus}, runenv.Default(), out)
	if err == nil || !strings.Contains(err.Error(), "is a pre-training corpus") || !strings.Contains(err.Error(), "give the CSV it was made from") {
		t.Fatalf("error %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s was written (%v)", out, err)
	}
}
