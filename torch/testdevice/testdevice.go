// Package testdevice says where the device-agnostic tests run: the CPU, or
// the device named by $MICROGRAPH_TEST_DEVICE ("cuda" on a GPU machine, as
// scripts/gpu-check.sh sets it). Tests of the packages with a CUDA path
// (torch, torch/nn, torch/optim, ops, model, data/feed, trainer/pretrain,
// trainer/evaluate) take their device from Get; the rest run on the CPU.
package testdevice

import (
	"fmt"
	"os"
	"testing"

	"github.com/micrograph/micrograph/torch"
)

// Env names the variable that moves the device-agnostic tests to a device.
const Env = "MICROGRAPH_TEST_DEVICE"

// Get is the device named by $MICROGRAPH_TEST_DEVICE, else the CPU. A name
// that is no device, or a device that is not there, fails the test.
func Get(tb testing.TB) torch.Device {
	tb.Helper()
	d, err := Parse()
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// Parse is Get for a process that runs no test: a test binary re-executed
// as a child (a pre-training run to kill, a rank).
func Parse() (torch.Device, error) {
	s := os.Getenv(Env)
	if s == "" {
		return torch.CPU, nil
	}
	d, err := torch.ParseDevice(s)
	if err != nil {
		return torch.CPU, fmt.Errorf("%s=%s: %w", Env, s, err)
	}
	return d, nil
}

// cuBLAS reads its workspace setting once, at its first call, and refuses
// deterministic products without one; a test may ask for them (Deterministic,
// or a run's own Deterministic setting) after other tests used cuBLAS. So a
// test binary on a GPU sets it before any test runs; its children inherit it.
func init() {
	if os.Getenv(Env) != "" && os.Getenv("CUBLAS_WORKSPACE_CONFIG") == "" {
		os.Setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
	}
}

// Deterministic makes libtorch use deterministic algorithms for the rest of
// the test when the tests run on a GPU, where scatter-adds otherwise sum in
// a varying order: tests that compare runs bit for bit call it. On the CPU,
// where every kernel already is, it does nothing.
func Deterministic(tb testing.TB) {
	tb.Helper()
	if !Get(tb).IsCUDA() {
		return
	}
	if err := torch.SetDeterministic(true); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { torch.SetDeterministic(false) })
}
