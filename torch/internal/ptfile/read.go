package ptfile

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
)

// expandFloor, plus 8 times the file's size, bounds the bytes Read allocates
// for tensors. A view can be larger than its storage (torch's expand gives a
// stride of 0), so without a bound a small malicious file could ask for any
// amount of memory; real state dicts stay far below it.
var expandFloor int64 = 1 << 30

func read(r io.ReaderAt, size int64) ([]Entry, error) {
	if size < 0 {
		return nil, fmt.Errorf("negative size %d", size)
	}
	ar, err := openArchive(r, size)
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
			return nil, fmt.Errorf("record %sbyteorder says big-endian; only little-endian files are supported", ar.folder)
		default:
			return nil, fmt.Errorf("record %sbyteorder holds %q, not little or big", ar.folder, b)
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
	limit := expandFloor
	if size < (maxInt-limit)/8 {
		limit += 8 * size
	} else {
		limit = maxInt
	}
	allocated, err := materialize(ar, u.views, limit)
	if err != nil {
		return nil, err
	}
	entries := make([]Entry, len(d.keys))
	seen := make(map[*Tensor]bool)
	for i, k := range d.keys {
		name, ok := k.(string)
		if !ok {
			return nil, fmt.Errorf("state dict key %v is a %s, not a str", k, pyType(k))
		}
		var v any
		switch x := d.vals[i].(type) {
		case *Tensor:
			// The same tensor object under two names is pickled once and
			// referenced twice; give each entry its own copy to keep
			// entries independent.
			if seen[x] {
				if int64(len(x.Data)) > limit-allocated {
					return nil, fmt.Errorf("%q: copying a tensor referenced again needs %d bytes after %d for earlier tensors; this file's size allows %d",
						name, len(x.Data), allocated, limit)
				}
				allocated += int64(len(x.Data))
				x = &Tensor{DType: x.DType, Shape: append([]int64(nil), x.Shape...), Data: bytes.Clone(x.Data)}
			}
			seen[x] = true
			v = x
		case int64, float64, string, bool:
			v = x
		default:
			return nil, fmt.Errorf("%q is a Python %s; only tensors, int, float, str and bool are supported", name, pyType(x))
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
		return fmt.Errorf("record %s%s holds %q, not a format version", ar.folder, name, b)
	}
	return nil
}

// materialize reads each storage once and fills in each tensor's Data as the
// contiguous row-major bytes of its view. A tensor that is the only view of
// its storage and covers all of it takes the record's buffer without a copy;
// the bytes of all other tensors, which it returns, must stay within limit.
func materialize(ar *archive, views []*tensorView, limit int64) (int64, error) {
	uses := make(map[string]int)
	for _, v := range views {
		uses[v.storage.key]++
	}
	buffers := make(map[string][]byte)
	var allocated int64
	for _, v := range views {
		st := v.storage
		buf, ok := buffers[st.key]
		if !ok {
			var err error
			buf, err = ar.record("data/" + st.key)
			if err != nil {
				return 0, err
			}
			es := int64(st.dtype.Size())
			if st.numel > maxInt/es || int64(len(buf)) != st.numel*es {
				return 0, fmt.Errorf("record %sdata/%s has %d bytes; its storage id says %d %v elements",
					ar.folder, st.key, len(buf), st.numel, st.dtype)
			}
			buffers[st.key] = buf
		}
		es := int64(st.dtype.Size())
		n, _ := numel(v.t.Shape) // checked by rebuildTensor
		if n > maxInt/es {
			return 0, fmt.Errorf("tensor of shape %v is too large", v.t.Shape)
		}
		nbytes := n * es
		if n == 0 {
			v.t.Data = []byte{}
			continue
		}
		if contiguous(v.t.Shape, v.stride) {
			start := v.offset * es
			if uses[st.key] == 1 && start == 0 && nbytes == int64(len(buf)) {
				v.t.Data = buf
				continue
			}
			if nbytes > limit-allocated {
				return 0, tooLarge(v, nbytes, allocated, limit)
			}
			allocated += nbytes
			v.t.Data = bytes.Clone(buf[start : start+nbytes])
			continue
		}
		if nbytes > limit-allocated {
			return 0, tooLarge(v, nbytes, allocated, limit)
		}
		allocated += nbytes
		v.t.Data = make([]byte, nbytes)
		gather(v.t.Data, buf, es, v.offset, v.t.Shape, v.stride)
	}
	return allocated, nil
}

func tooLarge(v *tensorView, nbytes, allocated, limit int64) error {
	return fmt.Errorf("tensor of shape %v (stride %v) needs %d bytes after %d for earlier tensors; this file's size allows %d",
		v.t.Shape, v.stride, nbytes, allocated, limit)
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
