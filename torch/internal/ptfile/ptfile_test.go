package ptfile

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var allDTypes = []DType{Float32, Float64, Float16, BFloat16, Int64, Int32, Int16, Int8, Uint8, Bool}

// randTensor fills a tensor with seeded random bytes; Bool gets 0 or 1, the
// only values a torch bool may hold.
func randTensor(rng *rand.Rand, d DType, shape ...int64) *Tensor {
	n, err := numel(shape)
	if err != nil {
		panic(err)
	}
	data := make([]byte, n*int64(d.Size()))
	for i := range data {
		data[i] = byte(rng.Uint32())
		if d == Bool {
			data[i] &= 1
		}
	}
	return &Tensor{DType: d, Shape: shape, Data: data}
}

// sampleEntries covers every dtype, 0-d, empty and multi-dimensional tensors,
// one large-ish tensor and primitives at the encoding boundaries.
func sampleEntries(withFloats bool) []Entry {
	rng := rand.New(rand.NewPCG(1, 2))
	var es []Entry
	for _, d := range allDTypes {
		es = append(es,
			Entry{"t." + d.String(), randTensor(rng, d, 3, 5)},
			Entry{"scalar." + d.String(), randTensor(rng, d)},
			Entry{"empty." + d.String(), randTensor(rng, d, 2, 0, 3)},
			Entry{"4d." + d.String(), randTensor(rng, d, 2, 1, 3, 2)},
		)
	}
	es = append(es,
		Entry{"vec0", randTensor(rng, Float32, 0)},
		Entry{"large", randTensor(rng, Float32, 300, 1000)},
		Entry{"long.dims", randTensor(rng, Uint8, 70000)},
	)
	for i, v := range []int64{0, 1, 255, 256, 65535, 65536, -1, -128, -129, -256, -257,
		math.MaxInt32, math.MaxInt32 + 1, math.MinInt32, math.MinInt32 - 1,
		1 << 40, -(1 << 40), 1<<55 + 3, math.MaxInt64, math.MinInt64} {
		es = append(es, Entry{fmt.Sprintf("int.%d", i), v})
	}
	es = append(es,
		Entry{"str.empty", ""},
		Entry{"str.unicode", "héllo ✓ 世界"},
		Entry{"str.long", strings.Repeat("abc", 200)},
		Entry{"bool.true", true},
		Entry{"bool.false", false},
		Entry{"", int64(7)}, // Python allows an empty key
	)
	if withFloats {
		for i, v := range []float64{0, math.Copysign(0, -1), 1.5, -0.001, math.Pi, math.Inf(1), math.Inf(-1),
			math.NaN(), math.SmallestNonzeroFloat64, math.MaxFloat64} {
			es = append(es, Entry{fmt.Sprintf("float.%d", i), v})
		}
	}
	return es
}

// sameEntries compares entries exactly: floats by their bits, tensors byte
// for byte, and a nil shape equal to an empty one.
func sameEntries(t *testing.T, got, want []Entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d entries, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Name != w.Name {
			t.Fatalf("entry %d is %q, want %q", i, g.Name, w.Name)
		}
		switch wv := w.Value.(type) {
		case *Tensor:
			gv, ok := g.Value.(*Tensor)
			if !ok {
				t.Fatalf("%q: got %T, want *Tensor", w.Name, g.Value)
			}
			if gv.DType != wv.DType || len(gv.Shape) != len(wv.Shape) ||
				(len(wv.Shape) > 0 && !reflect.DeepEqual(gv.Shape, wv.Shape)) {
				t.Fatalf("%q: got %v%v, want %v%v", w.Name, gv.DType, gv.Shape, wv.DType, wv.Shape)
			}
			if !bytes.Equal(gv.Data, wv.Data) {
				t.Fatalf("%q: data differs", w.Name)
			}
		case float64:
			gv, ok := g.Value.(float64)
			if !ok || math.Float64bits(gv) != math.Float64bits(wv) {
				t.Fatalf("%q: got %T %v, want %v", w.Name, g.Value, g.Value, wv)
			}
		default:
			if g.Value != w.Value {
				t.Fatalf("%q: got %T %v, want %T %v", w.Name, g.Value, g.Value, w.Value, w.Value)
			}
		}
	}
}

