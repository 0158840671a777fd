package ptfile

import "fmt"

// DType is the element type of a Tensor: the same values, in the same order,
// as torch.DType's (the zero value is Float32), so that package torch
// converts one to the other as a plain conversion.
type DType uint8

// The element types that torch.save state dicts commonly hold. Each is stored
// little-endian; Bool is one byte per element, 0 or 1.
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
	name string // torch's name, as in torch.float32
	size int
	// storage is the legacy storage class, in module torch, that torch.save
	// names in each storage's persistent id: it is how the file records dtype.
	storage string
}

var dtypes = [...]dtypeInfo{
	Float32:  {"float32", 4, "FloatStorage"},
	Float64:  {"float64", 8, "DoubleStorage"},
	Float16:  {"float16", 2, "HalfStorage"},
	BFloat16: {"bfloat16", 2, "BFloat16Storage"},
	Int64:    {"int64", 8, "LongStorage"},
	Int32:    {"int32", 4, "IntStorage"},
	Int16:    {"int16", 2, "ShortStorage"},
	Int8:     {"int8", 1, "CharStorage"},
	Uint8:    {"uint8", 1, "ByteStorage"},
	Bool:     {"bool", 1, "BoolStorage"},
}

func (d DType) valid() bool { return d <= Bool }

// Size is the number of bytes of one element, or 0 for an invalid DType.
func (d DType) Size() int {
	if !d.valid() {
		return 0
	}
	return dtypes[d].size
}

// String is torch's name for the type, such as "float32".
func (d DType) String() string {
	if !d.valid() {
		return fmt.Sprintf("DType(%d)", uint8(d))
	}
	return dtypes[d].name
}

// dtypeOfStorage maps a storage class name in module torch to its DType.
func dtypeOfStorage(name string) (DType, bool) {
	for d := Float32; d <= Bool; d++ {
		if dtypes[d].storage == name {
			return d, true
		}
	}
	return 0, false
}
