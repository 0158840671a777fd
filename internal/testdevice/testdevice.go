// Package testdevice says where the device-agnostic tests run: the CPU, or
// the device named by $MICROGRAPH_TEST_DEVICE ("cuda" on a GPU machine, as
// scripts/gpu-check.sh sets it). Tests of the packages with a CUDA path
// (torch, torch/nn, torch/optim, ops, model, trainer/pretrain,
// trainer/evaluate) take their device from Get; the rest run on the CPU.
package testdevice

import (
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
	s := os.Getenv(Env)
	if s == "" {
		return torch.CPU
	}
	d, err := torch.ParseDevice(s)
	if err != nil {
		tb.Fatalf("%s=%s: %v", Env, s, err)
	}
	return d
}
