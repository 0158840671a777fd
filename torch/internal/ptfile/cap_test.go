package ptfile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"runtime"
	"strings"
	"testing"
)

// put writes vals little-endian.
func put(b *bytes.Buffer, vals ...any) {
	for _, v := range vals {
		binary.Write(b, binary.LittleEndian, v)
	}
}

// overlappingArchive is a zip whose central directory lists n records,
// folder/data/0 … folder/data/<n-1>, that all point at the same stored
// bytes, data: each reads back whole, CRC included, from one copy on disk.
// Its first records are folder/data.pkl (pkl) and folder/version.
func overlappingArchive(folder string, pkl, data []byte, n int) []byte {
	var b bytes.Buffer
	type entry struct {
		name   string
		crc    uint32
		size   int
		offset int
	}
	var central []entry
	local := func(name string, body []byte) entry {
		e := entry{name, crc32.ChecksumIEEE(body), len(body), b.Len()}
		put(&b, uint32(0x04034b50), uint16(20), uint16(0), uint16(0), uint32(0),
			e.crc, uint32(e.size), uint32(e.size), uint16(len(name)), uint16(0))
		b.WriteString(name)
		b.Write(body)
		return e
	}
	central = append(central, local(folder+"/data.pkl", pkl), local(folder+"/version", []byte("3\n")))
	shared := local(folder+"/data/0", data)
	for i := range n {
		e := shared
		e.name = fmt.Sprintf("%s/data/%d", folder, i)
		central = append(central, e)
	}
	start := b.Len()
	for _, e := range central {
		put(&b, uint32(0x02014b50), uint16(20), uint16(20), uint16(0), uint16(0), uint32(0),
			e.crc, uint32(e.size), uint32(e.size), uint16(len(e.name)), uint16(0), uint16(0), uint16(0), uint16(0), uint32(0), uint32(e.offset))
		b.WriteString(e.name)
	}
	put(&b, uint32(0x06054b50), uint16(0), uint16(0), uint16(len(central)), uint16(len(central)),
		uint32(b.Len()-start), uint32(start), uint16(0))
	return b.Bytes()
}

// A small file may ask for far more memory than it holds: a view larger than
// its storage (stride 0, as torch's expand saves it), many views of one
// storage that each must be copied, zip records that overlap on disk. Read
// refuses each before allocating past Cap(size) — the records it reads
// count as much as the tensors it makes — and says what would have needed
// the memory. (The reader used to count the tensors only, against 1 GiB
// plus 8 × the size: the 735-byte expanded file took 1 GiB, twice with
// libtorch's copy, and the overlapping records were not counted at all.)
func TestReadStaysWithinCap(t *testing.T) {
	const mib = 1 << 20
	storage := make([]byte, mib)
	// n views of storage "0", each copied (one storage, several views).
	views := func(n int) []byte {
		var vs []view
		for i := range n {
			vs = append(vs, view{fmt.Sprintf("v%d", i), Float32, "0", mib / 4, 0, []int64{mib/4 - int64(i%2)}, []int64{1}})
		}
		return viewPickle(vs...)
	}
	distinctStorages := func(n int) []byte {
		var vs []view
		for i := range n {
			vs = append(vs, view{fmt.Sprintf("v%d", i), Float32, fmt.Sprint(i), mib / 4, 0, []int64{mib / 4}, []int64{1}})
		}
		return viewPickle(vs...)
	}
	tests := []struct {
		name string
		file []byte
		want string
	}{
		{"expanded view (stride 0), 1 GiB",
			buildArchive(t, "exp", record{"data.pkl", viewPickle(view{"w", Float32, "0", 1, 0, []int64{1 << 28}, []int64{0}})},
				record{"data/0", make([]byte, 4)}, record{"version", []byte("3\n")}),
			"tensor of shape [268435456] (stride [0]) needs 1073741824 bytes after"},
		{"200 copied views of one 1 MiB storage",
			buildArchive(t, "many", record{"data.pkl", views(200)}, record{"data/0", storage}, record{"version", []byte("3\n")}),
			"tensor of shape [26214"},
		{"300 overlapping 1 MiB records",
			overlappingArchive("overlap", distinctStorages(300), storage, 300),
			"record overlap/data/"},
	}
	for _, tc := range tests {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := readBytes(tc.file)
		runtime.ReadMemStats(&after)
		allocated := int64(after.TotalAlloc - before.TotalAlloc)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), fmt.Sprintf("may take %d (64 MiB + 8 × its size)", Cap(int64(len(tc.file))))) {
			t.Errorf("%s (%d bytes): got %v, want the cap, naming %q", tc.name, len(tc.file), err, tc.want)
		}
		// The pickle's own objects come on top of the cap: a few MB here.
		if limit := Cap(int64(len(tc.file))) + 4*mib; allocated > limit {
			t.Errorf("%s: %d bytes allocated, more than the cap %d", tc.name, allocated, limit)
		}
	}
	// Within the cap the same constructions read.
	if es, err := readBytes(overlappingArchive("overlap", distinctStorages(3), storage, 3)); err != nil || len(es) != 3 {
		t.Errorf("3 overlapping records: %d entries, %v", len(es), err)
	}
	if es, err := readBytes(buildArchive(t, "many", record{"data.pkl", views(3)}, record{"data/0", storage}, record{"version", []byte("3\n")})); err != nil || len(es) != 3 {
		t.Errorf("3 copied views: %d entries, %v", len(es), err)
	}
}

// Errors show what a file holds as Python would, and briefly: a nested list
// where a storage's kind belongs used to print as a Go pointer, and a long
// string went into the message whole.
func TestErrorsQuoteBriefly(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	persistent := func(kind func(p *pickler)) []byte {
		var p pickler
		p.proto()
		p.op(opEmptyDict)
		p.str("w")
		p.global("torch._utils", "_rebuild_tensor_v2")
		p.op(opMark, opMark)
		kind(&p)
		p.global("torch", "FloatStorage")
		p.str("0")
		p.str("cpu")
		p.int(4)
		p.op(opTuple, opBinPersID)
		p.int(0)
		p.intTuple([]int64{4})
		p.intTuple([]int64{1})
		p.op(opNewFalse)
		p.global("collections", "OrderedDict")
		p.op(opEmptyTuple, opReduce, opTuple, opReduce, opSetItem, opStop)
		return p.buf
	}
	tests := []struct {
		name string
		pkl  []byte
		want string
	}{
		{"nested list", persistent(func(p *pickler) {
			p.op(opEmptyList, opMark, opEmptyList, opMark)
			p.int(1)
			p.op(opAppends, opAppends)
		}), "persistent id of kind [[1]]; only 'storage' is supported"},
		{"long kind", persistent(func(p *pickler) { p.str(long) }), `persistent id of kind "` + strings.Repeat("x", 64) + `"… (1048576 bytes); only`},
	}
	for _, tc := range tests {
		err := readPickle(t, tc.pkl)
		if err == nil || !strings.Contains(err.Error(), tc.want) || len(err.Error()) > 300 {
			t.Errorf("%s: got %.300v, want %q", tc.name, err, tc.want)
		}
	}
}