func writeBytes(t *testing.T, es []Entry) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, es); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func readBytes(b []byte) ([]Entry, error) { return Read("bytes", bytes.NewReader(b), int64(len(b))) }

func TestRoundTrip(t *testing.T) {
	want := sampleEntries(true)
	got, err := readBytes(writeBytes(t, want))
	if err != nil {
		t.Fatal(err)
	}
	sameEntries(t, got, want)
}

func TestRoundTripEmptyDict(t *testing.T) {
	got, err := readBytes(writeBytes(t, nil))
	if err != nil || len(got) != 0 {
		t.Fatalf("got %v, %v; want no entries", got, err)
	}
}

// More than 1000 entries take several SETITEMS batches; order must survive.
func TestRoundTripManyEntries(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var want []Entry
	for i := range 2500 {
		if i%3 == 0 {
			want = append(want, Entry{fmt.Sprintf("k%04d", 2500-i), randTensor(rng, Int32, int64(i%5))})
		} else {
			want = append(want, Entry{fmt.Sprintf("k%04d", 2500-i), int64(i)})
		}
	}
	got, err := readBytes(writeBytes(t, want))
	if err != nil {
		t.Fatal(err)
	}
	sameEntries(t, got, want)
}

func TestWriteFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.pt")
	want := sampleEntries(true)
	if err := WriteFile(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sameEntries(t, got, want)
	// Same bytes as Write: the content does not depend on the path.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, writeBytes(t, want)) {
		t.Fatal("WriteFile and Write differ")
	}
	// A failed write leaves the old file alone.
	if err := WriteFile(path, []Entry{{"a", int64(1)}, {"a", int64(2)}}); err == nil {
		t.Fatal("duplicate names written")
	}
	if got, err := ReadFile(path); err != nil || len(got) != len(want) {
		t.Fatalf("old file damaged by a failed write: %d entries, %v", len(got), err)
	}
}

// The layout PyTorch readers and memory-mappers expect: records in one
// folder, stored, each one's data at a multiple of 64 bytes, with the
// version and byteorder records.
func TestLayout(t *testing.T) {
	b := writeBytes(t, sampleEntries(false))
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
		off, err := f.DataOffset()
		if err != nil {
			t.Fatal(err)
		}
		if off%64 != 0 {
			t.Errorf("%s: data at offset %d, not 64-aligned", f.Name, off)
		}
		if f.Method != zip.Store {
			t.Errorf("%s: method %d, want stored", f.Name, f.Method)
		}
		if f.Flags&0x8 != 0 {
			t.Errorf("%s: has a data descriptor", f.Name)
		}
		rc, err := f.Open() // archive/zip checks the CRC-32 on the way
		if err != nil {
			t.Fatal(err)
		}
		var data bytes.Buffer
		if _, err := data.ReadFrom(rc); err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		switch f.Name {
		case "archive/version":
			if data.String() != "3\n" {
				t.Errorf("version is %q", data.String())
			}
		case "archive/byteorder":
			if data.String() != "little" {
				t.Errorf("byteorder is %q", data.String())
			}
		}
	}
	if names[0] != "archive/data.pkl" || names[1] != "archive/byteorder" ||
		names[2] != "archive/data/0" || names[len(names)-1] != "archive/version" {
		t.Errorf("records %v", names)
	}
}

