package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/internal/testenv"
)

// embed --atoms writes a .npy file numpy.load reads as one record per atom
// of the valid rows (row 1, rejected, listed on stderr by line and absent):
// int64 row, atom (RDKit's order) and atomic_num, and a float32 e that the
// docs/pytorch.md snippet's atom_embeddings reproduces (to 1e-5), whose
// means per row are the snippet's graph embeddings; torch.from_numpy takes
// e as the page says.
func TestEmbedAtomsMatchesReadmeSnippet(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(in, []byte(scoreInput), 0o644); err != nil {
		t.Fatal(err)
	}
	encoder := writeTinyEncoder(t)
	npy := filepath.Join(dir, "atoms.npy")
	code, out, errs := runCLI(t, "embed", "--atoms", "--encoder", encoder, "--data", in, "--out", npy, "--threads", "1")
	if code != 0 || !strings.Contains(out, "embedded the atoms of 3 of 4 rows of in.csv into "+npy+" (20 atom rows; 1 invalid, listed on stderr, no rows)") ||
		errs != "micrograph: "+in+":3 (row 1) \"C1CC\": SMILES Parse Error: unclosed ring for input: 'C1CC'\n" {
		t.Fatalf("embed --atoms: status %d\n%s\n%s", code, out, errs)
	}
	inputs := pygInputs(t, dir, []string{"CCO", "c1ccccc1O", "CC(=O)Nc1ccccc1"})
	const harness = `
import sys
import numpy as np
a = np.load(sys.argv[2])
inp = json.load(open(sys.argv[3]))
x = torch.tensor(inp["x"]).view(-1, 9)
edge_index = torch.tensor([inp["src"], inp["dst"]])
edge_attr = torch.tensor(inp["edge_attr"]).view(-1, 3)
batch = torch.tensor(inp["batch"])
encoder = load_encoder(sys.argv[1])
with torch.no_grad():
    h = atom_embeddings(encoder, x, edge_index, edge_attr)
    g = graph_embeddings(encoder, x, edge_index, edge_attr, batch).numpy()
e = torch.from_numpy(a["e"])
rows, starts = np.unique(a["row"], return_index=True)
means = np.stack([m.mean(0) for m in np.split(a["e"], starts[1:])])
print(json.dumps({"names": list(a.dtype.names), "dtypes": [str(a.dtype[n].base) for n in a.dtype.names],
                  "e_shape": list(e.shape), "row": a["row"].tolist(), "atom": a["atom"].tolist(),
                  "atomic_num": a["atomic_num"].tolist(), "rows": rows.tolist(),
                  "diff": float(((e - h).abs() / h.abs().clamp(min=1)).max()),
                  "mean_diff": float(np.max(np.abs(means - g) / np.maximum(1, np.abs(g))))}))
`
	var got struct {
		Names, Dtypes []string
		EShape        []int `json:"e_shape"`
		Row, Atom     []int
		AtomicNum     []int `json:"atomic_num"`
		Rows          []int
		Diff          float64
		MeanDiff      float64 `json:"mean_diff"`
	}
	runSnippet(t, dir, harness, &got, encoder, npy, inputs)
	// CCO: C C O; phenol: six aromatic C, then O; acetanilide: C C O N, six aromatic C.
	wantRow := slices.Concat(slices.Repeat([]int{0}, 3), slices.Repeat([]int{2}, 7), slices.Repeat([]int{3}, 10))
	wantAtom := slices.Concat([]int{0, 1, 2}, []int{0, 1, 2, 3, 4, 5, 6}, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	wantZ := []int{6, 6, 8, 6, 6, 6, 6, 6, 6, 8, 6, 6, 8, 7, 6, 6, 6, 6, 6, 6}
	if !slices.Equal(got.Names, []string{"row", "atom", "atomic_num", "e"}) || !slices.Equal(got.Dtypes, []string{"int64", "int64", "int64", "float32"}) ||
		!slices.Equal(got.EShape, []int{20, 16}) || !slices.Equal(got.Rows, []int{0, 2, 3}) ||
		!slices.Equal(got.Row, wantRow) || !slices.Equal(got.Atom, wantAtom) || !slices.Equal(got.AtomicNum, wantZ) {
		t.Fatalf("numpy sees %+v;\nwant fields row, atom, atomic_num, e (int64 ×3, float32), e 20×16, rows %v, atoms %v, atomic numbers %v",
			got, wantRow, wantAtom, wantZ)
	}
	t.Logf("largest difference from the docs/pytorch.md snippet: atoms %.2g, means %.2g", got.Diff, got.MeanDiff)
	if got.Diff > 1e-5 || got.MeanDiff > 1e-5 {
		t.Errorf("embed --atoms and the docs/pytorch.md snippet differ by %g (atoms), %g (means against graph_embeddings)", got.Diff, got.MeanDiff)
	}
}

// SIGINT or SIGTERM while embed writes a large output ends it with the
// shell's status for the signal (130, 143) and leaves nothing: neither the
// output nor its temporary file, whose growth past its first megabyte
// shows that rows were being written when the signal came.
func TestEmbedInterruptedLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("takes a few seconds")
	}
	dir := t.TempDir()
	table := synthetic.Table(synthetic.Options{Molecules: 2000, Seed: 7})
	var b strings.Builder
	b.WriteString("smiles\n")
	for range 50 { // 100,000 rows
		for _, s := range table.SMILES {
			b.WriteString(s + "\n")
		}
	}
	in := filepath.Join(dir, "big.csv")
	if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	encoder := writeTinyEncoder(t)
	for _, tc := range []struct {
		sig   syscall.Signal
		extra []string
	}{
		{syscall.SIGINT, []string{"--atoms"}},
		{syscall.SIGTERM, []string{"--atoms"}},
		{syscall.SIGINT, nil},
	} {
		outDir := t.TempDir()
		out := filepath.Join(outDir, "e.csv")
		c := exec.Command(os.Args[0], append([]string{"embed", "--encoder", encoder, "--data", in, "--out", out,
			"--device", "cpu", "--threads", "1", "--rdkit-workers", "1"}, tc.extra...)...)
		c.Env = append(os.Environ(), asMainEnv+"=1")
		var stderr strings.Builder
		c.Stderr = &stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		hang := testenv.HangReport(t) // the waits are for events; this only reports a hang
		for ; ; time.Sleep(20 * time.Millisecond) {
			tmp, _ := filepath.Glob(filepath.Join(outDir, ".e.csv.tmp-*"))
			if len(tmp) == 1 {
				if st, err := os.Stat(tmp[0]); err == nil && st.Size() > 1<<20 {
					break
				}
			}
			select {
			case err := <-done:
				t.Fatalf("%v %v: embed ended before writing its first megabyte: %v, stderr %q", tc.sig, tc.extra, err, stderr.String())
			default:
			}
			select {
			case <-hang:
				c.Process.Kill()
				<-done
				t.Fatalf("%v %v: no megabyte written; stderr %q", tc.sig, tc.extra, stderr.String())
			default:
			}
		}
		c.Process.Signal(tc.sig)
		var err error
		select {
		case err = <-done:
		case <-hang:
			c.Process.Kill()
			<-done
			t.Fatalf("%v %v: embed went on after the signal", tc.sig, tc.extra)
		}
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 128+int(tc.sig) {
			t.Errorf("%v %v: %v, want exit status %d", tc.sig, tc.extra, err, 128+int(tc.sig))
		}
		if entries, _ := os.ReadDir(outDir); len(entries) != 0 {
			t.Errorf("%v %v left %v behind", tc.sig, tc.extra, entries)
		}
	}
}
