package ptfile

import (
	"archive/zip"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"strconv"
	"unicode/utf8"
)

// archiveName is the folder that holds the records. PyTorch uses the file's
// base name or "archive" and readers take whatever folder the first record is
// in; a fixed name keeps the bytes independent of the path written to.
const archiveName = "archive"

// alignment is where record data starts: PyTorch aligns every record to 64
// bytes so that storages can be memory-mapped and used in place.
const alignment = 64

// formatVersion is the content of the version record; torch.save has written
// format 3 since PyTorch 1.6 and both 1.13 and 2.x read it.
const formatVersion = "3\n"

func write(w io.Writer, entries []Entry) error {
	pkl, storages, err := encode(entries)
	if err != nil {
		return err
	}
	aw := newArchiveWriter(w, archiveName)
	// The record order is PyTorch 2.x's, less .format_version and
	// .storage_alignment: with .format_version present, 2.x may compute
	// storage offsets assuming miniz's data descriptors, which Go's archive
	// writer does not emit, so the reader must look offsets up instead.
	if err := aw.record("data.pkl", pkl); err != nil {
		return err
	}
	// Declares the storages little-endian, so that a big-endian host running
	// PyTorch 2.x swaps them; PyTorch 1.13 ignores the record.
	if err := aw.record("byteorder", []byte("little")); err != nil {
		return err
	}
	for i, data := range storages {
		if err := aw.record("data/"+strconv.Itoa(i), data); err != nil {
			return err
		}
	}
	if err := aw.record("version", []byte(formatVersion)); err != nil {
		return err
	}
	return aw.zw.Close()
}

// encode pickles entries as torch.save pickles a dict and returns the
// pickle and the storage of each tensor, in key order: storage i has key "i".
func encode(entries []Entry) ([]byte, [][]byte, error) {
	var p pickler
	var storages [][]byte
	seen := make(map[string]bool, len(entries))
	p.proto()
	// A plain dict, not the OrderedDict of a Python state_dict: libtorch's C++
	// unpickler reads a top-level OrderedDict as None, and Python dicts keep
	// insertion order anyway.
	p.op(opEmptyDict)
	// Python's pickler sends dict items in SETITEMS batches of 1000; doing
	// the same keeps the pickle what Python itself would write.
	const batch = 1000
	for i, e := range entries {
		if seen[e.Name] {
			return nil, nil, fmt.Errorf("name %q is used twice", e.Name)
		}
		seen[e.Name] = true
		if !utf8.ValidString(e.Name) {
			return nil, nil, fmt.Errorf("name %q is not valid UTF-8", e.Name)
		}
		if i%batch == 0 {
			p.op(opMark)
		}
		p.str(e.Name)
		switch v := e.Value.(type) {
		case *Tensor:
			if v == nil {
				return nil, nil, fmt.Errorf("%q: nil *Tensor", e.Name)
			}
			if err := p.tensor(v, strconv.Itoa(len(storages))); err != nil {
				return nil, nil, fmt.Errorf("%q: %w", e.Name, err)
			}
			storages = append(storages, v.Data)
		case int64:
			p.int(v)
		case float64:
			p.float(v)
		case string:
			if !utf8.ValidString(v) {
				return nil, nil, fmt.Errorf("%q: string value is not valid UTF-8", e.Name)
			}
			p.str(v)
		case bool:
			p.bool(v)
		default:
			return nil, nil, fmt.Errorf("%q: value of type %T; want *Tensor, int64, float64, string or bool", e.Name, e.Value)
		}
		if i%batch == batch-1 || i == len(entries)-1 {
			p.op(opSetItems)
		}
	}
	p.op(opStop)
	return p.buf, storages, nil
}

// pickler writes pickle protocol 2, using only opcodes that PyTorch 1.13's
// weights_only unpickler accepts (BINFLOAT excepted, see Entry).
type pickler struct {
	buf  []byte
	memo map[string]uint32 // memo index of each global and constant string already sent
}

