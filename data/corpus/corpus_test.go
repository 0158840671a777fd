package corpus

import (
	"bytes"
	"encoding/binary"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/internal/failpoint"
)

// corpusRows is a SMILES file of n synthetic molecules with, spread among
// them, rows RDKit rejects and rows the pre-training filter removes for each
// of its reasons.
func corpusRows(n int) []string {
	odd := []string{
		"C1CC",                   // unclosed ring: rejected
		"CC",                     // too small for η ≥ 3
		"[Na+].[K+].[Cl-].[Cl-]", // no bonds
		"CCCCO.[Na+]",            // an isolated atom
		"not_smiles",             // rejected
		"C",                      // one atom, no bonds
	}
	table := synthetic.Table(synthetic.Options{Molecules: n, Seed: 5})
	rows := []string{}
	for i, s := range table.SMILES {
		rows = append(rows, s)
		if i%97 == 13 {
			rows = append(rows, odd[i/97%len(odd)])
		}
	}
	return rows
}

func writeSMILES(t *testing.T, dir string, rows []string) string {
	t.Helper()
	path := filepath.Join(dir, "corpus.csv")
	var b strings.Builder
	b.WriteString("mol_id,smiles\n")
	for i, s := range rows {
		fmt.Fprintf(&b, "%d,%s\n", i, s)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// referenceDataset featurises rows all at once, in memory, as the old path
// does: the molecules a corpus must hold, in order, with their source rows.
func referenceDataset(t *testing.T, rows []string) (*data.Dataset, []int, []data.Rejection) {
	t.Helper()
	in := make([]data.Row, len(rows))
	for i, s := range rows {
		in[i] = data.Row{Index: i, Line: i + 2, SMILES: s}
	}
	d, kept, rejected, err := data.FeaturizeRows(in, 2, data.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return d, kept, rejected
}

func featurizeCorpus(t *testing.T, src, out string, opt Options) *Report {
	t.Helper()
	rep, err := Featurize(src, out, opt)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func openCorpus(t *testing.T, dir string) *Corpus {
	t.Helper()
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// folderBytes reads every file of dir, by name.
func folderBytes(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, e := range entries {
		if files[e.Name()], err = os.ReadFile(filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

func sameFolder(t *testing.T, what, got, want string) {
	t.Helper()
	g, w := folderBytes(t, got), folderBytes(t, want)
	for name, wb := range w {
		if gb, ok := g[name]; !ok {
			t.Errorf("%s: %s is missing", what, name)
		} else if !bytes.Equal(gb, wb) {
			t.Errorf("%s: %s differs (%d bytes, want %d)", what, name, len(gb), len(wb))
		}
	}
	for name := range g {
		if _, ok := w[name]; !ok {
			t.Errorf("%s: unexpected file %s", what, name)
		}
	}
}

// Every molecule read back from the mapped shards equals the in-memory
// featurisation of the same rows, with its source row; the rejected rows
// are the same; the filter read from the stored keys keeps and counts
// exactly what PretrainFilter does on the in-memory dataset, for several η.
func TestCorpusRoundTrip(t *testing.T) {
	rows := corpusRows(1000)
	dir := t.TempDir()
	src := writeSMILES(t, dir, rows)
	ref, kept, rejected := referenceDataset(t, rows)
	out := filepath.Join(dir, "corpus")
	rep := featurizeCorpus(t, src, out, Options{ShardRows: 300, Workers: 2})

	m := rep.Manifest
	nrows, molecules, atoms, bonds, nrej, _ := m.Totals()
	if !m.Complete || len(m.Shards) != 4 || rep.Written != 4 || rep.Resumed != 0 || nrows != len(rows) || m.Shards[3].Rows != len(rows)-900 {
		t.Fatalf("manifest: complete %v, %d shards (%d written, %d resumed), %d rows; want 4 shards of 300, 300, 300, %d rows",
			m.Complete, len(m.Shards), rep.Written, rep.Resumed, nrows, len(rows)-900)
	}
	if molecules != ref.NumGraphs() || atoms != int64(ref.TotalAtoms()) || bonds != int64(ref.TotalBonds()) || nrej != len(rejected) || nrej != 4 {
		t.Fatalf("totals: %d molecules, %d atoms, %d bonds, %d rejected; want %d, %d, %d, %d (4)",
			molecules, atoms, bonds, nrej, ref.NumGraphs(), ref.TotalAtoms(), ref.TotalBonds(), len(rejected))
	}

	c := openCorpus(t, out)
	if c.NumGraphs() != ref.NumGraphs() || c.NumTasks() != 0 || c.HasAtomGroups() {
		t.Fatalf("corpus: %d molecules, %d tasks; want %d, 0", c.NumGraphs(), c.NumTasks(), ref.NumGraphs())
	}
	// Read five times over, across the drops of mapped pages (dropEvery).
	for g := range 5 * ref.NumGraphs() {
		g %= ref.NumGraphs()
		got, err := c.Graph(g)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := ref.Graph(g)
		if !slices.Equal(got.AtomFeat, want.AtomFeat) || !slices.Equal(got.BondAtoms, want.BondAtoms) || !slices.Equal(got.BondFeat, want.BondFeat) {
			t.Fatalf("molecule %d (row %d) differs from the in-memory featurisation", g, kept[g])
		}
		if c.SourceRow(g) != int64(kept[g]) {
			t.Fatalf("molecule %d: source row %d, want %d", g, c.SourceRow(g), kept[g])
		}
	}
	if c.reads.Load() < dropEvery {
		t.Fatalf("%d molecules read: no drop of the mapped pages was crossed", c.reads.Load())
	}
	if _, err := c.Graph(ref.NumGraphs()); err == nil {
		t.Error("a molecule past the end was read")
	}

	var list strings.Builder
	w := csv.NewWriter(&list)
	w.Write([]string{"row", "line", "smiles", "reason"})
	for _, r := range rejected {
		w.Write([]string{fmt.Sprint(r.Row), fmt.Sprint(r.Line), r.SMILES, r.Reason})
	}
	w.Flush()
	if got, _ := os.ReadFile(filepath.Join(out, data.RejectFile)); string(got) != list.String() {
		t.Errorf("rejected.csv:\n%s\nwant:\n%s", got, list.String())
	}
	if n, err := data.CountRejections(out); n != 4 || err != nil {
		t.Errorf("CountRejections: %d, %v; want 4", n, err)
	}

	for _, eta := range []int{1, 3, 4, 20, 60} {
		want, wantStats := data.PretrainFilter(ref, ref.All(), eta)
		got, stats := c.PretrainFilter(eta)
		if !slices.Equal(got, want) || stats != wantStats {
			t.Errorf("η=%d: kept %d %+v, want %d %+v", eta, len(got), stats, len(want), wantStats)
		}
		if eta == 3 && (stats.TooSmall == 0 || stats.NoBonds == 0 || stats.IsolatedAtoms == 0 || stats.Kept < 900) {
			t.Errorf("η=3: %+v: the rows do not exercise every rule", stats)
		}
	}
}

// The shards are the same bytes with 1 and 3 workers, and featurising a
// complete corpus again changes nothing.
func TestCorpusIndependentOfWorkers(t *testing.T) {
	dir := t.TempDir()
	src := writeSMILES(t, dir, corpusRows(600))
	one, three := filepath.Join(dir, "one"), filepath.Join(dir, "three")
	featurizeCorpus(t, src, one, Options{ShardRows: 250, Workers: 1})
	featurizeCorpus(t, src, three, Options{ShardRows: 250, Workers: 3})
	sameFolder(t, "3 workers against 1", three, one)

	again := featurizeCorpus(t, src, three, Options{ShardRows: 250, Workers: 2})
	if again.Written != 0 || again.Resumed != 3 {
		t.Errorf("featurising a complete corpus again wrote %d shards and kept %d; want 0 and 3", again.Written, again.Resumed)
	}
	sameFolder(t, "featurised again", three, one)
}

// corpusChildEnv makes the test binary featurise a corpus (TestCorpusChild),
// so that a test can kill it at a failpoint.
const corpusChildEnv = "MICROGRAPH_TEST_CORPUS"

type corpusJob struct {
	Src, Out  string
	ShardRows int
}

func TestCorpusChild(t *testing.T) {
	job := os.Getenv(corpusChildEnv)
	if job == "" {
		t.Skip("run by TestCorpusResumesAfterKill")
	}
	var j corpusJob
	if err := json.Unmarshal([]byte(job), &j); err != nil {
		t.Fatal(err)
	}
	featurizeCorpus(t, j.Src, j.Out, Options{ShardRows: j.ShardRows, Workers: 2})
}

// killedCorpus featurises src into out in a child process killed by SIGKILL
// at the failpoint.
func killedCorpus(t *testing.T, src, out string, shardRows int, point string) {
	t.Helper()
	job, _ := json.Marshal(corpusJob{Src: src, Out: out, ShardRows: shardRows})
	cmd := exec.Command(os.Args[0], "-test.run=^TestCorpusChild$")
	cmd.Env = append(os.Environ(), corpusChildEnv+"="+string(job), failpoint.Env+"="+point)
	err := cmd.Run()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the failpoint %q did not kill the featurisation: %v", point, err)
	}
}

// interruptedCopy copies the corpus ref into out as a run stopped after its
// first k shards would leave it: the manifest lists k shards and is not
// complete, rejected.csv is not written yet, and later shard files are
// there but not recorded (killed between renaming a shard and recording it).
func interruptedCopy(t *testing.T, ref, out string, k int) {
	t.Helper()
	os.MkdirAll(out, 0o755)
	for name, b := range folderBytes(t, ref) {
		if name != data.RejectFile && name != data.CorpusManifestFile {
			os.WriteFile(filepath.Join(out, name), b, 0o644)
		}
	}
	m, err := ReadManifest(ref)
	if err != nil {
		t.Fatal(err)
	}
	m.Complete, m.Shards = false, m.Shards[:k]
	if err := writeManifest(out, m); err != nil {
		t.Fatal(err)
	}
}

// Killed by SIGKILL while writing shard 2 and run again, the featurisation
// keeps the two complete shards, writes the rest, and the folder is byte for
// byte the uninterrupted run's. So does a corpus whose run stopped after
// renaming shard 1 but before recording it; and a recorded shard damaged
// since is featurised again, with every shard after it.
func TestCorpusResumesAfterKill(t *testing.T) {
	dir := t.TempDir()
	src := writeSMILES(t, dir, corpusRows(400))
	ref := filepath.Join(dir, "uninterrupted")
	featurizeCorpus(t, src, ref, Options{ShardRows: 100, Workers: 2})

	killed := filepath.Join(dir, "killed")
	killedCorpus(t, src, killed, 100, "before rename shard-00002.bin")
	m, err := ReadManifest(killed)
	if err != nil {
		t.Fatal(err)
	}
	if m.Complete || len(m.Shards) != 2 {
		t.Fatalf("after the kill the manifest is complete %v with %d shards; want 2", m.Complete, len(m.Shards))
	}
	if left, _ := filepath.Glob(filepath.Join(killed, ".shard-00002.bin.tmp-*")); len(left) != 1 {
		t.Fatalf("the kill left %v, want the temporary file of shard 2", left)
	}
	if _, err := Open(killed); err == nil || !strings.Contains(err.Error(), "incomplete") {
		t.Errorf("opening the interrupted corpus: %v", err)
	}

	unrecorded := filepath.Join(dir, "unrecorded")
	interruptedCopy(t, ref, unrecorded, 1)
	damaged := filepath.Join(dir, "damaged")
	interruptedCopy(t, ref, damaged, 3)
	shard1 := filepath.Join(damaged, "shard-00001.bin")
	blob, _ := os.ReadFile(shard1)
	blob[len(blob)/2] ^= 1
	os.WriteFile(shard1, blob, 0o644)

	tests := []struct {
		name, out string
		kept      int
	}{
		{"killed writing shard 2", killed, 2},
		{"shard 1 not recorded", unrecorded, 1},
		{"recorded shard 1 damaged", damaged, 1},
	}
	for _, tc := range tests {
		rep := featurizeCorpus(t, src, tc.out, Options{ShardRows: 100, Workers: 1})
		if rep.Resumed != tc.kept || rep.Written != 5-tc.kept {
			t.Errorf("%s: the rerun kept %d shards and wrote %d; want %d and %d", tc.name, rep.Resumed, rep.Written, tc.kept, 5-tc.kept)
		}
		sameFolder(t, tc.name, tc.out, ref)
	}
}

// A folder holding a corpus of another file or with other options is not
// continued, and one that holds something else is not touched; a shard that
// disagrees with the manifest is refused when the corpus is opened.
func TestCorpusRefusals(t *testing.T) {
	dir := t.TempDir()
	rows := corpusRows(100)
	src := writeSMILES(t, dir, rows)
	out := filepath.Join(dir, "corpus")
	featurizeCorpus(t, src, out, Options{ShardRows: 50})
	other := filepath.Join(dir, "other.csv")
	os.WriteFile(other, []byte("smiles\nCCO\n"), 0o644)
	busy := filepath.Join(dir, "busy")
	os.MkdirAll(busy, 0o755)
	os.WriteFile(filepath.Join(busy, "notes.txt"), nil, 0o644)

	tests := []struct {
		name, src, out string
		opt            Options
		want           string
	}{
		{"other shard size", src, out, Options{ShardRows: 60}, "60 rows per shard"},
		{"other file", other, out, Options{ShardRows: 50}, "holds a corpus of corpus.csv"},
		{"other limits", src, out, Options{ShardRows: 50, Limits: data.Limits{MaxAtoms: 30}}, "choose a new folder"},
		{"not a corpus", src, busy, Options{ShardRows: 50}, "holds no corpus"},
		{"negative shard size", src, filepath.Join(dir, "new"), Options{ShardRows: -1}, "shard size -1 rows"},
		{"no such column", src, filepath.Join(dir, "new"), Options{SMILESColumn: "formula"}, `smiles_column "formula" is not a column of `},
	}
	for _, tc := range tests {
		if _, err := Featurize(tc.src, tc.out, tc.opt); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); err == nil {
		t.Error("a refused featurisation made its folder")
	}

	if _, err := data.Open(out, data.OpenOptions{CacheDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "only pretrain reads it") {
		t.Errorf("Open on a corpus: %v", err)
	}

}

// damageShard rewrites shard k of the corpus dir as damage makes it, and
// returns the shard's name and its bytes before.
func damageShard(t *testing.T, dir string, k int, damage func(blob []byte, lay shardSizes) []byte) (string, []byte) {
	t.Helper()
	m, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	info := m.Shards[k]
	path := filepath.Join(dir, info.File)
	blob, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lay := layout(int64(info.Molecules), info.Atoms, info.Bonds)
	if err := os.WriteFile(path, damage(slices.Clone(blob), lay), 0o644); err != nil {
		t.Fatal(err)
	}
	return info.File, blob
}

// A shard damaged since featurisation (truncated, zeroed past its magic, a
// bond's atom index pushed out of range, one atom feature's bit flipped) is
// refused when the corpus is opened, in one line naming the corpus folder
// and the shard; the bit flips were read as molecules before the CRC check.
func TestOpenCorpusRefusesDamagedShard(t *testing.T) {
	dir := t.TempDir()
	src := writeSMILES(t, dir, corpusRows(100))
	out := filepath.Join(dir, "corpus")
	featurizeCorpus(t, src, out, Options{ShardRows: 50})
	tests := []struct {
		name   string
		damage func([]byte, shardSizes) []byte
		want   string
	}{
		{"truncated", func(b []byte, _ shardSizes) []byte { return b[:len(b)-8] }, "shard-00001.bin: 24392 bytes, the manifest says 24400"},
		{"zeroed", func(b []byte, _ shardSizes) []byte { clear(b[8:]); return b }, "shard-00001.bin is damaged: its CRC-32C is"},
		{"bond atom out of range", func(b []byte, lay shardSizes) []byte {
			binary.LittleEndian.PutUint32(b[lay.bondAtoms+40:], 510)
			return b
		}, "shard-00001.bin is damaged: its CRC-32C is"},
		{"atom feature bit", func(b []byte, lay shardSizes) []byte { b[lay.atomFeat+9*7] ^= 2; return b }, "shard-00001.bin is damaged: its CRC-32C is"},
	}
	for _, tc := range tests {
		file, blob := damageShard(t, out, 1, tc.damage)
		want := "corpus " + out + ": " + tc.want
		_, err := Open(out)
		if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line starting %q", tc.name, err, want)
		}
		os.WriteFile(filepath.Join(out, file), blob, 0o644)
	}
	c := openCorpus(t, out)
	if c.NumGraphs() != 100 {
		t.Errorf("the repaired corpus holds %d molecules, want 100", c.NumGraphs())
	}
}

// featurize run again on a complete corpus with a damaged shard featurises
// that shard and the ones after it again, names it, and leaves the folder
// byte for byte the undamaged corpus; on an intact one it writes nothing.
func TestCorpusRedoesDamagedShard(t *testing.T) {
	dir := t.TempDir()
	src := writeSMILES(t, dir, corpusRows(400))
	ref := filepath.Join(dir, "ref")
	featurizeCorpus(t, src, ref, Options{ShardRows: 100})
	tests := []struct {
		name    string
		damage  func([]byte, shardSizes) []byte
		written int
		damaged string
	}{
		{"intact", nil, 0, ""},
		{"zeroed shard 2", func(b []byte, _ shardSizes) []byte { clear(b); return b }, 3, "shard-00002.bin is damaged: its CRC-32C is"},
		{"bit flip in shard 2", func(b []byte, lay shardSizes) []byte { b[lay.bondFeat] ^= 1; return b }, 3, "shard-00002.bin is damaged: its CRC-32C is"},
	}
	for _, tc := range tests {
		out := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
		os.MkdirAll(out, 0o755)
		for name, b := range folderBytes(t, ref) {
			os.WriteFile(filepath.Join(out, name), b, 0o644)
		}
		if tc.damage != nil {
			damageShard(t, out, 2, tc.damage)
		}
		rep := featurizeCorpus(t, src, out, Options{ShardRows: 100})
		if rep.Written != tc.written || rep.Resumed != 5-tc.written || !strings.HasPrefix(rep.Damaged, tc.damaged) || (tc.damaged == "") != (rep.Damaged == "") {
			t.Errorf("%s: the rerun kept %d shards, wrote %d, damaged %q; want %d, %d, %q", tc.name, rep.Resumed, rep.Written, rep.Damaged, 5-tc.written, tc.written, tc.damaged)
		}
		sameFolder(t, tc.name, out, ref)
		openCorpus(t, out)
	}
}

// A loader over the corpus yields the batches, molecule for molecule and
// value for value, of a loader over the in-memory dataset with the same
// seed, from the start and from a position mid-epoch, because both number
// the molecules in row order and the filter keeps the same ones.
func TestCorpusLoaderMatchesDataset(t *testing.T) {
	dir := t.TempDir()
	rows := corpusRows(700)
	src := writeSMILES(t, dir, rows)
	ref, _, _ := referenceDataset(t, rows)
	out := filepath.Join(dir, "corpus")
	featurizeCorpus(t, src, out, Options{ShardRows: 128, Workers: 2})
	c := openCorpus(t, out)
	refIdx, _ := data.PretrainFilter(ref, ref.All(), 4)
	idx, _ := c.PretrainFilter(4)

	for _, start := range []feed.Position{{}, {Epoch: 1, Batch: 7}} {
		cfg := feed.LoaderConfig{BatchSize: 32, Shuffle: true, Seed: 11, DropLast: true, Epochs: 3, Start: start, Workers: 2}
		cfg.Dataset, cfg.Indices = ref, refIdx
		want := newLoader(t, cfg)
		cfg.Dataset, cfg.Indices = c, idx
		got := newLoader(t, cfg)
		n := 0
		for ; ; n++ {
			wb, werr := want.Next()
			gb, gerr := got.Next()
			if werr != nil || gerr != nil {
				if werr == nil || gerr == nil || werr.Error() != gerr.Error() {
					t.Fatalf("from %v, batch %d: errors %v and %v", start, n, gerr, werr)
				}
				break
			}
			if gb.Pos != wb.Pos {
				t.Fatalf("from %v: position %v, want %v", start, gb.Pos, wb.Pos)
			}
			checkBatch(t, gb, wb)
			want.Release(wb)
			got.Release(gb)
		}
		if wantN := 3*(len(refIdx)/32) - (start.Epoch*(len(refIdx)/32) + start.Batch); n != wantN {
			t.Errorf("from %v: %d batches, want %d", start, n, wantN)
		}
	}
}

// newLoader is a loader closed when the test ends.
func newLoader(t *testing.T, cfg feed.LoaderConfig) *feed.Loader {
	t.Helper()
	l, err := feed.NewLoader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// checkBatch compares two batches field by field (as data/feed's tests do).
func checkBatch(t *testing.T, got, want *feed.Batch) {
	t.Helper()
	fields := []struct {
		name     string
		got, wnt any
	}{
		{"Graphs", got.Graphs, want.Graphs}, {"X", got.X, want.X}, {"EdgeSrc", got.EdgeSrc, want.EdgeSrc},
		{"EdgeDst", got.EdgeDst, want.EdgeDst}, {"RowPtr", got.RowPtr, want.RowPtr}, {"EdgeAttr", got.EdgeAttr, want.EdgeAttr},
		{"NodeGraph", got.NodeGraph, want.NodeGraph}, {"GraphPtr", got.GraphPtr, want.GraphPtr},
		{"Labels", got.Labels, want.Labels}, {"LabelMask", got.LabelMask, want.LabelMask}, {"AtomGroup", got.AtomGroup, want.AtomGroup},
		{"MaxAtoms", got.MaxAtoms, want.MaxAtoms}, {"Nodes", got.Nodes, want.Nodes}, {"InDegree", got.InDegree, want.InDegree},
		{"PadIndex", got.PadIndex, want.PadIndex}, {"PairLater", got.PairLater, want.PairLater},
		{"PairEarlier", got.PairEarlier, want.PairEarlier},
	}
	for _, f := range fields {
		if !reflect.DeepEqual(f.got, f.wnt) {
			t.Errorf("%s = %v, want %v", f.name, f.got, f.wnt)
		}
	}
}