func TestWriteErrors(t *testing.T) {
	good := &Tensor{DType: Float32, Shape: []int64{2}, Data: make([]byte, 8)}
	for _, c := range []struct {
		name    string
		entries []Entry
		want    string
	}{
		{"duplicate", []Entry{{"a", good}, {"b", int64(1)}, {"a", int64(2)}}, `name "a" is used twice`},
		{"short data", []Entry{{"a", &Tensor{DType: Float32, Shape: []int64{3}, Data: make([]byte, 8)}}}, "Data has 8 bytes"},
		{"long data", []Entry{{"a", &Tensor{DType: Int64, Data: make([]byte, 9)}}}, "Data has 9 bytes"},
		{"unknown dtype", []Entry{{"a", &Tensor{DType: 99, Shape: []int64{2}, Data: make([]byte, 8)}}}, "invalid dtype"},
		{"negative size", []Entry{{"a", &Tensor{DType: Uint8, Shape: []int64{-1}}}}, "negative size"},
		{"overflow", []Entry{{"a", &Tensor{DType: Uint8, Shape: []int64{1 << 40, 1 << 40}}}}, "too many elements"},
		{"nil tensor", []Entry{{"a", (*Tensor)(nil)}}, "nil *Tensor"},
		{"int", []Entry{{"a", 5}}, "value of type int;"},
		{"float32", []Entry{{"a", float32(5)}}, "value of type float32;"},
		{"tensor value", []Entry{{"a", *good}}, "value of type ptfile.Tensor;"},
		{"bad name", []Entry{{"a\xff", int64(1)}}, "not valid UTF-8"},
		{"bad string", []Entry{{"a", "\xff"}}, "not valid UTF-8"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			err := Write(&b, c.entries)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}

// record is one zip record for buildArchive.
type record struct {
	name string
	data []byte
}

// buildArchive lays records out as Write does, for files that Write would
// never produce.
func buildArchive(t testing.TB, folder string, recs ...record) []byte {
	t.Helper()
	var b bytes.Buffer
	aw := newArchiveWriter(&b, folder)
	for _, r := range recs {
		if err := aw.record(r.name, r.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := aw.zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// view is a tensor as a view of a storage, for pickles Write would not make.
type view struct {
	name         string
	dtype        DType
	key          string
	storageNumel int64
	offset       int64
	size, stride []int64
}

func viewPickle(views ...view) []byte {
	var p pickler
	p.proto()
	p.global("collections", "OrderedDict")
	p.op(opEmptyTuple, opReduce, opMark)
	for _, v := range views {
		p.str(v.name)
		p.rebuild(v.dtype, v.key, v.storageNumel, v.offset, v.size, v.stride)
	}
	p.op(opSetItems, opStop)
	return p.buf
}

// expectView computes a view's bytes element by element from its multi-index,
// independently of gather's incremental walk.
func expectView(storage []byte, es int, v view) []byte {
	n, _ := numel(v.size)
	out := make([]byte, 0, n*int64(es))
	idx := make([]int64, len(v.size))
	for k := int64(0); k < n; k++ {
		rem := k
		for d := len(v.size) - 1; d >= 0; d-- {
			idx[d] = rem % v.size[d]
			rem /= v.size[d]
		}
		p := v.offset
		for d := range idx {
			p += idx[d] * v.stride[d]
		}
		out = append(out, storage[p*int64(es):(p+1)*int64(es)]...)
	}
	return out
}

func TestReadViews(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	s0 := randTensor(rng, Float32, 60).Data // shared by several views
	s1 := randTensor(rng, Int16, 24).Data
	s2 := randTensor(rng, Float64, 1).Data
	views := []view{
		{"whole", Float32, "0", 60, 0, []int64{60}, []int64{1}},
		{"matrix", Float32, "0", 60, 0, []int64{6, 10}, []int64{10, 1}},
		{"transposed", Float32, "0", 60, 0, []int64{10, 6}, []int64{1, 10}},
		{"slice", Float32, "0", 60, 13, []int64{3, 4}, []int64{10, 1}},
		{"stepped", Float32, "0", 60, 1, []int64{3, 3}, []int64{20, 3}},
		{"4d", Int16, "1", 24, 0, []int64{3, 2, 2, 2}, []int64{1, 12, 6, 3}},
		{"expanded", Int16, "1", 24, 5, []int64{4, 3}, []int64{0, 1}},
		{"size1 odd stride", Int16, "1", 24, 2, []int64{1, 5}, []int64{99, 1}},
		{"scalar in storage", Int16, "1", 24, 23, nil, nil},
		{"empty past end", Int16, "1", 24, 100, []int64{0, 7}, []int64{7, 1}},
		{"scalar", Float64, "2", 1, 0, nil, nil},
	}
	b := buildArchive(t, "some_name",
		record{"data.pkl", viewPickle(views...)},
		record{"data/0", s0}, record{"data/1", s1}, record{"data/2", s2},
		record{"version", []byte("3\n")})
	got, err := readBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	storages := map[string][]byte{"0": s0, "1": s1, "2": s2}
	var want []Entry
	for _, v := range views {
		want = append(want, Entry{v.name, &Tensor{DType: v.dtype, Shape: v.size,
			Data: expectView(storages[v.key], v.dtype.Size(), v)}})
	}
	sameEntries(t, got, want)
	// Views of one storage must not alias each other or the storage.
	a, m := got[0].Value.(*Tensor), got[1].Value.(*Tensor)
	a.Data[0] ^= 0xff
	if m.Data[0] == a.Data[0] {
		t.Fatal("views of one storage share memory")
	}
}

// The same tensor object under two names is one pickled object referenced
// twice; each entry must still own its bytes.
func TestReadSameTensorTwice(t *testing.T) {
	var p pickler
	p.proto()
	p.global("collections", "OrderedDict")
	p.op(opEmptyTuple, opReduce, opMark)
	p.str("a")
	p.rebuild(Uint8, "0", 4, 0, []int64{4}, []int64{1})
	p.op(opBinPut, 200)
	p.str("b")
	p.op(opBinGet, 200)
	p.op(opSetItems, opStop)
	b := buildArchive(t, "x", record{"data.pkl", p.buf}, record{"data/0", []byte{1, 2, 3, 4}}, record{"version", []byte("3\n")})
	got, err := readBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{{"a", &Tensor{DType: Uint8, Shape: []int64{4}, Data: []byte{1, 2, 3, 4}}},
		{"b", &Tensor{DType: Uint8, Shape: []int64{4}, Data: []byte{1, 2, 3, 4}}}}
	sameEntries(t, got, want)
	got[0].Value.(*Tensor).Data[0] = 9
	if got[1].Value.(*Tensor).Data[0] != 1 {
		t.Fatal("entries share a tensor")
	}
}

func TestReadFileNamesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "broken.pt")
	if err := os.WriteFile(path, []byte("not a zip"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadFile(path)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("error %v does not name %s", err, path)
	}
	_, err = ReadFile(filepath.Join(t.TempDir(), "missing.pt"))
	if err == nil || !strings.Contains(err.Error(), "missing.pt") {
		t.Fatalf("error %v does not name the missing file", err)
	}
}

// Every truncation must fail cleanly: a torch file ends with the zip's
// central directory, so no prefix of one is a valid file.
func TestTruncated(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	b := writeBytes(t, []Entry{{"w", randTensor(rng, Float32, 4, 4)}, {"step", int64(3)}})
	for n := range len(b) {
		if _, err := readBytes(b[:n]); err == nil {
			t.Fatalf("truncated to %d of %d bytes: no error", n, len(b))
		}
	}
}

// A flipped byte inside any record's data is caught by its CRC-32, and the
// error names the record.
func TestCorruptData(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	b := writeBytes(t, []Entry{{"w", randTensor(rng, Float32, 4, 4)}, {"b", randTensor(rng, Int8, 3)}})
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range zr.File {
		off, err := f.DataOffset()
		if err != nil {
			t.Fatal(err)
		}
		for i := off; i < off+int64(f.UncompressedSize64); i++ {
			c := bytes.Clone(b)
			c[i] ^= 0x10
			_, err := readBytes(c)
			if err == nil || !strings.Contains(err.Error(), "CRC-32") || !strings.Contains(err.Error(), f.Name) {
				t.Fatalf("byte %d of %s flipped: got %v", i-off, f.Name, err)
			}
		}
	}
}

// Flipping any byte anywhere may or may not be detected (padding, times), but
// must never panic, and a file that still reads must keep its shape.
func TestFlipEveryByte(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	b := writeBytes(t, []Entry{{"w", randTensor(rng, Float32, 2, 3)}, {"n", int64(1000)}, {"s", "x"}})
	for i := range b {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			c := bytes.Clone(b)
			c[i] ^= mask
			es, err := readBytes(c)
			if err == nil && len(es) != 3 {
				t.Fatalf("byte %d ^ %#x: read %d entries without error", i, mask, len(es))
			}
		}
	}
}

func validPickle(t *testing.T) []byte {
	return viewPickle(view{"w", Float32, "0", 4, 0, []int64{2, 2}, []int64{2, 1}})
}

var storage0 = make([]byte, 16)

func TestMissingRecords(t *testing.T) {
	pkl := validPickle(t)
	for _, c := range []struct {
		name string
		recs []record
		want string
	}{
		{"no data.pkl", []record{{"data/0", storage0}, {"version", []byte("3\n")}}, "record x/data.pkl is missing"},
		{"no storage", []record{{"data.pkl", pkl}, {"version", []byte("3\n")}}, "record x/data/0 is missing"},
		{"no version", []record{{"data.pkl", pkl}, {"data/0", storage0}}, "record x/version is missing"},
		{"bad version", []record{{"data.pkl", pkl}, {"data/0", storage0}, {"version", []byte("three")}}, "not a format version"},
		{"short storage", []record{{"data.pkl", pkl}, {"data/0", storage0[:12]}, {"version", []byte("3\n")}}, "has 12 bytes; its storage id says 4 float32 elements"},
		{"long storage", []record{{"data.pkl", pkl}, {"data/0", make([]byte, 20)}, {"version", []byte("3\n")}}, "has 20 bytes"},
		{"big-endian", []record{{"data.pkl", pkl}, {"byteorder", []byte("big")}, {"data/0", storage0}, {"version", []byte("3\n")}}, "big-endian"},
		{"odd byteorder", []record{{"data.pkl", pkl}, {"byteorder", []byte("middle")}, {"data/0", storage0}, {"version", []byte("3\n")}}, `"middle"`},
		{"duplicate record", []record{{"data.pkl", pkl}, {"data/0", storage0}, {"data/0", storage0}, {"version", []byte("3\n")}}, "appears twice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := readBytes(buildArchive(t, "x", c.recs...))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
		})
	}
	// Sanity: the same records, complete, read.
	if _, err := readBytes(buildArchive(t, "x", record{"data.pkl", pkl}, record{"data/0", storage0}, record{"version", []byte("3\n")})); err != nil {
		t.Fatal(err)
	}
}

func TestNotAnArchive(t *testing.T) {
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "not a torch.save zip archive"},
		{"text", []byte("hello world, this is not a zip file at all"), "not a torch.save zip archive"},
		{"legacy", []byte("\x80\x02\x8a\x0alJ\xfc\x9cF\xf9 j\xa8P\x19.\x80\x02M\xe9\x03.x"), "legacy"},
		{"no folder", buildArchiveFlat(t), "not inside a folder"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := readBytes(c.data)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}

func buildArchiveFlat(t *testing.T) []byte {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, _ := zw.Create("data.pkl")
	w.Write(validPickle(t))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestCompressedRecord(t *testing.T) {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, r := range []record{{"x/data.pkl", validPickle(t)}, {"x/data/0", storage0}, {"x/version", []byte("3\n")}} {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: r.name, Method: zip.Deflate})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(r.data)
	}
	zw.Close()
	_, err := readBytes(b.Bytes())
	if err == nil || !strings.Contains(err.Error(), "compressed") {
		t.Fatalf("got %v, want an error about compression", err)
	}
}

// readPickle runs pkl as data.pkl next to a 4-element float32 storage "0".
func readPickle(t *testing.T, pkl []byte) error {
	t.Helper()
	_, err := readBytes(buildArchive(t, "x", record{"data.pkl", pkl}, record{"data/0", storage0}, record{"version", []byte("3\n")}))
	return err
}

func TestBadPickles(t *testing.T) {
	prefix := func() *pickler {
		p := &pickler{}
		p.proto()
		p.global("collections", "OrderedDict")
		p.op(opEmptyTuple, opReduce, opMark)
		p.str("k")
		return p
	}
	end := func(p *pickler) []byte { p.op(opSetItems, opStop); return p.buf }
	for _, c := range []struct {
		name string
		pkl  func() []byte
		want string
	}{
		{"garbage", func() []byte { return []byte("\x00 not a pickle") }, "not one that torch.save writes"},
		{"empty", func() []byte { return nil }, "without STOP"},
		{"truncated", func() []byte { return validPickle(t)[:40] }, "truncated"},
		{"unknown global", func() []byte { return []byte("\x80\x02cos\nsystem\nq\x00.") }, "global os.system is not allowed"},
		{"builtins eval", func() []byte { return []byte("\x80\x02c__builtin__\neval\n.") }, "global __builtin__.eval is not allowed"},
		{"torch non-storage", func() []byte { return []byte("\x80\x02ctorch\nload\n.") }, "global torch.load is not allowed"},
		{"complex storage", func() []byte { return []byte("\x80\x02ctorch\nComplexFloatStorage\n.") }, "global torch.ComplexFloatStorage is not allowed"},
		{"protocol 4 frame", func() []byte { return []byte("\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00}.") }, "FRAME (0x95)"},
		{"short unicode", func() []byte { return []byte("\x80\x02\x8c\x01a.") }, "SHORT_BINUNICODE (0x8c)"},
		{"stack global", func() []byte { return []byte("\x80\x02\x93.") }, "STACK_GLOBAL"},
		{"top-level tensor", func() []byte {
			var p pickler
			p.proto()
			p.rebuild(Float32, "0", 4, 0, []int64{4}, []int64{1})
			p.op(opStop)
			return p.buf
		}, "file holds a tensor, not a state dict"},
		{"top-level list", func() []byte { return []byte("\x80\x02].") }, "file holds a list"},
		{"nested dict", func() []byte { p := prefix(); p.op(opEmptyDict); return end(p) }, `"k" is a Python dict`},
		{"none value", func() []byte { p := prefix(); p.op(opNone); return end(p) }, `"k" is a Python None`},
		{"big int", func() []byte { p := prefix(); p.op(opLong1, 9, 0, 0, 0, 0, 0, 0, 0, 0x80, 0); return end(p) }, "int (beyond int64)"},
		{"int key", func() []byte {
			var p pickler
			p.proto()
			p.op(opEmptyDict, opBinInt1, 1, opBinInt1, 2, opSetItem, opStop)
			return p.buf
		}, "key 1 is a int"},
		{"tuple key", func() []byte {
			var p pickler
			p.proto()
			p.op(opEmptyDict, opEmptyTuple, opBinInt1, 2, opSetItem, opStop)
			return p.buf
		}, "dict key of type tuple"},
		{"bytes after stop", func() []byte { return append(validPickle(t), 'N') }, "1 bytes after STOP"},
		{"two values at stop", func() []byte { return []byte("\x80\x02NN.") }, "2 values on the stack"},
		{"underflow", func() []byte { return []byte("\x80\x02R.") }, "stack underflow"},
		{"underflow past mark", func() []byte { return []byte("\x80\x02N(\x85.") }, "stack underflow"},
		{"memo miss", func() []byte { return []byte("\x80\x02h\x05.") }, "memo entry 5 was never stored"},
		{"call a string", func() []byte { return []byte("\x80\x02X\x01\x00\x00\x00a)R.") }, "call of a str"},
		{"call storage class", func() []byte { return []byte("\x80\x02ctorch\nFloatStorage\n)R.") }, "torch.FloatStorage cannot be called"},
		{"OrderedDict with args", func() []byte { return []byte("\x80\x02ccollections\nOrderedDict\n]\x85R.") }, "called with 1 arguments"},
		{"build on dict", func() []byte { return []byte("\x80\x02}}b.") }, "BUILD of a dict"},
		{"invalid utf-8", func() []byte { return []byte("\x80\x02X\x01\x00\x00\x00\xff.") }, "not valid UTF-8"},
		{"huge string length", func() []byte { return []byte("\x80\x02X\xff\xff\xff\xff.") }, "truncated"},
		{"persid not storage", func() []byte { return []byte("\x80\x02X\x01\x00\x00\x00aQ.") }, "persistent id is a str"},
		{"persid module", func() []byte {
			return []byte("\x80\x02(X\x06\x00\x00\x00moduleNNNNtQ.")
		}, `persistent id of kind "module"`},
		{"storage too small for view", func() []byte {
			return viewPickle(view{"w", Float32, "0", 4, 1, []int64{2, 2}, []int64{2, 1}})
		}, "needs element 4 of storage \"0\", which has 4 elements"},
		{"storage id larger than record", func() []byte {
			return viewPickle(view{"w", Float32, "0", 5, 0, []int64{5}, []int64{1}})
		}, "has 16 bytes; its storage id says 5 float32 elements"},
		{"storage as two dtypes", func() []byte {
			return viewPickle(view{"a", Float32, "0", 4, 0, []int64{4}, []int64{1}}, view{"b", Int32, "0", 4, 0, []int64{4}, []int64{1}})
		}, "declared as 4 float32 elements and as 4 int32 elements"},
		{"negative stride", func() []byte {
			return viewPickle(view{"w", Float32, "0", 4, 3, []int64{4}, []int64{-1}})
		}, "negative stride"},
		{"negative size", func() []byte {
			return viewPickle(view{"w", Float32, "0", 4, 0, []int64{-4}, []int64{1}})
		}, "negative size"},
		{"size stride lengths", func() []byte {
			return viewPickle(view{"w", Float32, "0", 4, 0, []int64{4}, []int64{1, 1}})
		}, "differ in length"},
		{"stride overflow", func() []byte {
			return viewPickle(view{"w", Float32, "0", 4, 0, []int64{3, 2}, []int64{math.MaxInt64/2 + 1, 1}})
		}, "overflow"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := readPickle(t, c.pkl())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}

// A view may be larger than its storage (stride 0), but not without bound.
func TestExpandLimit(t *testing.T) {
	pkl := viewPickle(view{"w", Float32, "0", 4, 0, []int64{1 << 20, 1 << 20}, []int64{0, 0}})
	err := readPickle(t, pkl)
	if err == nil || !strings.Contains(err.Error(), "a file of this size may take") {
		t.Fatalf("got %v, want the size limit", err)
	}
	// Within the limit the expansion is materialised.
	pkl = viewPickle(view{"w", Float32, "0", 4, 1, []int64{1000, 3}, []int64{0, 1}})
	b := buildArchive(t, "x", record{"data.pkl", pkl}, record{"data/0", []byte{0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0}}, record{"version", []byte("3\n")})
	es, err := readBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	d := es[0].Value.(*Tensor).Data
	if len(d) != 12000 || binary.LittleEndian.Uint32(d[11996:]) != 3 || binary.LittleEndian.Uint32(d[12:]) != 1 {
		t.Fatal("expanded view read wrong")
	}
}

// A state dict from model.state_dict() carries _metadata, set by BUILD on the
// OrderedDict after its items; a parameter comes as _rebuild_parameter.
func TestReadMetadataAndParameter(t *testing.T) {
	var p pickler
	p.proto()
	p.global("collections", "OrderedDict")
	p.op(opEmptyTuple, opReduce, opMark)
	p.str("p")
	p.global("torch._utils", "_rebuild_parameter")
	p.op(opMark)
	p.rebuild(Float32, "0", 4, 0, []int64{4}, []int64{1})
	p.op(opNewTrue)
	p.global("collections", "OrderedDict")
	p.op(opEmptyTuple, opReduce, opTuple, opReduce)
	p.op(opSetItems)
	// {'_metadata': OrderedDict([('', {'version': 1})])}
	p.op(opEmptyDict)
	p.str("_metadata")
	p.global("collections", "OrderedDict")
	p.op(opEmptyTuple, opReduce, opMark)
	p.str("")
	p.op(opEmptyDict)
	p.str("version")
	p.int(1)
	p.op(opSetItem, opSetItems, opSetItem, opBuild, opStop)
	data := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	b := buildArchive(t, "x", record{"data.pkl", p.buf}, record{"data/0", data}, record{"version", []byte("3\n")})
	got, err := readBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	sameEntries(t, got, []Entry{{"p", &Tensor{DType: Float32, Shape: []int64{4}, Data: data}}})
}

func TestDecodeLong(t *testing.T) {
	for _, c := range []struct {
		b    []byte
		want any
	}{
		{nil, int64(0)},
		{[]byte{0xff}, int64(-1)},
		{[]byte{0x80}, int64(-128)},
		{[]byte{0x80, 0x00}, int64(128)},
		{[]byte{0, 0, 0, 0, 0, 0, 0, 0x80}, int64(math.MinInt64)},
		{[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, int64(math.MaxInt64)},
		{[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, int64(-1)},  // not minimal, still fits
		{[]byte{0, 0, 0, 0, 0, 0, 0, 0x80, 0}, pyBigInt{}},                         // 2**63
		{[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0xff}, pyBigInt{}}, // -2**63-1
	} {
		if got := decodeLong(c.b); got != c.want {
			t.Errorf("decodeLong(% x) = %v, want %v", c.b, got, c.want)
		}
	}
}

// PyTorch 2.x adds .format_version, .storage_alignment, byteorder and
// .data/serialization_id, newer readers look for .data/version first, and
// miniz writes each record's CRC and sizes in a data descriptor after it (as
// Go's CreateHeader does). None of that may disturb Read.
func TestReadPyTorch2Layout(t *testing.T) {
	data := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	for _, versionRecord := range []string{"version", ".data/version"} {
		var b bytes.Buffer
		zw := zip.NewWriter(&b)
		for _, r := range []record{
			{"data.pkl", viewPickle(view{"w", Int32, "0", 4, 0, []int64{2, 2}, []int64{2, 1}})},
			{".format_version", []byte("1")},
			{".storage_alignment", []byte("64")},
			{"byteorder", []byte("little")},
			{"data/0", data},
			{versionRecord, []byte("3\n")},
			{".data/serialization_id", []byte("1234567890123456789012345678901234567890")},
		} {
			w, err := zw.CreateHeader(&zip.FileHeader{Name: "model/" + r.name, Method: zip.Store})
			if err != nil {
				t.Fatal(err)
			}
			w.Write(r.data)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		zr, _ := zip.NewReader(bytes.NewReader(b.Bytes()), int64(b.Len()))
		if zr.File[0].Flags&0x8 == 0 {
			t.Fatal("test archive has no data descriptors")
		}
		got, err := readBytes(b.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", versionRecord, err)
		}
		sameEntries(t, got, []Entry{{"w", &Tensor{DType: Int32, Shape: []int64{2, 2}, Data: data}}})
	}
}

// One tensor object referenced under many names is copied per name, and the
// copies count against the same bound as expanded views.
func TestRepeatedTensorLimit(t *testing.T) {
	defer func(old int64) { expandFloor = old }(expandFloor)
	expandFloor = 0 // the bound is then 8 × the file's size
	build := func(refs int) []byte {
		var p pickler
		p.proto()
		p.global("collections", "OrderedDict")
		p.op(opEmptyTuple, opReduce, opMark)
		p.str("k0")
		p.rebuild(Uint8, "0", 1024, 0, []int64{1024}, []int64{1})
		p.op(opLongBinPut, 0, 1, 0, 0)
		for i := 1; i < refs; i++ {
			p.str(fmt.Sprintf("k%d", i))
			p.op(opLongBinGet, 0, 1, 0, 0)
		}
		p.op(opSetItems, opStop)
		return buildArchive(t, "x", record{"data.pkl", p.buf}, record{"data/0", make([]byte, 1024)}, record{"version", []byte("3\n")})
	}
	es, err := readBytes(build(3))
	if err != nil || len(es) != 3 {
		t.Fatalf("3 references: %d entries, %v", len(es), err)
	}
	_, err = readBytes(build(200))
	if err == nil || !strings.Contains(err.Error(), "copying a tensor referenced again") {
		t.Fatalf("200 references: got %v, want the size limit", err)
	}
}
