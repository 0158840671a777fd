package pretrain_test

import (
	"strings"
	"testing"

	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/trainer/pretrain"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// The default split of a pre-training run over a CPU's cores: one process
// per core while the batch splits evenly into parts of at least 64
// molecules, at most 8 processes (the cores left over as threads), memory
// for each, and only for runs whose split keeps the one-process method.
func TestDefaultSplit(t *testing.T) {
	paper := runfolder.DefaultConfig() // batch 512
	paper.SyncBatchNorm, paper.GlobalNegatives = true, true
	withBatch := func(b int) runfolder.Config { c := paper; c.BatchSize = b; return c }
	perRank := paper
	perRank.GlobalNegatives = false
	released, err := runfolder.DefaultConfigOf(model.ObjectiveReleased)
	if err != nil {
		t.Fatal(err)
	}
	released.SyncBatchNorm, released.GlobalNegatives = true, true
	const gib = 1 << 30
	for _, tc := range []struct {
		name               string
		cfg                runfolder.Config
		cores              int
		memory             int64
		processes, threads int
		why                string // in the reason for one process
	}{
		{"one core", paper, 1, 0, 1, 0, ""},
		{"two cores", paper, 2, 0, 2, 1, ""},
		{"three cores: 512 is not a multiple of 3", paper, 3, 0, 2, 1, ""},
		{"four cores", paper, 4, 0, 4, 1, ""},
		{"sixteen cores: 8 processes of 2 threads", paper, 16, 0, 8, 2, ""},
		{"batch 128 on 16 cores: parts of 64", withBatch(128), 16, 0, 2, 8, ""},
		{"batch 96 on 4 cores: 3 does not divide, 2 parts of 48 are too small", withBatch(96), 4, 0, 1, 0, "does not split"},
		{"batch 8", withBatch(8), 2, 0, 1, 0, "does not split"},
		{"memory for 3 processes", paper, 8, 2*gib + 1, 2, 4, ""},
		{"memory for one", paper, 8, gib - 1, 1, 0, "MiB of free memory"},
		{"unknown memory", paper, 8, 0, 8, 1, ""},
		{"released objective", released, 4, 0, 1, 0, "released objective"},
		{"negatives per process", perRank, 4, 0, 1, 0, "global_negatives"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := pretrain.DefaultSplit(tc.cfg, tc.cores, tc.memory)
			if s.Processes != tc.processes || s.Threads != tc.threads || !strings.Contains(s.Why, tc.why) || (tc.why == "") != (s.Why == "") {
				t.Errorf("%d processes of %d threads (%q), want %d of %d (%q)", s.Processes, s.Threads, s.Why, tc.processes, tc.threads, tc.why)
			}
		})
	}
}
