package ptfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/micrograph/micrograph/internal/inputfile"
)

// The unpickler is restricted in the way PyTorch's weights_only unpickler is:
// it knows a fixed list of opcodes and a fixed list of globals, and what a
// global does is implemented here, never looked up. Its lists are narrower
// still: what torch.save writes for a state dict of CPU tensors and
// primitives, in PyTorch 1.13 and 2.x.

// Values on the unpickler's stack. Python ints and floats are int64 and
// float64, str is string, bool is bool and a rebuilt tensor is *Tensor.
type (
	pyNone   struct{}
	pyBigInt struct{} // an int outside int64; an error if it is ever used
	pyTuple  []any
	pyList   struct{ items []any }
	pyDict   struct {
		ordered bool // collections.OrderedDict rather than dict
		keys    []any
		vals    []any
		index   map[any]int
	}
	pyGlobal struct{ module, name string }
	// storageRef is what persistent_load returns for a storage's id.
	storageRef struct {
		dtype DType
		key   string
		numel int64
	}
)

func (d *pyDict) set(k, v any) error {
	switch k.(type) {
	case string, int64, bool, float64, pyNone:
		// Comparable and hashable in Python too; anything else could
		// make a Go map panic.
	default:
		return fmt.Errorf("dict key of type %s is not supported", pyType(k))
	}
	if d.index == nil {
		d.index = make(map[any]int)
	}
	// Python dicts keep the first position of a key and its last value.
	if i, ok := d.index[k]; ok {
		d.vals[i] = v
		return nil
	}
	d.index[k] = len(d.keys)
	d.keys = append(d.keys, k)
	d.vals = append(d.vals, v)
	return nil
}

// quote quotes a string the file holds for a message, shortened.
func quote(s string) string { return inputfile.Quote(s) }

// pyRepr writes a value of the pickle for a message as Python's repr
// would, two levels deep, four items of a container, each string quoted
// (shortened): never Go's view of it (a pointer, for a list).
func pyRepr(v any) string { return repr(v, 2) }

func repr(v any, depth int) string {
	items := func(open, close string, xs []any) string {
		if depth == 0 {
			return open + "…" + close
		}
		var parts []string
		for i, x := range xs {
			if i == 4 {
				parts = append(parts, fmt.Sprintf("… %d more", len(xs)-4))
				break
			}
			parts = append(parts, repr(x, depth-1))
		}
		return open + strings.Join(parts, ", ") + close
	}
	switch v := v.(type) {
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case string:
		return quote(v)
	case bool:
		if v {
			return "True"
		}
		return "False"
	case pyTuple:
		return items("(", ")", v)
	case *pyList:
		return items("[", "]", v.items)
	case *pyDict:
		return fmt.Sprintf("{%d items}", len(v.keys))
	}
	return pyType(v) // None, globals, storages, tensors, big ints
}

// pyType names a value's Python type for error messages.
func pyType(v any) string {
	switch v := v.(type) {
	case pyNone:
		return "None"
	case pyBigInt:
		return "int (beyond int64)"
	case int64:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case bool:
		return "bool"
	case pyTuple:
		return "tuple"
	case *pyList:
		return "list"
	case *pyDict:
		if v.ordered {
			return "collections.OrderedDict"
		}
		return "dict"
	case pyGlobal:
		return inputfile.Shorten(v.module + "." + v.name)
	case storageRef:
		return "storage"
	case *Tensor:
		return "tensor"
	}
	return fmt.Sprintf("%T", v)
}

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

type unpickler struct {
	data     []byte
	pos      int
	stack    []any
	marks    []int // stack heights at each open MARK
	memo     map[uint32]any
	views    []*tensorView
	storages map[string]storageRef // every storage id seen, by key
}

func (u *unpickler) errorf(format string, args ...any) error {
	return fmt.Errorf("data.pkl at byte %d: %s", u.pos, fmt.Sprintf(format, args...))
}

var errTruncated = errors.New("truncated")

func (u *unpickler) take(n int) ([]byte, error) {
	if n < 0 || n > len(u.data)-u.pos {
		return nil, errTruncated
	}
	b := u.data[u.pos : u.pos+n]
	u.pos += n
	return b, nil
}

func (u *unpickler) line() (string, error) {
	i := bytes.IndexByte(u.data[u.pos:], '\n')
	if i < 0 {
		return "", errTruncated
	}
	s := string(u.data[u.pos : u.pos+i])
	u.pos += i + 1
	return s, nil
}

func (u *unpickler) push(v any) { u.stack = append(u.stack, v) }

