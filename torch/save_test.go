package torch

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/internal/testenv"
	"github.com/micrograph/micrograph/torch/internal/libtorchtest"
	"github.com/micrograph/micrograph/torch/internal/ptfile"
)

// rawBytes is a tensor's contiguous host bytes, to compare bit for bit.
func rawBytes(t *Tensor) []byte {
	f, err := fileTensor(t)
	if err != nil {
		panic(err)
	}
	return f.Data
}

// sampleState has every dtype Save supports, a 0-d, an empty and a
// non-contiguous tensor, NaN and signed zeros.
func sampleState() []Named {
	nan := float32(0)
	nan = nan / nan
	return []Named{
		{"convs.0.lin.weight", FromSlice([]float32{1.5, -0.0, nan, 3.25e-38, 7, 8}, 2, 3)},
		{"convs.0.lin.bias", FromSlice([]float64{1e300, -2, 0.1})},
		{"norms.0.num_batches_tracked", FromSlice([]int64{42}, []int64{}...)},
		{"ids", FromSlice([]int32{-1, 1 << 30})},
		{"mask", FromSlice([]bool{true, false, true})},
		{"bytes", FromSlice([]uint8{0, 255, 7})},
		{"half", FromSlice([]float32{1, -2.5}).ToDType(Float16)},
		{"empty", Zeros([]int64{0, 4}, Options{})},
		{"transposed", FromSlice([]float64{1, 2, 3, 4, 5, 6}, 2, 3).T()},
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	s := NewScope()
	defer s.Close()
	path := filepath.Join(t.TempDir(), "state.pt")
	state := sampleState()
	meta := map[string]string{"meta.config": `{"hidden":300}`, "meta.step": "17"}
	if err := Save(path, state, meta); err != nil {
		t.Fatal(err)
	}
	got, gotMeta, err := Load(path, CPU)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(state) {
		t.Fatalf("%d tensors back, want %d", len(got), len(state))
	}
	for i, n := range state {
		g := got[i]
		if g.Name != n.Name || g.Tensor.DType() != n.Tensor.DType() || !slices.Equal(g.Tensor.Shape(), n.Tensor.Shape()) {
			t.Errorf("entry %d: %s %s %v, want %s %s %v", i, g.Name, g.Tensor.DType(), g.Tensor.Shape(), n.Name, n.Tensor.DType(), n.Tensor.Shape())
			continue
		}
		if !bytes.Equal(rawBytes(g.Tensor), rawBytes(n.Tensor)) {
			t.Errorf("%s: bytes differ after the round trip", n.Name)
		}
	}
	if !equalMeta(gotMeta, meta) {
		t.Errorf("metadata %v, want %v", gotMeta, meta)
	}
}

func equalMeta(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// libtorch's own C++ reader loads Save's files bit for bit.
func TestLibtorchReadsSavedFiles(t *testing.T) {
	s := NewScope()
	defer s.Close()
	path := filepath.Join(t.TempDir(), "state.pt")
	state := sampleState()
	if err := Save(path, state, nil); err != nil {
		t.Fatal(err)
	}
	got, err := libtorchtest.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(state) {
		t.Fatalf("libtorch read %d tensors, want %d", len(got), len(state))
	}
	for i, n := range state {
		g := got[i]
		if g.Name != n.Name || g.ScalarType != n.Tensor.DType().scalarType() || !slices.Equal(g.Shape, n.Tensor.Shape()) ||
			!bytes.Equal(g.Data, rawBytes(n.Tensor)) {
			t.Errorf("libtorch entry %d %q (scalar type %d, shape %v) differs from %q (%s %v)",
				i, g.Name, g.ScalarType, g.Shape, n.Name, n.Tensor.DType(), n.Tensor.Shape())
		}
	}
}

// PyTorch loads Save's files with weights_only=True as a plain dict with the
// same keys, order, dtypes, shapes and bytes.
func TestPyTorchReadsSavedFiles(t *testing.T) {
	s := NewScope()
	defer s.Close()
	py := testenv.Python(t, "torch", "numpy")
	path := filepath.Join(t.TempDir(), "state.pt")
	state := sampleState()
	if err := Save(path, state, map[string]string{"meta.run": "x"}); err != nil {
		t.Fatal(err)
	}
	script := `
import hashlib, json, sys, torch
d = torch.load(sys.argv[1], weights_only=True)
out = []
for k, v in d.items():
    if isinstance(v, torch.Tensor):
        b = v.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        out.append([k, str(v.dtype).replace("torch.", ""), list(v.shape), hashlib.sha256(b).hexdigest()])
    else:
        out.append([k, type(v).__name__, v, ""])
print(json.dumps(out))
`
	out, err := py.Command("-c", script, path).CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	var rows [][4]any
	if err := json.Unmarshal(out[bytes.LastIndexByte(bytes.TrimSpace(out), '\n')+1:], &rows); err != nil {
		t.Fatalf("python output %q: %v", out, err)
	}
	if len(rows) != len(state)+1 {
		t.Fatalf("python saw %d entries, want %d", len(rows), len(state)+1)
	}
	for i, n := range state {
		sum := sha256.Sum256(rawBytes(n.Tensor))
		want := [4]any{n.Name, n.Tensor.DType().String(), shapeAny(n.Tensor.Shape()), hex.EncodeToString(sum[:])}
		if jsonOf(rows[i]) != jsonOf(want) {
			t.Errorf("python entry %d: %v, want %v", i, rows[i], want)
		}
	}
	if last := rows[len(state)]; last[0] != "meta.run" || last[2] != "x" {
		t.Errorf("python metadata entry %v", last)
	}
}

func shapeAny(s []int64) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = float64(v)
	}
	return out
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Broken files and unwritable paths give errors; the process lives on.
func TestSaveLoadErrors(t *testing.T) {
	s := NewScope()
	defer s.Close()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.pt")
	if err := Save(good, sampleState(), nil); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Flip a bit inside a tensor's bytes (the float64 1e300), which the
	// record's CRC-32 covers; alignment padding between records is not covered.
	flipped := slices.Clone(data)
	at := bytes.Index(flipped, rawBytes(FromSlice([]float64{1e300})))
	if at < 0 {
		t.Fatal("tensor bytes not found in the file")
	}
	flipped[at+3] ^= 0x10
	tests := []struct {
		name, path string
	}{
		{"missing", filepath.Join(dir, "absent.pt")},
		{"empty", write("empty.pt", nil)},
		{"truncated", write("truncated.pt", data[:len(data)*2/3])},
		{"flipped byte", write("flipped.pt", flipped)},
		{"not a zip", write("text.pt", []byte("hello, this is not a checkpoint"))},
	}
	for _, tc := range tests {
		if _, _, err := Load(tc.path, CPU); err == nil {
			t.Errorf("%s: Load succeeded", tc.name)
		} else if !strings.Contains(err.Error(), filepath.Base(tc.path)) {
			t.Errorf("%s: error %q does not name the file", tc.name, err)
		}
	}
	if _, err := libtorchtest.Read(filepath.Join(dir, "text.pt")); err == nil {
		t.Error("libtorch read a text file")
	}
	if err := Save(filepath.Join(dir, "no", "such", "dir", "x.pt"), sampleState(), nil); err == nil {
		t.Error("Save into a missing folder succeeded")
	}
	// A failed save leaves the previous file intact.
	if err := Save(good, []Named{{"x", sampleState()[0].Tensor}, {"x", sampleState()[1].Tensor}}, nil); err == nil {
		t.Error("Save with a duplicate key succeeded")
	}
	if after, _ := os.ReadFile(good); !bytes.Equal(after, data) {
		t.Error("a failed Save changed the existing file")
	}
	if got := ToSlice[float32](Ones([]int64{2}, Options{})); got[1] != 1 {
		t.Error("libtorch broken after the errors")
	}
}

// ptfile.DType holds DType's values in DType's order, so that Save and Load
// convert between them as plain conversions: the same name for every value,
// and nothing past Bool in either.
func TestFileDTypes(t *testing.T) {
	for d := Float32; d <= Bool; d++ {
		if got := ptfile.DType(d).String(); got != d.String() {
			t.Errorf("DType %d: ptfile names it %s, torch %s", d, got, d)
		}
	}
	if ptfile.DType(Bool+1).Size() != 0 || len(dtypes) != int(Bool)+1 {
		t.Errorf("a DType past Bool: ptfile size %d, torch has %d dtypes", ptfile.DType(Bool+1).Size(), len(dtypes))
	}
}
