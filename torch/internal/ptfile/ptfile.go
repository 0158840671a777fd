// Package ptfile reads and writes state dicts in the file format of PyTorch's
// torch.save, without libtorch: tensors are plain little-endian bytes with a
// dtype and a shape.
//
// A torch.save file is a zip archive of stored (uncompressed) records inside
// one folder: data.pkl, a pickle of the object; data/<key>, the bytes of each
// storage the pickle refers to by key; version, the format version "3\n"; and,
// from PyTorch 2.x but not 1.13, byteorder. For a state dict the pickle is a
// collections.OrderedDict of name → tensor, each tensor rebuilt by
// torch._utils._rebuild_tensor_v2 from a storage, an offset, a size and a
// stride.
//
// Write produces what torch.save(dict(model.state_dict()), f) produces: a
// plain dict rather than an OrderedDict, because libtorch's C++ reader
// (torch::pickle_load) reads a top-level OrderedDict as None. Both
// torch.load(f, weights_only=True), on PyTorch 1.13 and 2.x (except float
// values on 1.13, see Entry), and torch::pickle_load read it. Read accepts such files from PyTorch 1.13
// and 2.x, including tensors that are views (transposed, sliced, sharing a
// storage), and refuses everything else with an error that names what it
// found; it never runs or imports anything named by the file.
package ptfile

import (
	"fmt"
	"io"

	"github.com/micrograph/micrograph/internal/atomicfile"
	"github.com/micrograph/micrograph/internal/inputfile"
)

// Entry is one key of a state dict.
//
// Value is a *Tensor, or an int64, float64, string or bool, which lets a
// checkpoint carry a step, an epoch or configuration; in Python they are
// int, float, str and bool. PyTorch 1.13's weights_only loader lacks the
// pickle opcode for floats (BINFLOAT), so a file with a float64 value loads
// there only with weights_only=False; PyTorch 2.x loads it either way.
type Entry struct {
	Name  string
	Value any
}

// Tensor is a contiguous tensor's metadata and bytes.
type Tensor struct {
	DType DType
	// Shape has one size per dimension; nil or empty is a 0-d (scalar)
	// tensor, and a zero size makes the tensor empty.
	Shape []int64
	// Data holds the elements in row-major order, little-endian, so its
	// length is the product of Shape times DType.Size().
	Data []byte
}

// WriteFile writes entries, in order, to path as a torch.save file,
// replacing the file atomically: a reader sees the old file or the complete
// new one. It fails on a name used twice, a value of another type, or a
// tensor whose Data does not match its DType and Shape.
func WriteFile(path string, entries []Entry) error {
	err := atomicfile.Write(path, 0o644, func(w io.Writer) error {
		return write(w, entries)
	})
	if err != nil {
		return fmt.Errorf("ptfile: write %s: %w", path, err)
	}
	return nil
}

// ReadFile reads the torch.save file at path holding a state dict and
// returns its entries in the file's order, as Read does. Anything but a
// regular file is refused at once (inputfile.Open).
func ReadFile(path string) ([]Entry, error) {
	f, err := inputfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("ptfile: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("ptfile: %w", err)
	}
	return Read(path, f, st.Size())
}

// Read reads a torch.save file of size bytes from r, named name in errors,
// holding a state dict, and returns its entries in the file's order.
// Tensors come back contiguous, whatever view of a storage the file
// describes, and share no memory with each other. A file can describe more
// than it holds (a view larger than its storage, records that overlap), so
// it refuses, before allocating them, records and tensors that would take
// more than Cap of its size (64 MiB plus 8 times it).
func Read(name string, r io.ReaderAt, size int64) ([]Entry, error) {
	entries, err := read(r, size)
	if err != nil {
		return nil, fmt.Errorf("ptfile: %s: %w", name, err)
	}
	return entries, nil
}

// numel is the number of elements of shape, or an error if a size is
// negative or the count overflows.
func numel(shape []int64) (int64, error) {
	n := int64(1)
	for _, s := range shape {
		if s < 0 {
			return 0, fmt.Errorf("negative size in shape %v", shape)
		}
		if s != 0 && n > maxInt/s {
			return 0, fmt.Errorf("shape %v has too many elements", shape)
		}
		n *= s
	}
	return n, nil
}

const maxInt = int64(^uint(0) >> 1)
