package main

import (
	"fmt"
	"runtime"
	"strconv"

	"github.com/micrograph/micrograph/trainer/pretrain"
	"github.com/micrograph/micrograph/trainer/runenv"
	"github.com/micrograph/micrograph/trainer/runfolder"
	"github.com/spf13/pflag"
)

// defaultSplitConfig is cfg, a new run that leaves the cores to the
// default, with the settings that keep it the one-process method if it is
// split (pretrain.DefaultSplit), now or when resumed: synchronised batch
// norm and global negatives, unless fs's flags set them. An objective that
// trains in one process is left as it is.
func defaultSplitConfig(fs *pflag.FlagSet, cfg runfolder.Config) runfolder.Config {
	if !pretrain.DataParallel(cfg) {
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

// defaultsToSplit says whether a command parsed into fs leaves the use of
// the CPU's cores to the default: no --threads and no --nproc.
func defaultsToSplit(fs *pflag.FlagSet) bool { return !fs.Changed("threads") && !fs.Changed("nproc") }

// splitArgs is args for each process of split: its threads, and the
// settings that keep a split run the one-process method.
func splitArgs(args []string, s pretrain.Split) []string {
	out := append([]string{}, withoutFlag(withoutFlag(args, "threads"), "nproc")...)
	return append(out, "--threads", strconv.Itoa(s.Threads), "--sync-batch-norm", "--global-negatives")
}

// describeSplit is the line that says how a default split uses the cores.
func describeSplit(s pretrain.Split, cores int) string {
	return fmt.Sprintf("%d processes of %d libtorch thread(s), each on 1/%d of every batch: the default on a CPU of %d cores (--nproc and --threads choose; docs/distributed.md)",
		s.Processes, s.Threads, s.Processes, cores)
}

// cpuCores is the cores this process may run on (its affinity mask).
func cpuCores() int { return runtime.NumCPU() }

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
	s := splitRuns(jobs, threads, runs, cores, runenv.AvailableMemory(), env.Device.IsCUDA())
	env.Jobs, env.Threads = s.jobs, s.threads
	if s.jobs > 1 {
		logf("%d of the %d runs at a time, each in a process of %d libtorch thread(s), on a CPU of %d cores (--jobs and --threads choose)",
			min(s.jobs, runs), runs, s.threads, cores)
	}
	return env, nil
}
