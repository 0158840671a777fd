package torch

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// DeviceType is the kind of a device. Values are c10::DeviceType codes.
type DeviceType int8

// Device kinds.
const (
	CPUType  DeviceType = 0
	CUDAType DeviceType = 1
)

// Device is where a tensor lives. The zero value is the CPU.
type Device struct {
	Type  DeviceType
	Index int
}

// CPU is the host.
var CPU = Device{}

// CUDA is GPU number index.
func CUDA(index int) Device { return Device{Type: CUDAType, Index: index} }

func (d Device) String() string {
	if d.Type == CPUType {
		return "cpu"
	}
	return "cuda:" + strconv.Itoa(d.Index)
}

// IsCUDA reports whether d is a GPU.
func (d Device) IsCUDA() bool { return d.Type == CUDAType }

// DeviceNames says which device names ParseDevice reads.
const DeviceNames = "cpu, cuda, cuda:N or auto"

// ErrDeviceName is wrapped by ParseDevice's error for a name it cannot read
// (as against a device that is not there); it says what the name must be.
var ErrDeviceName = errors.New("must be " + DeviceNames)

// deviceIndex reads the form of a device name without asking CUDA, so that a
// typo can be refused before any work: the GPU index (0 for "cuda"), or -1
// for "cpu" and "auto".
func deviceIndex(s string) (int, error) {
	if s == "cpu" || s == "auto" {
		return -1, nil
	}
	rest, ok := strings.CutPrefix(s, "cuda")
	if !ok {
		return 0, fmt.Errorf("device %q %w", s, ErrDeviceName)
	}
	if rest == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(strings.TrimPrefix(rest, ":"))
	if err != nil || !strings.HasPrefix(rest, ":") || n < 0 {
		return 0, fmt.Errorf("device %q %w", s, ErrDeviceName)
	}
	return n, nil
}

// ParseDevice reads "cpu", "cuda" (GPU 0), "cuda:N", or "auto" (GPU 0 when
// CUDA works, else the CPU). A GPU that is not there is an error; a name
// of none of these forms is an error wrapping ErrDeviceName.
func ParseDevice(s string) (Device, error) {
	index, err := deviceIndex(s)
	switch {
	case err != nil:
		return CPU, err
	case s == "cpu":
		return CPU, nil
	case s == "auto":
		if CUDAAvailable() {
			return CUDA(0), nil
		}
		return CPU, nil
	}
	if count := CUDADeviceCount(); index >= count {
		if count == 0 {
			return CPU, fmt.Errorf("device %q: CUDA is not available (libtorch %s)", s, Version())
		}
		return CPU, fmt.Errorf("device %q: only %d CUDA device(s)", s, count)
	}
	return CUDA(index), nil
}

// CUDADeviceCount is the number of usable GPUs (0 without CUDA).
func CUDADeviceCount() int { return int(C.mg_cuda_device_count()) }

// CUDAAvailable reports whether at least one GPU is usable.
func CUDAAvailable() bool { return CUDADeviceCount() > 0 }

// Synchronize waits for all work queued on d; it does nothing for the CPU.
func Synchronize(d Device) error {
	if !d.IsCUDA() {
		return nil
	}
	return checkErr("synchronize", C.mg_cuda_synchronize(C.int(d.Index)))
}

// PeakMemory is the most memory the caching allocator has held for tensors on
// GPU d since the last reset; reset starts a new count. It fails on the CPU
// and when the shim was built without CUDA.
func PeakMemory(d Device, reset bool) (int64, error) {
	if !d.IsCUDA() {
		return 0, fmt.Errorf("peak memory: %v is not a GPU", d)
	}
	var peak C.int64_t
	if err := checkErr("peak_memory", C.mg_cuda_peak_memory(C.int(d.Index), cbool(reset), &peak)); err != nil {
		return 0, err
	}
	return int64(peak), nil
}
