package ptfile

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/micrograph/micrograph/internal/inputfile"
)

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
