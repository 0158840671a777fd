package pretrain

import (
	"fmt"

	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// How pre-training uses a CPU's cores when the user leaves them to the
// default (docs/distributed.md, "The default on a CPU"). Part of a
// paper-objective step runs on one thread whatever the thread count (the
// fused pooling, normalisation and Adam; the fused aggregation, batch norm
// and dropout split only against Debian's libtorch), and threads wake and
// wait at each of its thousand-odd operators, while a second process, each
// on half of every batch, runs the whole step on both cores. So the default
// splits the batch over processes of one thread each, with batch norm and
// L_contra's negatives over the global batch, which keeps the one-process
// method (docs/method.md §3.3).
const (
	// maxDefaultProcesses caps the processes of the default split: each
	// holds its own model, optimiser, dataset and libtorch runtime, and
	// cores beyond it go to threads within each process.
	maxDefaultProcesses = 8
	// minRankBatch is the fewest molecules a process takes of each batch in
	// the default split: below it a step's fixed costs (its thousand-odd
	// operators, the collectives) outweigh the work saved.
	minRankBatch = 64
	// rankMemory is what the default split reserves in memory per process
	// beyond the first (the libtorch runtime, the dataset, the allocator's
	// pool of a step's tensors), against the memory available.
	rankMemory = 1 << 30
)

// Split is how a job uses a CPU's cores: processes sharing each batch, and
// libtorch threads in each.
type Split struct {
	Processes, Threads int
	// Why, for one process, says why not more, for the user; "" when no
	// reason is worth saying.
	Why string
}

// DefaultSplit is the default split of a pre-training run of cfg over
// cores cores with available bytes of memory free (0: unknown): as many
// processes as divide the batch evenly, up to the cores,
// maxDefaultProcesses, batch/minRankBatch and the memory, with the cores
// left over as threads in each; one process with every core as threads
// when that is one, when the run's objective trains in one process only, or
// when its settings would make a split change what it learns (a run
// without synchronised batch norm and global negatives).
func DefaultSplit(cfg runfolder.Config, cores int, available int64) Split {
	alone := Split{Processes: 1}
	switch {
	case cores < 2:
		return alone
	case !DataParallel(cfg):
		alone.Why = fmt.Sprintf("the %s objective trains in one process", cfg.Model.Objective())
		return alone
	case !cfg.SyncBatchNorm || !cfg.GlobalNegatives:
		alone.Why = "the run's batch norm or contrastive negatives are per process (sync_batch_norm, global_negatives), so splitting its batches would change what it learns"
		return alone
	}
	most := min(cores, maxDefaultProcesses, cfg.BatchSize/minRankBatch)
	if available > 0 && 1+int(available/rankMemory) < most {
		most = 1 + int(available/rankMemory)
		if most < 2 {
			alone.Why = fmt.Sprintf("%d MiB of free memory, and each process beyond the first takes up to %d MiB", available>>20, rankMemory>>20)
			return alone
		}
	}
	for p := most; p >= 2; p-- {
		if cfg.BatchSize%p == 0 {
			return Split{Processes: p, Threads: cores / p}
		}
	}
	alone.Why = fmt.Sprintf("a batch of %d molecules does not split evenly into parts of at least %d for 2 to %d processes", cfg.BatchSize, minRankBatch, max(most, 2))
	return alone
}

// DataParallel says whether cfg's objective can train split across
// processes (model.DataParallel, docs/method.md §3.3).
func DataParallel(cfg runfolder.Config) bool {
	_, ok := cfg.Model.NewObjective().(model.DataParallel)
	return ok
}
