package torch

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"os"

	"golang.org/x/sys/cpu"
)

// NoBFloat16Env, set to 1, makes CheckBFloat16 treat the CPU as one without
// bfloat16 instructions, so that the refusal can be tested on CPUs that have
// them.
const NoBFloat16Env = "MICROGRAPH_NO_BF16"

// CheckBFloat16 is nil when d multiplies bfloat16 matrices in hardware, and
// otherwise says why not. On the CPU libtorch's bfloat16 products go through
// oneDNN, which is fast only with the avx512_bf16 or AMX-BF16 instructions
// (elsewhere it emulates them, slower than float32); on a GPU they need
// compute capability 8.0 (Ampere) or newer.
func CheckBFloat16(d Device) error {
	if d.IsCUDA() {
		return checkCapability(d, "bfloat16")
	}
	switch {
	case os.Getenv(NoBFloat16Env) == "1":
		return fmt.Errorf("this CPU is taken to lack bfloat16 instructions (%s=1)", NoBFloat16Env)
	case !cpu.X86.HasAVX512BF16 && !cpu.X86.HasAMXBF16:
		return fmt.Errorf("this CPU has neither avx512_bf16 nor amx_bf16 instructions, without which bfloat16 products are slower than float32")
	}
	return nil
}

// CheckTF32 is nil when d computes float32 products on TF32 tensor cores:
// GPUs of compute capability 8.0 or newer, never the CPU.
func CheckTF32(d Device) error {
	if !d.IsCUDA() {
		return fmt.Errorf("TF32 is a GPU number format; the CPU computes float32 products in float32")
	}
	return checkCapability(d, "TF32")
}

func checkCapability(d Device, format string) error {
	var major, minor C.int
	if err := checkErr("cuda_capability", C.mg_cuda_capability(C.int(d.Index), &major, &minor)); err != nil {
		return err
	}
	if major < 8 {
		return fmt.Errorf("%v has compute capability %d.%d; %s tensor cores need 8.0 (Ampere) or newer", d, major, minor, format)
	}
	return nil
}

// SetTF32 lets cuBLAS and cuDNN compute float32 products in TF32 (PyTorch's
// allow_tf32 switches), for the whole process.
func SetTF32(on bool) error {
	return checkErr("set_allow_tf32", C.mg_set_allow_tf32(cbool(on)))
}
