package main

import (
	"slices"
	"testing"

	"github.com/micrograph/micrograph/trainer/pretrain"
)

// Each process of a default split is told its threads and the settings
// that keep the split the one-process method, in place of the user's
// --threads and --nproc (none were given, but a launcher's args may hold
// them in either form).
func TestSplitArgs(t *testing.T) {
	got := splitArgs([]string{"--data", "d", "--threads=3", "--run", "r"}, pretrain.Split{Processes: 2, Threads: 1})
	want := []string{"--data", "d", "--run", "r", "--threads", "1", "--sync-batch-norm", "--global-negatives"}
	if !slices.Equal(got, want) {
		t.Errorf("splitArgs: %q, want %q", got, want)
	}
}
