package ptfile

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/internal/testenv"
)

// The interoperability tests need a Python with torch. They fail rather than
// skip without one, since then nothing shows that PyTorch reads what Write
// writes.

type pyDigest struct {
	Type    string    `json:"type"`
	Entries []pyEntry `json:"entries"`
	Error   string    `json:"error"`
	Mode    string    `json:"mode"`
}

type pyEntry struct {
	Name   string  `json:"name"`
	Kind   string  `json:"kind"`
	DType  string  `json:"dtype"`
	Shape  []int64 `json:"shape"`
	SHA256 string  `json:"sha256"`
	Value  string  `json:"value"`
}

// runTorchIO runs testdata/torchio.py and decodes its result into out; it
// returns the torch version.
func runTorchIO(t *testing.T, out any, args ...string) string {
	t.Helper()
	py := testenv.Python(t, "torch", "numpy")
	script, err := filepath.Abs(filepath.Join("testdata", "torchio.py"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := py.Command(append([]string{script}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s torchio.py %v: %v\n%s", py, args, err, stderr.String())
	}
	var res struct {
		Torch  string          `json:"torch"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("torchio.py output: %v\n%s", err, b)
	}
	if err := json.Unmarshal(res.Result, out); err != nil {
		t.Fatalf("torchio.py result: %v\n%s", err, res.Result)
	}
	return res.Torch
}

// digestOf describes entries as torchio.py does.
func digestOf(t *testing.T, es []Entry) []pyEntry {
	t.Helper()
	var out []pyEntry
	for _, e := range es {
		d := pyEntry{Name: e.Name}
		switch v := e.Value.(type) {
		case *Tensor:
			sum := sha256.Sum256(v.Data)
			d.Kind, d.DType, d.SHA256 = "tensor", v.DType.String(), hex.EncodeToString(sum[:])
			d.Shape = append([]int64{}, v.Shape...)
		case int64:
			d.Kind, d.Value = "int", strconv.FormatInt(v, 10)
		case float64:
			d.Kind = "float"
			d.Value = hex.EncodeToString(binary.LittleEndian.AppendUint64(nil, math.Float64bits(v)))
		case string:
			d.Kind, d.Value = "str", v
		case bool:
			d.Kind, d.Value = "bool", map[bool]string{true: "True", false: "False"}[v]
		default:
			t.Fatalf("%q: unexpected %T", e.Name, e.Value)
		}
		out = append(out, d)
	}
	return out
}

func sameDigest(t *testing.T, what string, got, want []pyEntry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d entries, want %d", what, len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Shape == nil {
			g.Shape = []int64{}
		}
		if w.Shape == nil {
			w.Shape = []int64{}
		}
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("%s: entry %d is\n  %+v\nwant\n  %+v", what, i, g, w)
		}
	}
}

// Go writes; PyTorch loads, with weights_only=True, the same keys in the same
// order with the same dtypes, shapes and bytes.
func TestPythonLoadsGoFile(t *testing.T) {
	dir := t.TempDir()
	noFloats := sampleEntries(false)
	for i := range 1100 { // more than one SETITEMS batch
		noFloats = append(noFloats, Entry{fmt.Sprintf("many.%d", i), int64(i * 7)})
	}
	path := filepath.Join(dir, "go.pt")
	if err := WriteFile(path, noFloats); err != nil {
		t.Fatal(err)
	}
	var res []pyDigest
	runTorchIO(t, &res, "load", path, "weights_only", "full")
	for _, r := range res {
		if r.Error != "" {
			t.Fatalf("torch.load(%s): %s", r.Mode, r.Error)
		}
		if r.Type != "builtins.dict" { // a plain dict, which libtorch C++ reads too
			t.Errorf("torch.load(%s) gave a %s", r.Mode, r.Type)
		}
		sameDigest(t, "torch.load "+r.Mode, r.Entries, digestOf(t, noFloats))
	}
}

// Float values use BINFLOAT, which PyTorch 1.13's weights_only unpickler
// lacks: there the file loads only with weights_only=False. PyTorch 2.x must
// load it either way.
func TestPythonLoadsGoFloats(t *testing.T) {
	es := []Entry{{"lr", 0.001}, {"nan", math.NaN()}, {"neg0", math.Copysign(0, -1)},
		{"w", &Tensor{DType: Float64, Shape: []int64{1}, Data: make([]byte, 8)}}, {"step", int64(10)}}
	path := filepath.Join(t.TempDir(), "floats.pt")
	if err := WriteFile(path, es); err != nil {
		t.Fatal(err)
	}
	var res []pyDigest
	version := runTorchIO(t, &res, "load", path, "weights_only", "full")
	old := strings.HasPrefix(version, "1.")
	for _, r := range res {
		if r.Mode == "weights_only" && old {
			if !strings.Contains(r.Error, "Unsupported operand 71") {
				t.Fatalf("torch %s weights_only: got %+v, want its known BINFLOAT refusal", version, r)
			}
			continue
		}
		if r.Error != "" {
			t.Fatalf("torch %s load(%s): %s", version, r.Mode, r.Error)
		}
		sameDigest(t, "torch.load "+r.Mode, r.Entries, digestOf(t, es))
	}
}

// PyTorch writes views, shared storages, every dtype, a module's state_dict
// and a plain dict; Go reads the same values.
func TestGoReadsPythonFiles(t *testing.T) {
	dir := t.TempDir()
	var want map[string]pyDigest
	version := runTorchIO(t, &want, "save", dir)
	if len(want) != 3 {
		t.Fatalf("torchio.py wrote %d files", len(want))
	}
	for name, d := range want {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			es, err := ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			sameDigest(t, name, digestOf(t, es), d.Entries)
			// Go's rewrite of PyTorch's file loads back identically.
			out := filepath.Join(dir, "rewritten-"+name)
			if err := WriteFile(out, es); err != nil {
				t.Fatal(err)
			}
			modes := []string{"full"}
			hasFloat := false
			for _, e := range es {
				_, f := e.Value.(float64)
				hasFloat = hasFloat || f
			}
			if !hasFloat || !strings.HasPrefix(version, "1.") {
				modes = append(modes, "weights_only") // see TestPythonLoadsGoFloats
			}
			var res []pyDigest
			runTorchIO(t, &res, append([]string{"load", out}, modes...)...)
			for _, r := range res {
				if r.Error != "" {
					t.Fatalf("torch.load(%s) of the rewrite: %s", r.Mode, r.Error)
				}
				sameDigest(t, "rewritten "+name+" "+r.Mode, r.Entries, d.Entries)
			}
		})
	}
}
