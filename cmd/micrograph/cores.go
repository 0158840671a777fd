package main

import (
	"fmt"
	"runtime"
	"strconv"

	"github.com/micrograph/micrograph/trainer/pretrain"
	"github.com/micrograph/micrograph/trainer/runenv"
	"github.com/micrograph/micrograph/trainer/runfolder"
	"github.com/micrograph/micrograph/trainer/runpool"
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

// jobsFlag registers --jobs into jobs.
func jobsFlag(fs *pflag.FlagSet, jobs *int) {
	fs.IntVar(jobs, "jobs", 0, "runs (seeds, folds, encoders) made side by side, each in a process of its own; 1: one after\n"+
		"another in this process (0: one per core on a CPU within the memory, each on one libtorch thread unless\n"+
		"there are fewer runs than cores or --threads says; 1 on a GPU). Each run gives what it gives alone")
	fs.Lookup("jobs").DefValue = "one per core"
}

// withJobs sets in env how the command's runs runs use the cores, from
// --jobs and --threads (runpool.SplitRuns: one process per core by
// default), and says how when it runs them side by side.
func withJobs(fs *pflag.FlagSet, jobs, runs int, env runenv.Env) (runenv.Env, error) {
	if jobs < 0 {
		return env, usageError{fmt.Errorf("--jobs %d: want 1 or more (or 0, the default)", jobs)}
	}
	threads := 0
	if fs.Changed("threads") {
		threads = env.Threads
	}
	cores := cpuCores()
	s := runpool.SplitRuns(runpool.SplitRequest{Jobs: jobs, Threads: threads, Runs: runs, Cores: cores, Available: runenv.AvailableMemory(), GPU: env.Device.IsCUDA()})
	env.Jobs, env.Threads = s.Jobs, s.Threads
	if s.Jobs > 1 {
		logf("%d of the %d runs at a time, each in a process of %d libtorch thread(s), on a CPU of %d cores (--jobs and --threads choose)",
			min(s.Jobs, runs), runs, s.Threads, cores)
	}
	return env, nil
}
