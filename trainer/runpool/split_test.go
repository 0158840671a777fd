package runpool_test

import (
	"testing"

	"github.com/micrograph/micrograph/trainer/runpool"
)

// How an evaluation's runs spread: by default one process per core, each
// run on one thread, no more processes than runs (the cores left over as
// threads), nor than the memory allows; Threads T alone gives cores/T
// processes of T threads; Jobs N alone N processes sharing the cores (Jobs
// 1: one process with every core); both as given; a GPU one run at a time.
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
		{"4 threads on 16 cores", 0, 4, 40, 16, 0, false, 4, 4},
		{"32 threads on 16 cores", 0, 32, 40, 16, 0, false, 1, 32},
		{"1 job: one process with every core", 1, 0, 40, 16, 0, false, 1, 16},
		{"4 jobs on 16 cores", 4, 0, 40, 16, 0, false, 4, 4},
		{"4 jobs, 2 runs", 4, 0, 2, 16, 0, false, 4, 8},
		{"3 jobs of 2 threads", 3, 2, 40, 16, 0, false, 3, 2},
		{"a GPU", 0, 0, 40, 16, 0, true, 1, 16},
		{"a GPU, 2 threads", 0, 2, 40, 16, 0, true, 1, 2},
		{"a GPU, 2 jobs", 2, 0, 40, 16, 0, true, 2, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := runpool.SplitRuns(runpool.SplitRequest{Jobs: tc.jobs, Threads: tc.threads, Runs: tc.runs, Cores: tc.cores, Available: tc.memory, GPU: tc.gpu})
			if s.Jobs != tc.wantJobs || s.Threads != tc.wantThreads {
				t.Errorf("%d jobs of %d threads, want %d of %d", s.Jobs, s.Threads, tc.wantJobs, tc.wantThreads)
			}
		})
	}
}
