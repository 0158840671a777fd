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

// How finetune, linear-eval and suite spread their runs: by default one
// process per core, each run on one thread, no more processes than runs
// (the cores left over as threads), nor than the memory allows; --threads
// T alone gives cores/T processes of T threads; --jobs N alone N processes
// sharing the cores (--jobs 1: one process with every core, as before
// runs were spread); both as given; a GPU one run at a time.
func TestSplitRuns(t *testing.T) {
	const gib = 1 << 30
	for _, tc := range []struct {
		name                       string
		jobs, threads, runs, cores int
		memory                     int64
		gpu                        bool
		wantJobs, wantThreads      int
	}{
		{"default, 2 cores, 10 runs", 0, 0, 10, 2, 0, false, 2, 1},
		{"default, 16 cores, 40 runs", 0, 0, 40, 16, 0, false, 16, 1},
		{"default, 16 cores, 3 runs", 0, 0, 3, 16, 0, false, 3, 5},
		{"default, one run: every core as threads", 0, 0, 1, 16, 0, false, 1, 16},
		{"default, one core", 0, 0, 10, 1, 0, false, 1, 1},
		{"default, memory for 4", 0, 0, 40, 16, 3*gib + 1, false, 4, 4},
		{"default, memory for one", 0, 0, 40, 16, gib - 1, false, 1, 16},
		{"--threads 4 on 16 cores", 0, 4, 40, 16, 0, false, 4, 4},
		{"--threads 32 on 16 cores", 0, 32, 40, 16, 0, false, 1, 32},
		{"--jobs 1: before runs were spread", 1, 0, 40, 16, 0, false, 1, 16},
		{"--jobs 4 on 16 cores", 4, 0, 40, 16, 0, false, 4, 4},
		{"--jobs 4, 2 runs", 4, 0, 2, 16, 0, false, 4, 8},
		{"--jobs 3 --threads 2", 3, 2, 40, 16, 0, false, 3, 2},
		{"a GPU", 0, 0, 40, 16, 0, true, 1, 16},
		{"a GPU, --threads 2", 0, 2, 40, 16, 0, true, 1, 2},
		{"a GPU, --jobs 2", 2, 0, 40, 16, 0, true, 2, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := splitRuns(tc.jobs, tc.threads, tc.runs, tc.cores, tc.memory, tc.gpu)
			if s.jobs != tc.wantJobs || s.threads != tc.wantThreads {
				t.Errorf("%d jobs of %d threads, want %d of %d", s.jobs, s.threads, tc.wantJobs, tc.wantThreads)
			}
		})
	}
}