func (p *pickler) op(ops ...byte) { p.buf = append(p.buf, ops...) }

func (p *pickler) proto() { p.op(opProto, 2) }

// memoized pushes the memo entry for key if there is one; otherwise it calls
// send and memoizes the result, as Python's pickler does for globals, which
// keeps repeated class names out of the pickle.
func (p *pickler) memoized(key string, send func()) {
	if i, ok := p.memo[key]; ok {
		if i < 256 {
			p.op(opBinGet, byte(i))
		} else {
			p.op(opLongBinGet)
			p.buf = binary.LittleEndian.AppendUint32(p.buf, i)
		}
		return
	}
	send()
	if p.memo == nil {
		p.memo = make(map[string]uint32)
	}
	i := uint32(len(p.memo))
	p.memo[key] = i
	if i < 256 {
		p.op(opBinPut, byte(i))
	} else {
		p.op(opLongBinPut)
		p.buf = binary.LittleEndian.AppendUint32(p.buf, i)
	}
}

func (p *pickler) global(module, name string) {
	p.memoized("g"+module+"\n"+name, func() {
		p.op(opGlobal)
		p.buf = append(p.buf, module+"\n"+name+"\n"...)
	})
}

func (p *pickler) str(s string) {
	p.op(opBinUnicode)
	p.buf = binary.LittleEndian.AppendUint32(p.buf, uint32(len(s)))
	p.buf = append(p.buf, s...)
}

// constStr sends a string that recurs in every tensor, memoized.
func (p *pickler) constStr(s string) { p.memoized("s"+s, func() { p.str(s) }) }

// int uses the shortest encoding, as Python's pickler does.
func (p *pickler) int(v int64) {
	switch {
	case v >= 0 && v < 1<<8:
		p.op(opBinInt1, byte(v))
	case v >= 0 && v < 1<<16:
		p.op(opBinInt2)
		p.buf = binary.LittleEndian.AppendUint16(p.buf, uint16(v))
	case v >= math.MinInt32 && v <= math.MaxInt32:
		p.op(opBinInt)
		p.buf = binary.LittleEndian.AppendUint32(p.buf, uint32(int32(v)))
	default:
		// LONG1: little-endian two's complement in as few bytes as keep the sign.
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(v))
		n := 8
		for n > 1 && ((b[n-1] == 0 && b[n-2]&0x80 == 0) || (b[n-1] == 0xff && b[n-2]&0x80 != 0)) {
			n--
		}
		p.op(opLong1, byte(n))
		p.buf = append(p.buf, b[:n]...)
	}
}

func (p *pickler) float(v float64) {
	p.op(opBinFloat)
	p.buf = binary.BigEndian.AppendUint64(p.buf, math.Float64bits(v))
}

func (p *pickler) bool(v bool) {
	if v {
		p.op(opNewTrue)
	} else {
		p.op(opNewFalse)
	}
}

func (p *pickler) intTuple(vs []int64) {
	switch len(vs) {
	case 0:
		p.op(opEmptyTuple)
		return
	case 1, 2, 3:
	default:
		p.op(opMark)
	}
	for _, v := range vs {
		p.int(v)
	}
	switch len(vs) {
	case 1:
		p.op(opTuple1)
	case 2:
		p.op(opTuple2)
	case 3:
		p.op(opTuple3)
	default:
		p.op(opTuple)
	}
}

// tensor sends
//
//	torch._utils._rebuild_tensor_v2(
//	    persistent_load(('storage', torch.<Type>Storage, key, 'cpu', numel)),
//	    0, size, stride, False, collections.OrderedDict())
//
// which is what torch.save writes for a contiguous CPU tensor.
func (p *pickler) tensor(t *Tensor, key string) error {
	if !t.DType.valid() {
		return fmt.Errorf("invalid dtype %v", t.DType)
	}
	n, err := numel(t.Shape)
	if err != nil {
		return err
	}
	if n > maxInt/int64(t.DType.Size()) || int64(len(t.Data)) != n*int64(t.DType.Size()) {
		return fmt.Errorf("%v tensor of shape %v needs %d elements of %d bytes, Data has %d bytes",
			t.DType, t.Shape, n, t.DType.Size(), len(t.Data))
	}
	stride, err := contiguousStride(t.Shape)
	if err != nil {
		return err
	}
	p.rebuild(t.DType, key, n, 0, t.Shape, stride)
	return nil
}

