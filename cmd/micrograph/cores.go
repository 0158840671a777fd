package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/trainer/runenv"
	"github.com/micrograph/micrograph/trainer/runfolder"
	"github.com/spf13/pflag"
)

// How pre-training uses a CPU's cores when neither --threads nor --nproc is
// given (docs/distributed.md, "The default on a CPU"). Part of a
// paper-objective step runs on one thread whatever --threads says (the fused
// pooling, normalisation and Adam; the fused aggregation, batch norm and
// dropout split only against Debian's libtorch), and threads wake and wait
// at each of its thousand-odd operators, while a second process, each on
// half of every batch, runs the whole step on both cores. So the default
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
	// pool of a step's tensors), against /proc/meminfo's MemAvailable.
	rankMemory = 1 << 30
)

// cpuSplit is how a job uses a CPU's cores: processes sharing each batch,
// and libtorch threads in each (0: libtorch's default, one per core).
type cpuSplit struct {
	processes, threads int
	why                string // when one process: why not more, for the user; "" when no reason is worth saying
}

// defaultCPUSplit is the default split of a pre-training run of cfg over
// cores cores with available bytes of memory free (0: unknown): as many
// processes as divide the batch evenly, up to the cores, maxDefaultProcesses,
// batch/minRankBatch and the memory, with the cores left over as threads in
// each; one process with every core as threads when that is one, when the
// run trains the released objective (one process only), or when its
// settings would make a split change what it learns (a run started without
// synchronised batch norm and global negatives).
func defaultCPUSplit(cfg runfolder.Config, cores int, available int64) cpuSplit {
	alone := cpuSplit{processes: 1}
	switch {
	case cores < 2:
		return alone
	case !dataParallel(cfg):
		alone.why = fmt.Sprintf("the %s objective trains in one process", cfg.Model.Objective())
		return alone
	case !cfg.SyncBatchNorm || !cfg.GlobalNegatives:
		alone.why = "the run's batch norm or contrastive negatives are per process (sync_batch_norm, global_negatives), so splitting its batches would change what it learns"
		return alone
	}
	most := min(cores, maxDefaultProcesses, cfg.BatchSize/minRankBatch)
	if available > 0 && 1+int(available/rankMemory) < most {
		most = 1 + int(available/rankMemory)
		if most < 2 {
			alone.why = fmt.Sprintf("%d MiB of free memory, and each process beyond the first takes up to %d MiB", available>>20, rankMemory>>20)
			return alone
		}
	}
	for p := most; p >= 2; p-- {
		if cfg.BatchSize%p == 0 {
			return cpuSplit{processes: p, threads: cores / p}
		}
	}
	alone.why = fmt.Sprintf("a batch of %d molecules does not split evenly into parts of at least %d for 2 to %d processes", cfg.BatchSize, minRankBatch, max(most, 2))
	return alone
}

// defaultSplitConfig is cfg, a new run that leaves the cores to the
// default, with the settings that keep it the one-process method if it is
// split, now or when resumed: synchronised batch norm and global negatives,
// unless fs's flags set them. The released objective trains in one process
// and is left as it is.
func defaultSplitConfig(fs *pflag.FlagSet, cfg runfolder.Config) runfolder.Config {
	if !dataParallel(cfg) {
		return cfg
	}
	if !fs.Changed("sync-batch-norm") {
		cfg.SyncBatchNorm = true
	}
	if !fs.Changed("global-negatives") {
		cfg.GlobalNegatives = true
	}
	return cfg
}

// dataParallel says whether cfg's objective can train split across
// processes (docs/method.md §3.3).
func dataParallel(cfg runfolder.Config) bool {
	_, ok := cfg.Model.NewObjective().(model.DataParallel)
	return ok
}

// defaultsToSplit says whether a command parsed into fs leaves the use of
// the CPU's cores to the default: no --threads and no --nproc.
func defaultsToSplit(fs *pflag.FlagSet) bool { return !fs.Changed("threads") && !fs.Changed("nproc") }

// splitArgs is args for each process of split: its threads, and the
// settings that keep a split run the one-process method.
func splitArgs(args []string, s cpuSplit) []string {
	out := append([]string{}, withoutFlag(withoutFlag(args, "threads"), "nproc")...)
	return append(out, "--threads", strconv.Itoa(s.threads), "--sync-batch-norm", "--global-negatives")
}

