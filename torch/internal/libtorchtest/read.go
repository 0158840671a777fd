// Package libtorchtest is libtorch's own C++ code that the binding's tests
// compare against or switch: its reader of torch.save files
// (torch::pickle_load), with which the tests of package torch check that
// libtorch reads the files Save writes, and its oneDNN switch. Nothing in the
// program imports it. It links build/lib/libmgtorch_testing.so, which `make
// shim` builds.
package libtorchtest

/*
#cgo CFLAGS: -I${SRCDIR}/shim
#cgo LDFLAGS: -L${SRCDIR}/../../../build/lib -Wl,-rpath,${SRCDIR}/../../../build/lib -lmgtorch_testing
#include <stdlib.h>
#include "testing.h"
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

// SetOneDNN turns libtorch's use of oneDNN (mkldnn) on or off for the whole
// process, as torch.backends.mkldnn.enabled does, and returns the previous
// setting. Off, a bfloat16 matrix product on the CPU takes libtorch's own
// kernels, which a CPU without avx512 instructions always takes: a test can
// then check, on any CPU, the products such a CPU computes.
func SetOneDNN(on bool) (was bool) {
	return bool(C.mgt_set_onednn(C.bool(on)))
}