// floor is the lowest stack index the current MARK lets ops reach.
func (u *unpickler) floor() int {
	if len(u.marks) == 0 {
		return 0
	}
	return u.marks[len(u.marks)-1]
}

func (u *unpickler) pop() (any, error) {
	if len(u.stack) <= u.floor() {
		return nil, errors.New("stack underflow")
	}
	v := u.stack[len(u.stack)-1]
	u.stack = u.stack[:len(u.stack)-1]
	return v, nil
}

func (u *unpickler) top() (any, error) {
	if len(u.stack) <= u.floor() {
		return nil, errors.New("stack underflow")
	}
	return u.stack[len(u.stack)-1], nil
}

func (u *unpickler) popMark() ([]any, error) {
	if len(u.marks) == 0 {
		return nil, errors.New("no MARK to pop to")
	}
	m := u.marks[len(u.marks)-1]
	u.marks = u.marks[:len(u.marks)-1]
	items := append([]any(nil), u.stack[m:]...)
	u.stack = u.stack[:m]
	return items, nil
}

// load runs the pickle and returns the object it builds.
func (u *unpickler) load() (any, error) {
	u.memo = make(map[uint32]any)
	u.storages = make(map[string]storageRef)
	for {
		if u.pos >= len(u.data) {
			return nil, u.errorf("pickle ends without STOP (truncated?)")
		}
		at := u.pos
		op := u.data[u.pos]
		u.pos++
		done, err := u.step(op)
		if err != nil {
			if err == errTruncated {
				return nil, fmt.Errorf("data.pkl at byte %d: %s is truncated", at, opName(op))
			}
			return nil, fmt.Errorf("data.pkl at byte %d, %s: %w", at, opName(op), err)
		}
		if done {
			if len(u.stack) != 1 || len(u.marks) != 0 {
				return nil, u.errorf("STOP with %d values on the stack and %d open MARKs; want one value", len(u.stack), len(u.marks))
			}
			if u.pos != len(u.data) {
				return nil, u.errorf("%d bytes after STOP", len(u.data)-u.pos)
			}
			return u.stack[0], nil
		}
	}
}

