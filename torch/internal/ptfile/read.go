package ptfile

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
)

// expandFloor, plus 8 times the file's size, bounds the bytes Read
// allocates for the records it reads and the tensors it returns (Cap). A
// file can ask for more than it holds: a view may be larger than its
// storage (torch's expand gives a stride of 0), records of the zip may
// overlap, one storage may back many views, and each such view is a copy.
// A real state dict takes its own size, or twice it when every tensor is a
// view that must be copied; an expanded buffer in one is small.
var expandFloor int64 = 64 << 20

// Cap is the most memory Read allocates, for the records it reads and the
// tensors it returns, for a file of size bytes: 64 MiB plus 8 times size.
// The pickle's own objects (dict, keys, tuples) come on top, a small
// multiple of its size.
func Cap(size int64) int64 {
	if size > (maxInt-expandFloor)/8 {
		return maxInt
	}
	return expandFloor + 8*size
}

// budget counts the bytes a read has allocated against Cap.
type budget struct {
	used, limit int64
}

// take counts n more bytes, for what, or refuses them beyond the limit.
func (b *budget) take(n int64, what string) error {
	if n > b.limit-b.used {
		return fmt.Errorf("%s needs %d bytes after %d for earlier records and tensors; a file of this size may take %d (64 MiB + 8 × its size)",
			what, n, b.used, b.limit)
	}
	b.used += n
	return nil
}

func read(r io.ReaderAt, size int64) ([]Entry, error) {
	if size < 0 {
		return nil, fmt.Errorf("negative size %d", size)
	}
	ar, err := openArchive(r, size, &budget{limit: Cap(size)})
	if err != nil {
		return nil, err
	}
	if err := checkVersion(ar); err != nil {
		return nil, err
	}
	if ar.has("byteorder") {
		b, err := ar.record("byteorder")
		if err != nil {
			return nil, err
		}
		switch string(b) {
		case "little":
		case "big":
			return nil, fmt.Errorf("record %s says big-endian; only little-endian files are supported", ar.name("byteorder"))
		default:
			return nil, fmt.Errorf("record %s holds %s, not little or big", ar.name("byteorder"), quote(string(b)))
		}
	}
	pkl, err := ar.record("data.pkl")
	if err != nil {
		return nil, err
	}
	u := &unpickler{data: pkl}
	obj, err := u.load()
	if err != nil {
		return nil, err
	}
	d, ok := obj.(*pyDict)
	if !ok {
		return nil, fmt.Errorf("file holds a %s, not a state dict (dict or OrderedDict)", pyType(obj))
	}
	if err := materialize(ar, u.views); err != nil {
		return nil, err
	}
	entries := make([]Entry, len(d.keys))
	seen := make(map[*Tensor]bool)
	for i, k := range d.keys {
		name, ok := k.(string)
		if !ok {
			return nil, fmt.Errorf("state dict key %s is a %s, not a str", pyRepr(k), pyType(k))
		}
		var v any
		switch x := d.vals[i].(type) {
		case *Tensor:
			// The same tensor object under two names is pickled once and
			// referenced twice; give each entry its own copy to keep
			// entries independent.
			if seen[x] {
				if err := ar.budget.take(int64(len(x.Data)), fmt.Sprintf("%s: copying a tensor referenced again", quote(name))); err != nil {
					return nil, err
				}
				x = &Tensor{DType: x.DType, Shape: append([]int64(nil), x.Shape...), Data: bytes.Clone(x.Data)}
			}
			seen[x] = true
			v = x
		case int64, float64, string, bool:
			v = x
		default:
			return nil, fmt.Errorf("%s is a Python %s; only tensors, int, float, str and bool are supported", quote(name), pyType(x))
		}
		entries[i] = Entry{Name: name, Value: v}
	}
	return entries, nil
}

// checkVersion requires the version record that PyTorch's reader requires.
func checkVersion(ar *archive) error {
	name := "version"
	if ar.has(".data/version") {
		name = ".data/version" // where newer PyTorch looks first
	}
	b, err := ar.record(name)
	if err != nil {
		return err
	}
	v, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil || v == 0 {
		return fmt.Errorf("record %s holds %s, not a format version", ar.name(name), quote(string(b)))
	}
	return nil
}

// materialize reads each storage once and fills in each tensor's Data as the
// contiguous row-major bytes of its view. A tensor that is the only view of
// its storage and covers all of it takes the record's buffer without a copy;
// every other tensor's bytes are counted against the archive's budget,
// before they are allocated, as the records were.
func materialize(ar *archive, views []*tensorView) error {
	uses := make(map[string]int)
	for _, v := range views {
		uses[v.storage.key]++
	}
	buffers := make(map[string][]byte)
	for _, v := range views {
		st := v.storage
		buf, ok := buffers[st.key]
		if !ok {
			var err error
			buf, err = ar.record("data/" + st.key)
			if err != nil {
				return err
			}
			es := int64(st.dtype.Size())
			if st.numel > maxInt/es || int64(len(buf)) != st.numel*es {
				return fmt.Errorf("record %s has %d bytes; its storage id says %d %v elements",
					ar.name("data/"+st.key), len(buf), st.numel, st.dtype)
			}
			buffers[st.key] = buf
		}
		es := int64(st.dtype.Size())
		n, _ := numel(v.t.Shape) // checked by rebuildTensor
		if n > maxInt/es {
			return fmt.Errorf("tensor of shape %v is too large", v.t.Shape)
		}
		nbytes := n * es
		if n == 0 {
			v.t.Data = []byte{}
			continue
		}
		start := v.offset * es
		whole := contiguous(v.t.Shape, v.stride)
		if whole && uses[st.key] == 1 && start == 0 && nbytes == int64(len(buf)) {
			v.t.Data = buf
			continue
		}
		if err := ar.budget.take(nbytes, fmt.Sprintf("tensor of shape %v (stride %v)", v.t.Shape, v.stride)); err != nil {
			return err
		}
		if whole {
			v.t.Data = bytes.Clone(buf[start : start+nbytes])
			continue
		}
		v.t.Data = make([]byte, nbytes)
		gather(v.t.Data, buf, es, v.offset, v.t.Shape, v.stride)
	}
	return nil
}

// contiguous reports whether a view with at least one element is row-major
// without gaps; dimensions of size 1 may have any stride.
func contiguous(size, stride []int64) bool {
	want := int64(1)
	for i := len(size) - 1; i >= 0; i-- {
		if size[i] != 1 && stride[i] != want {
			return false
		}
		want *= size[i]
	}
	return true
}

// gather copies the elements of a strided view of src, all sizes positive,
// into dst in row-major order.
func gather(dst, src []byte, es, offset int64, size, stride []int64) {
	nd := len(size)
	if nd == 0 {
		copy(dst, src[offset*es:(offset+1)*es])
		return
	}
	inner, istride := size[nd-1], stride[nd-1]
	idx := make([]int64, nd-1) // position in the outer dimensions
	base := offset             // storage index of the current row's first element
	out := int64(0)
	for {
		if istride == 1 {
			n := inner * es
			copy(dst[out:out+n], src[base*es:base*es+n])
			out += n
		} else {
			p := base
			for j := int64(0); j < inner; j++ {
				copy(dst[out:out+es], src[p*es:(p+1)*es])
				out += es
				p += istride
			}
		}
		d := nd - 2
		for ; d >= 0; d-- {
			idx[d]++
			base += stride[d]
			if idx[d] < size[d] {
				break
			}
			base -= stride[d] * size[d]
			idx[d] = 0
		}
		if d < 0 {
			return
		}
	}
}
