package torch

import "fmt"

// DType is a tensor's element type. The zero value is Float32.
type DType int8

// The element types micrograph uses.
const (
	Float32 DType = iota
	Float64
	Float16
	BFloat16
	Int64
	Int32
	Int16
	Int8
	Uint8
	Bool
)

type dtypeInfo struct {
	name   string
	size   int
	scalar int // c10::ScalarType code
}

var dtypes = [...]dtypeInfo{
	Float32:  {"float32", 4, 6},
	Float64:  {"float64", 8, 7},
	Float16:  {"float16", 2, 5},
	BFloat16: {"bfloat16", 2, 15},
	Int64:    {"int64", 8, 4},
	Int32:    {"int32", 4, 3},
	Int16:    {"int16", 2, 2},
	Int8:     {"int8", 1, 1},
	Uint8:    {"uint8", 1, 0},
	Bool:     {"bool", 1, 11},
}

func (d DType) String() string {
	if int(d) < len(dtypes) && d >= 0 {
		return dtypes[d].name
	}
	return fmt.Sprintf("DType(%d)", int(d))
}

// Size is the number of bytes of one element.
func (d DType) Size() int { return dtypes[d].size }

func (d DType) scalarType() int { return dtypes[d].scalar }

func dtypeOfScalarType(code int) DType {
	for d, info := range dtypes {
		if info.scalar == code {
			return DType(d)
		}
	}
	panic(&Error{Op: "dtype", Msg: fmt.Sprintf("unsupported c10::ScalarType %d", code)})
}

// Element is a Go type that tensors can be built from and read into.
type Element interface {
	float32 | float64 | int64 | int32 | int16 | int8 | uint8 | bool
}

// DTypeOf is the dtype holding elements of type T.
func DTypeOf[T Element]() DType {
	var zero T
	switch any(zero).(type) {
	case float32:
		return Float32
	case float64:
		return Float64
	case int64:
		return Int64
	case int32:
		return Int32
	case int16:
		return Int16
	case int8:
		return Int8
	case uint8:
		return Uint8
	default:
		return Bool
	}
}