// rebuild sends the call that rebuilds a tensor as a view of a storage with
// key and numel elements of dtype.
func (p *pickler) rebuild(dtype DType, key string, storageNumel, offset int64, size, stride []int64) {
	p.global("torch._utils", "_rebuild_tensor_v2")
	p.op(opMark)
	p.op(opMark)
	p.constStr("storage")
	p.global("torch", dtypes[dtype].storage)
	p.str(key)
	p.constStr("cpu")
	p.int(storageNumel)
	p.op(opTuple, opBinPersID)
	p.int(offset)
	p.intTuple(size)
	p.intTuple(stride)
	p.bool(false)
	p.global("collections", "OrderedDict")
	p.op(opEmptyTuple, opReduce)
	p.op(opTuple, opReduce)
}

// contiguousStride is the row-major stride PyTorch gives shape: sizes of 0
// count as 1, so an empty tensor gets the strides torch.empty would give it.
func contiguousStride(shape []int64) ([]int64, error) {
	stride := make([]int64, len(shape))
	s := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		stride[i] = s
		d := max(shape[i], 1)
		if s > maxInt/d {
			return nil, fmt.Errorf("shape %v is too large", shape)
		}
		s *= d
	}
	return stride, nil
}

// archiveWriter writes records as PyTorch's zip writer lays them out: stored,
// each in folder, with the data aligned to 64 bytes by padding in a
// local-header extra field.
type archiveWriter struct {
	cw     *countingWriter
	zw     *zip.Writer
	folder string
}

func newArchiveWriter(w io.Writer, folder string) *archiveWriter {
	cw := &countingWriter{w: w}
	return &archiveWriter{cw: cw, zw: zip.NewWriter(cw), folder: folder}
}

// countingWriter counts what reaches the destination; after zip.Writer.Flush
// that is the offset of the next local header.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

const (
	localHeaderLen = 30     // fixed part of a zip local file header
	paddingTag     = 0x4246 // "FB", the extra field id PyTorch pads with
)

func (a *archiveWriter) record(name string, data []byte) error {
	if err := a.zw.Flush(); err != nil {
		return err
	}
	full := a.folder + "/" + name
	// CreateRaw writes the local header without zip64 fields (they go to the
	// central directory only), so the data starts right after name and extra.
	start := a.cw.n + localHeaderLen + int64(len(full)) + 4
	pad := (alignment - start%alignment) % alignment
	extra := make([]byte, 4+pad)
	binary.LittleEndian.PutUint16(extra[0:], paddingTag)
	binary.LittleEndian.PutUint16(extra[2:], uint16(pad))
	for i := 4; i < len(extra); i++ {
		extra[i] = 'Z' // PyTorch's filler byte
	}
	size := uint64(len(data))
	fh := &zip.FileHeader{
		Name:               full,
		Method:             zip.Store,
		CRC32:              crc32.ChecksumIEEE(data),
		CompressedSize64:   size,
		UncompressedSize64: size,
		Extra:              extra,
		CreatorVersion:     20,
		ReaderVersion:      20,
	}
	if size >= math.MaxUint32 {
		fh.ReaderVersion = 45 // zip64
	}
	// CreateRaw rather than CreateHeader: it takes the CRC and sizes up front
	// and writes no data descriptor, so each header's offset is known here.
	fw, err := a.zw.CreateRaw(fh)
	if err != nil {
		return err
	}
	_, err = fw.Write(data)
	return err
}
