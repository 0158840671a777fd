package ptfile

import (
	"bytes"
	"fmt"
)

// What the unpickler does with the few globals it knows: PyTorch's storages
// and tensor rebuilders, and collections.OrderedDict.

// The globals the unpickler accepts, besides torch.<Type>Storage for the
// supported dtypes.
var allowedGlobals = map[pyGlobal]bool{
	{"collections", "OrderedDict"}:         true, // the state dict, and backward_hooks
	{"torch._utils", "_rebuild_tensor_v2"}: true, // every tensor
	{"torch._utils", "_rebuild_parameter"}: true, // an nn.Parameter, e.g. from dict(model.named_parameters())
}

// tensorView is a tensor as the pickle describes it: a view of a storage.
// Its Data is filled in once the whole pickle has been read.
type tensorView struct {
	t       *Tensor
	storage storageRef
	offset  int64
	stride  []int64
}

// persistentLoad turns a storage id, ('storage', torch.<Type>Storage, key,
// location, numel), into a reference to record data/<key>. The location
// (cpu, cuda:0, ...) does not matter: the bytes are the same.
func (u *unpickler) persistentLoad(pid any) (any, error) {
	t, ok := pid.(pyTuple)
	if !ok || len(t) != 5 {
		return nil, fmt.Errorf("persistent id is a %s, not a 5-tuple ('storage', type, key, location, numel)", pyType(pid))
	}
	if s, _ := t[0].(string); s != "storage" {
		return nil, fmt.Errorf("persistent id of kind %s; only 'storage' is supported", pyRepr(t[0]))
	}
	g, ok := t[1].(pyGlobal)
	if !ok {
		return nil, fmt.Errorf("storage type is a %s", pyType(t[1]))
	}
	dtype, ok := dtypeOfStorage(g.name)
	if !ok || g.module != "torch" {
		return nil, fmt.Errorf("storage type %s is not supported", pyType(g))
	}
	key, ok1 := t[2].(string)
	_, ok2 := t[3].(string)
	n, ok3 := t[4].(int64)
	if !ok1 || !ok2 || !ok3 || n < 0 {
		return nil, fmt.Errorf("malformed storage id (%s, %s, %s)", pyType(t[2]), pyType(t[3]), pyType(t[4]))
	}
	ref := storageRef{dtype: dtype, key: key, numel: n}
	if old, ok := u.storages[key]; ok && old != ref {
		return nil, fmt.Errorf("storage %s is declared as %d %v elements and as %d %v elements", quote(key), old.numel, old.dtype, n, dtype)
	}
	u.storages[key] = ref
	return ref, nil
}

// call runs REDUCE of fn on args for the globals that can be called.
func (u *unpickler) call(fn any, args pyTuple) (any, error) {
	g, ok := fn.(pyGlobal)
	if !ok {
		return nil, fmt.Errorf("call of a %s", pyType(fn))
	}
	switch g {
	case pyGlobal{"collections", "OrderedDict"}:
		if len(args) != 0 {
			return nil, fmt.Errorf("collections.OrderedDict called with %d arguments; want none", len(args))
		}
		return &pyDict{ordered: true}, nil
	case pyGlobal{"torch._utils", "_rebuild_tensor_v2"}:
		return u.rebuildTensor(args)
	case pyGlobal{"torch._utils", "_rebuild_parameter"}:
		// (data, requires_grad, backward_hooks): the parameter is its data.
		if len(args) != 3 {
			return nil, fmt.Errorf("_rebuild_parameter with %d arguments; want 3", len(args))
		}
		t, ok := args[0].(*Tensor)
		if !ok {
			return nil, fmt.Errorf("_rebuild_parameter of a %s", pyType(args[0]))
		}
		return t, nil
	}
	return nil, fmt.Errorf("%s cannot be called", pyType(g))
}

// rebuildTensor handles _rebuild_tensor_v2(storage, storage_offset, size,
// stride, requires_grad, backward_hooks[, metadata]). Gradients and hooks do
// not survive into a Tensor; metadata (PyTorch 2.x, for e.g. a lazily
// negated view) would change the values, so it must be empty.
func (u *unpickler) rebuildTensor(args pyTuple) (any, error) {
	if len(args) != 6 && len(args) != 7 {
		return nil, fmt.Errorf("_rebuild_tensor_v2 with %d arguments; want 6 or 7", len(args))
	}
	st, ok := args[0].(storageRef)
	if !ok {
		return nil, fmt.Errorf("_rebuild_tensor_v2 of a %s, not a storage", pyType(args[0]))
	}
	offset, ok := args[1].(int64)
	if !ok || offset < 0 {
		return nil, fmt.Errorf("storage offset %s (%s) is not a non-negative int", pyRepr(args[1]), pyType(args[1]))
	}
	size, err := intTuple(args[2], "size")
	if err != nil {
		return nil, err
	}
	stride, err := intTuple(args[3], "stride")
	if err != nil {
		return nil, err
	}
	if len(size) != len(stride) {
		return nil, fmt.Errorf("size %v and stride %v differ in length", size, stride)
	}
	if len(args) == 7 {
		if d, ok := args[6].(*pyDict); !ok || len(d.keys) != 0 {
			return nil, fmt.Errorf("tensor metadata %s is not supported", pyType(args[6]))
		}
	}
	n, err := numel(size)
	if err != nil {
		return nil, err
	}
	if n > 0 {
		// The last element the view reaches must lie inside the storage.
		last := offset
		for i, s := range size {
			if stride[i] < 0 {
				return nil, fmt.Errorf("negative stride %v", stride)
			}
			if stride[i] != 0 && s-1 > (maxInt-last)/stride[i] {
				return nil, fmt.Errorf("size %v, stride %v and offset %d overflow", size, stride, offset)
			}
			last += (s - 1) * stride[i]
		}
		if last >= st.numel {
			return nil, fmt.Errorf("tensor of size %v, stride %v at offset %d needs element %d of storage %q, which has %d elements",
				size, stride, offset, last, st.key, st.numel)
		}
	}
	t := &Tensor{DType: st.dtype, Shape: size}
	u.views = append(u.views, &tensorView{t: t, storage: st, offset: offset, stride: stride})
	return t, nil
}

func intTuple(v any, what string) ([]int64, error) {
	t, ok := v.(pyTuple)
	if !ok {
		return nil, fmt.Errorf("%s is a %s, not a tuple", what, pyType(v))
	}
	out := make([]int64, len(t))
	for i, x := range t {
		n, ok := x.(int64)
		if !ok {
			return nil, fmt.Errorf("%s holds a %s, not an int", what, pyType(x))
		}
		out[i] = n
	}
	return out, nil
}

func dtypeList() string {
	var b bytes.Buffer
	for d := Float32; d <= Bool; d++ {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(d.String())
	}
	return b.String()
}
