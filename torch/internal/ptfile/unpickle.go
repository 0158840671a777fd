package ptfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// The unpickler is restricted in the way PyTorch's weights_only unpickler is:
// it knows a fixed list of opcodes and a fixed list of globals, and what a
// global does is implemented here, never looked up. Its lists are narrower
// still: what torch.save writes for a state dict of CPU tensors and
// primitives, in PyTorch 1.13 and 2.x.

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
