// Package libtorchread reads torch.save files with libtorch's own C++ reader
// (torch::pickle_load). It exists for the tests of package torch, which check
// that libtorch reads the files Save writes; nothing in the program imports
// it. It links build/lib/libmgtorch_testing.so, which `make shim` builds.
package libtorchread

/*
#cgo CFLAGS: -I${SRCDIR}/shim
#cgo LDFLAGS: -L${SRCDIR}/../../../build/lib -Wl,-rpath,${SRCDIR}/../../../build/lib -lmgtorch_testing
#include <stdlib.h>
#include "read.h"
*/
import "C"

import (
	"fmt"
	"os"
	"unsafe"
)

// Entry is one tensor of a file as libtorch read it.
type Entry struct {
	Name       string
	ScalarType int     // c10::ScalarType code
	Shape      []int64 // empty for a 0-d tensor
	Data       []byte  // the contiguous bytes
}

// Read loads the file at path, which must hold a dict of str -> tensor, and
// returns its tensors in the dict's order.
func Read(path string) ([]Entry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("%s is empty", path)
	}
	var entries *C.mgt_entry
	var n C.int
	if msg := C.mgt_pickle_load(unsafe.Pointer(&data[0]), C.size_t(len(data)), &entries, &n); msg != nil {
		defer C.free(unsafe.Pointer(msg))
		return nil, fmt.Errorf("libtorch reading %s: %s", path, C.GoString(msg))
	}
	defer C.mgt_free_entries(entries, n)
	out := make([]Entry, int(n))
	for i, e := range unsafe.Slice(entries, int(n)) {
		out[i] = Entry{
			Name:       C.GoString(e.name),
			ScalarType: int(e.scalar_type),
			Shape:      append([]int64{}, unsafe.Slice((*int64)(unsafe.Pointer(e.shape)), int(e.ndim))...),
			Data:       C.GoBytes(e.data, C.int(e.nbytes)),
		}
	}
	return out, nil
}
