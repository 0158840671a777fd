package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/distributed"
	"github.com/micrograph/micrograph/trainer/runenv"
	"github.com/spf13/pflag"
)

// runtimeFlags are where and how a command runs, the same flags with the
// same meaning in every command that has them: --device, --threads,
// --workers (goroutines collating batches ahead of the device), --cache and
// the CSV row limits. parse turns them, once, into the runenv.Env the
// command hands to the library; no library reads a device name.
type runtimeFlags struct {
	device  string
	threads int
	workers int
	cache   string
	limits  data.Limits
}

// register adds the runtime flags to fs; collates says whether the command
// collates batches (and so has --workers).
func (r *runtimeFlags) register(fs *pflag.FlagSet, collates bool) {
	r.device, r.workers = "auto", 2
	fs.StringVar(&r.device, "device", r.device, "cpu, cuda, cuda:N, or auto (CUDA when available)")
	fs.IntVar(&r.threads, "threads", r.threads, "libtorch intra-op threads (0: one per core; in a rank of a data-parallel job, libtorch's default)")
	if collates {
		fs.IntVar(&r.workers, "workers", r.workers, "goroutines collating batches ahead of the device")
	}
	fs.StringVar(&r.cache, "cache", "", cacheFlagHelp)
	limitFlags(fs, &r.limits)
}

// parse reads the runtime flags into an Env: the one place a device name is
// read. job, when this process is one rank of a data-parallel job on GPUs
// ("cuda", or "auto" where CUDA works), makes the device GPU LOCAL_RANK,
// one per process as torchrun expects. A name of no device is a usage error
// (exit 2); a device that is not there is an error.
func (r *runtimeFlags) parse(fs *pflag.FlagSet, job *distributed.Env) (runenv.Env, error) {
	dev, err := torch.ParseDevice(r.device)
	if errors.Is(err, torch.ErrDeviceName) {
		return runenv.Env{}, usageError{fmt.Errorf("--device %q %v", r.device, torch.ErrDeviceName)}
	} else if err != nil {
		return runenv.Env{}, err
	}
	if job != nil && job.WorldSize > 1 && dev.IsCUDA() && !strings.HasPrefix(r.device, "cuda:") {
		if n := torch.CUDADeviceCount(); job.LocalRank >= n {
			return runenv.Env{}, fmt.Errorf("--device %s: rank %d is LOCAL_RANK %d, but there are only %d CUDA device(s)", r.device, job.Rank, job.LocalRank, n)
		}
		dev = torch.CUDA(job.LocalRank)
	}
	if err := r.limits.Validate(); err != nil {
		return runenv.Env{}, flagError(fs, &r.limits, err)
	}
	threads := r.threads
	if threads == 0 && (job == nil || job.WorldSize <= 1) {
		// libtorch's own default is one thread in Debian's build (OpenMP's
		// count in others): one process uses every core it may run on.
		threads = cpuCores()
	}
	env := runenv.Env{Device: dev, Threads: threads, Workers: r.workers, Progress: os.Stderr,
		Dataset: data.OpenOptions{CacheDir: r.cache, Limits: r.limits, Report: notes}}
	if err := env.Validate(); err != nil {
		return runenv.Env{}, flagError(fs, r, err)
	}
	return env, nil
}

// checkCache refuses a --cache that an output folder may not be
// (checkOutputFolder): the cache is written into. inputs are the
// command's inputs.
func (r *runtimeFlags) checkCache(inputs ...input) error {
	return checkOutputFolder("--cache", r.cache, inputs...)
}

// seedFlag registers --seed: a saved setting, not a runtime one.
func seedFlag(fs *pflag.FlagSet, seed *uint64) {
	fs.Uint64Var(seed, "seed", *seed, "seed of initialisation, shuffling and sampling")
}