// describeSplit is the line that says how a default split uses the cores.
func describeSplit(s cpuSplit, cores int) string {
	return fmt.Sprintf("%d processes of %d libtorch thread(s), each on 1/%d of every batch: the default on a CPU of %d cores (--nproc and --threads choose; docs/distributed.md)",
		s.processes, s.threads, s.processes, cores)
}

// cpuCores is the cores this process may run on (its affinity mask).
func cpuCores() int { return runtime.NumCPU() }

// availableMemory is /proc/meminfo's MemAvailable in bytes, 0 when unknown.
func availableMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "MemAvailable:"); ok {
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				return 0
			}
			kb, err := strconv.ParseInt(fields[0], 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// How finetune, linear-eval and suite spread their runs (seeds, folds,
// encoders) over a CPU's cores when --jobs is not given: one process per
// core, each run on one libtorch thread, as many as the memory allows and
// no more than there are runs; the cores left over go to threads in each.
// Runs share nothing, so side by side they scale with the cores, where one
// run's threads mostly wait on each other (docs/speed.md).

// jobMemory is what the default reserves in memory for each process of an
// evaluation's runs beyond the first (the libtorch runtime, the dataset, a
// model with its optimiser), against /proc/meminfo's MemAvailable.
const jobMemory = 1 << 30

// runSplit is how an evaluation's runs use the cores: jobs processes side by
// side (1: one after another in this process), each with threads libtorch
// threads.
type runSplit struct{ jobs, threads int }

// splitRuns is the split of runs runs given --jobs and --threads (0 when
// not given) on cores cores with available bytes of memory free (0:
// unknown), on a GPU or not. A GPU runs one at a time unless --jobs says
// otherwise. The threads of each run depend only on the flags, the cores
// and how many runs there are, never on how many are left to make, so that
// a suite started again makes its runs as the first call did.
func splitRuns(jobs, threads, runs, cores int, available int64, gpu bool) runSplit {
	runs = max(runs, 1)
	switch {
	case jobs > 0 && threads > 0:
		return runSplit{jobs, threads}
	case jobs > 0:
		return runSplit{jobs, max(1, cores/min(jobs, runs))}
	case gpu && threads > 0:
		return runSplit{1, threads}
	case gpu:
		return runSplit{1, cores}
	}
	n := cores
	if threads > 0 {
		n = cores / threads
	}
	n = min(n, runs)
	if available > 0 {
		n = min(n, 1+int(available/jobMemory))
	}
	n = max(n, 1)
	if threads == 0 {
		threads = max(1, cores/n)
	}
	return runSplit{n, threads}
}

// jobsFlag registers --jobs into jobs.
func jobsFlag(fs *pflag.FlagSet, jobs *int) {
	fs.IntVar(jobs, "jobs", 0, "runs (seeds, folds, encoders) made side by side, each in a process of its own; 1: one after\n"+
		"another in this process (0: one per core on a CPU within the memory, each on one libtorch thread unless\n"+
		"there are fewer runs than cores or --threads says; 1 on a GPU). Each run gives what it gives alone")
	fs.Lookup("jobs").DefValue = "one per core"
}

// withJobs sets in env how the command's runs runs use the cores, from
// --jobs and --threads, and says how when it runs them side by side.
func withJobs(fs *pflag.FlagSet, jobs, runs int, env runenv.Env) (runenv.Env, error) {
	if jobs < 0 {
		return env, usageError{fmt.Errorf("--jobs %d: want 1 or more (or 0, the default)", jobs)}
	}
	threads := 0
	if fs.Changed("threads") {
		threads = env.Threads
	}
	cores := cpuCores()
	s := splitRuns(jobs, threads, runs, cores, availableMemory(), env.Device.IsCUDA())
	env.Jobs, env.Threads = s.jobs, s.threads
	if s.jobs > 1 {
		logf("%d of the %d runs at a time, each in a process of %d libtorch thread(s), on a CPU of %d cores (--jobs and --threads choose)",
			min(s.jobs, runs), runs, s.threads, cores)
	}
	return env, nil
}
