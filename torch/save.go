package torch

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"unsafe"

	"github.com/micrograph/micrograph/torch/internal/ptfile"
)

// Save writes tensors, in order, and optional metadata strings to path in the
// format of Python's torch.save of a state dict: a zip with an OrderedDict
// pickle that torch.load(path, weights_only=True) reads as a plain dict, and
// that libtorch's torch::pickle_load reads too. Metadata entries follow the
// tensors, sorted by key. The file is replaced atomically: a crash leaves the
// old one.
func Save(path string, state []Named, meta map[string]string) error {
	entries := make([]ptfile.Entry, 0, len(state)+len(meta))
	for _, n := range state {
		t, err := fileTensor(n.Tensor)
		if err != nil {
			return fmt.Errorf("save %s: %s: %w", path, n.Name, err)
		}
		entries = append(entries, ptfile.Entry{Name: n.Name, Value: t})
	}
	for _, k := range slices.Sorted(maps.Keys(meta)) {
		entries = append(entries, ptfile.Entry{Name: k, Value: meta[k]})
	}
	if err := ptfile.WriteFile(path, entries); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	return nil
}

// Load reads a file written by Save or by PyTorch's torch.save of a state
// dict, with every tensor on dev and bit-identical to what was saved. String,
// integer and boolean entries come back as metadata strings. Reading takes
// at most 64 MiB plus 8 times the file's size (a file that asks for more is
// refused before it is allocated), and as much again for the tensors'
// copies in libtorch.
func Load(path string, dev Device) (state []Named, meta map[string]string, err error) {
	entries, err := ptfile.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return loadEntries(path, entries, dev)
}

// LoadFrom is Load of the size bytes of a file held by r (an embedded file,
// say), named name in errors.
func LoadFrom(name string, r io.ReaderAt, size int64, dev Device) (state []Named, meta map[string]string, err error) {
	entries, err := ptfile.Read(name, r, size)
	if err != nil {
		return nil, nil, err
	}
	return loadEntries(name, entries, dev)
}

// loadEntries makes tensors on dev and metadata strings of a file's entries.
func loadEntries(path string, entries []ptfile.Entry, dev Device) (state []Named, meta map[string]string, err error) {
	defer func() {
		if err != nil {
			for _, n := range state {
				n.Tensor.Free()
			}
			state, meta = nil, nil
		}
	}()
	meta = map[string]string{}
	for _, e := range entries {
		switch v := e.Value.(type) {
		case *ptfile.Tensor:
			t, err := tensorFromFile(v, dev)
			if err != nil {
				return state, nil, fmt.Errorf("load %s: %s: %w", path, e.Name, err)
			}
			state = append(state, Named{Name: e.Name, Tensor: t})
		case string:
			meta[e.Name] = v
		case int64:
			meta[e.Name] = strconv.FormatInt(v, 10)
		case bool:
			meta[e.Name] = strconv.FormatBool(v)
		case float64:
			meta[e.Name] = strconv.FormatFloat(v, 'g', -1, 64)
		default:
			return state, nil, fmt.Errorf("load %s: %s: unsupported value %T", path, e.Name, v)
		}
	}
	return state, meta, nil
}

func fileTensor(t *Tensor) (*ptfile.Tensor, error) {
	dt := t.DType()
	// ptfile.DType has DType's values in DType's order (TestFileDTypes).
	fdt := ptfile.DType(dt)
	if fdt.Size() == 0 {
		return nil, fmt.Errorf("dtype %s cannot be saved", dt)
	}
	data := make([]byte, int(t.Numel())*dt.Size())
	var p unsafe.Pointer
	if len(data) > 0 {
		p = unsafe.Pointer(&data[0])
	}
	if err := checkErr("save", C.mg_copy_to_host(t.c(), p, C.int64_t(len(data)))); err != nil {
		return nil, err
	}
	return &ptfile.Tensor{DType: fdt, Shape: t.Shape(), Data: data}, nil
}

func tensorFromFile(f *ptfile.Tensor, dev Device) (*Tensor, error) {
	dt := DType(f.DType)
	if f.DType.Size() == 0 {
		return nil, fmt.Errorf("dtype %s is not supported", f.DType)
	}
	var p unsafe.Pointer
	if len(f.Data) > 0 {
		p = unsafe.Pointer(&f.Data[0])
	}
	var out C.mg_tensor
	o := Options{DType: dt, Device: dev}
	if err := checkErr("load", C.mg_from_data(p, int64s(f.Shape), C.int(len(f.Shape)), o.c(), &out)); err != nil {
		return nil, err
	}
	return wrap(out), nil
}