// step runs one opcode; done reports STOP.
func (u *unpickler) step(op byte) (done bool, err error) {
	switch op {
	case opProto:
		b, err := u.take(1)
		if err != nil {
			return false, err
		}
		// torch.save writes protocol 2; newer ones need opcodes not handled
		// here, which are refused one by one if they appear.
		if b[0] > 5 {
			return false, fmt.Errorf("unknown pickle protocol %d", b[0])
		}
	case opStop:
		return true, nil
	case opMark:
		u.marks = append(u.marks, len(u.stack))
	case opNone:
		u.push(pyNone{})
	case opNewTrue:
		u.push(true)
	case opNewFalse:
		u.push(false)
	case opBinInt1:
		b, err := u.take(1)
		if err != nil {
			return false, err
		}
		u.push(int64(b[0]))
	case opBinInt2:
		b, err := u.take(2)
		if err != nil {
			return false, err
		}
		u.push(int64(binary.LittleEndian.Uint16(b)))
	case opBinInt:
		b, err := u.take(4)
		if err != nil {
			return false, err
		}
		u.push(int64(int32(binary.LittleEndian.Uint32(b))))
	case opLong1:
		n, err := u.take(1)
		if err != nil {
			return false, err
		}
		b, err := u.take(int(n[0]))
		if err != nil {
			return false, err
		}
		u.push(decodeLong(b))
	case opBinFloat:
		b, err := u.take(8)
		if err != nil {
			return false, err
		}
		u.push(math.Float64frombits(binary.BigEndian.Uint64(b)))
	case opBinUnicode:
		b, err := u.take(4)
		if err != nil {
			return false, err
		}
		s, err := u.take(int(binary.LittleEndian.Uint32(b)))
		if err != nil {
			return false, err
		}
		if !utf8.Valid(s) {
			return false, errors.New("string is not valid UTF-8")
		}
		u.push(string(s))
	case opEmptyTuple:
		u.push(pyTuple{})
	case opTuple:
		items, err := u.popMark()
		if err != nil {
			return false, err
		}
		u.push(pyTuple(items))
	case opTuple1, opTuple2, opTuple3:
		n := int(op-opTuple1) + 1
		if len(u.stack)-u.floor() < n {
			return false, errors.New("stack underflow")
		}
		t := append(pyTuple(nil), u.stack[len(u.stack)-n:]...)
		u.stack = append(u.stack[:len(u.stack)-n], t)
	case opEmptyList:
		u.push(&pyList{})
	case opAppend:
		v, err := u.pop()
		if err != nil {
			return false, err
		}
		return false, u.appendTo([]any{v})
	case opAppends:
		items, err := u.popMark()
		if err != nil {
			return false, err
		}
		return false, u.appendTo(items)
	case opEmptyDict:
		u.push(&pyDict{})
	case opSetItem:
		v, err := u.pop()
		if err != nil {
			return false, err
		}
		k, err := u.pop()
		if err != nil {
			return false, err
		}
		return false, u.setItems([]any{k, v})
	case opSetItems:
		items, err := u.popMark()
		if err != nil {
			return false, err
		}
		if len(items)%2 != 0 {
			return false, errors.New("odd number of items")
		}
		return false, u.setItems(items)
	case opBinPut, opLongBinPut:
		i, err := u.memoIndex(op == opLongBinPut)
		if err != nil {
			return false, err
		}
		v, err := u.top()
		if err != nil {
			return false, err
		}
		u.memo[i] = v
	case opBinGet, opLongBinGet:
		i, err := u.memoIndex(op == opLongBinGet)
		if err != nil {
			return false, err
		}
		v, ok := u.memo[i]
		if !ok {
			return false, fmt.Errorf("memo entry %d was never stored", i)
		}
		u.push(v)
	case opGlobal:
		module, err := u.line()
		if err != nil {
			return false, err
		}
		name, err := u.line()
		if err != nil {
			return false, err
		}
		g := pyGlobal{module, name}
		if !allowedGlobals[g] {
			if _, ok := dtypeOfStorage(name); !ok || module != "torch" {
				return false, fmt.Errorf("global %s is not allowed (only what torch.save writes for a state dict of CPU tensors of dtypes %s)", pyType(g), dtypeList())
			}
		}
		u.push(g)
	case opBinPersID:
		pid, err := u.pop()
		if err != nil {
			return false, err
		}
		ref, err := u.persistentLoad(pid)
		if err != nil {
			return false, err
		}
		u.push(ref)
	case opReduce:
		args, err := u.pop()
		if err != nil {
			return false, err
		}
		fn, err := u.top()
		if err != nil {
			return false, err
		}
		tuple, ok := args.(pyTuple)
		if !ok {
			return false, fmt.Errorf("arguments are a %s, not a tuple", pyType(args))
		}
		v, err := u.call(fn, tuple)
		if err != nil {
			return false, err
		}
		u.stack[len(u.stack)-1] = v
	case opBuild:
		state, err := u.pop()
		if err != nil {
			return false, err
		}
		inst, err := u.top()
		if err != nil {
			return false, err
		}
		// state_dict() returns an OrderedDict with a _metadata attribute,
		// which the pickle sets with BUILD; it means nothing here.
		if d, ok := inst.(*pyDict); !ok || !d.ordered {
			return false, fmt.Errorf("BUILD of a %s (state %s); only an OrderedDict's attributes may be set", pyType(inst), pyType(state))
		}
	default:
		return false, errors.New("opcode is not one that torch.save writes for a state dict")
	}
	return false, nil
}

func (u *unpickler) memoIndex(long bool) (uint32, error) {
	if long {
		b, err := u.take(4)
		if err != nil {
			return 0, err
		}
		return binary.LittleEndian.Uint32(b), nil
	}
	b, err := u.take(1)
	if err != nil {
		return 0, err
	}
	return uint32(b[0]), nil
}

func (u *unpickler) appendTo(items []any) error {
	t, err := u.top()
	if err != nil {
		return err
	}
	l, ok := t.(*pyList)
	if !ok {
		return fmt.Errorf("append to a %s", pyType(t))
	}
	l.items = append(l.items, items...)
	return nil
}

func (u *unpickler) setItems(items []any) error {
	t, err := u.top()
	if err != nil {
		return err
	}
	d, ok := t.(*pyDict)
	if !ok {
		return fmt.Errorf("set item of a %s", pyType(t))
	}
	for i := 0; i < len(items); i += 2 {
		if err := d.set(items[i], items[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// decodeLong decodes LONG1's little-endian two's complement.
func decodeLong(b []byte) any {
	if len(b) == 0 {
		return int64(0)
	}
	neg := b[len(b)-1]&0x80 != 0
	// Bytes beyond the eighth must only extend the sign for the value to fit.
	if len(b) > 8 {
		ext := byte(0)
		if b[7]&0x80 != 0 {
			ext = 0xff
		}
		for _, c := range b[8:] {
			if c != ext {
				return pyBigInt{}
			}
		}
		b = b[:8]
	}
	var v uint64
	for i := len(b) - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	if neg && len(b) < 8 {
		v |= ^uint64(0) << (8 * len(b))
	}
	return int64(v)
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
