package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/torch/distributed"
	"github.com/micrograph/micrograph/trainer/pretrain"
	"github.com/micrograph/micrograph/trainer/runenv"
	"github.com/micrograph/micrograph/trainer/runfolder"
	"github.com/spf13/pflag"
)

// launchPlan is where pretrain or bench runs, decided once (planLaunch):
// in this process, alone or as the rank of the job its environment names,
// or as ranks local processes of the command, each started with args.
type launchPlan struct {
	job   *distributed.Env // this process's job; nil alone
	env   runenv.Env       // where this process runs
	ranks int              // > 1: start these processes instead (start)
	args  []string
}

// launchRequest is what planLaunch decides from: a command's parsed flags
// and its command line, --nproc, and the run's settings.
type launchRequest struct {
	fs    *pflag.FlagSet
	args  []string // the command line after the command's name
	rt    *runtimeFlags
	nproc int
	// cfg is the run's settings; a new run (fresh) that leaves the cores to
	// the default gets the settings that keep a split the one-process
	// method (defaultSplitConfig).
	cfg   *runfolder.Config
	fresh bool
	// check says, as the command blames its settings, what each of n
	// processes would refuse as it starts, so that a bad setting starts
	// none.
	check func(n int) error
	// openData opens the data once, before the default split starts its
	// processes: a CSV is featurised into the cache, where they find it.
	openData func(env runenv.Env) error
}

// planLaunch decides where a pretrain or bench command runs: --nproc N
// starts N local ranks; a process its environment makes a rank (torchrun)
// runs as that rank; on a CPU left to the default (no --threads, --nproc,
// launcher or GPU), the default split (pretrain.DefaultSplit) starts its
// ranks, or says why it runs alone; otherwise the command runs here.
func planLaunch(r launchRequest) (launchPlan, error) {
	job, err := distributedJob()
	if err != nil {
		return launchPlan{}, err
	}
	env, err := r.rt.parse(r.fs, job)
	if err != nil {
		return launchPlan{}, err
	}
	p := launchPlan{job: job, env: env}
	byDefault := job == nil && defaultsToSplit(r.fs) && !env.Device.IsCUDA()
	if byDefault && r.fresh {
		*r.cfg = defaultSplitConfig(r.fs, *r.cfg)
	}
	switch {
	case r.nproc < 1:
		return p, usageError{fmt.Errorf("--nproc %d must be positive", r.nproc)}
	case r.nproc > 1 && job != nil:
		return p, usageError{fmt.Errorf("--nproc %d under a launcher that set WORLD_SIZE=%d: give one or the other", r.nproc, job.WorldSize)}
	case r.nproc > 1:
		p.ranks, p.args = r.nproc, withoutFlag(r.args, "nproc")
		return p, r.check(r.nproc)
	case !byDefault:
		return p, nil
	}
	cores := cpuCores()
	split := pretrain.DefaultSplit(*r.cfg, cores, runenv.AvailableMemory())
	if split.Processes < 2 {
		if split.Why != "" {
			logf("one process of %d libtorch threads: %s", cores, split.Why)
		}
		return p, nil
	}
	if err := r.check(split.Processes); err != nil {
		return p, err
	}
	if err := r.openData(env); err != nil {
		return p, err
	}
	logf("%s", describeSplit(split, cores))
	p.ranks, p.args = split.Processes, splitArgs(r.args, split)
	return p, nil
}

// start runs the plan's ranks of command, the first failure the command's;
// ranks still running grace after one failed are killed.
func (p launchPlan) start(command string, grace time.Duration) error {
	return distributed.Local{Args: append([]string{command}, p.args...), Ranks: p.ranks, Vars: []string{launchedEnv + "=1"},
		Grace: grace, Stdout: stdout, Stderr: os.Stderr}.Run()
}

// errStoppedFeaturising is a stop, by a signal, while a CSV was featurised
// into the cache: nothing was written, and the command ends with status 0
// after saying so (stoppedBeforeWriting).
var errStoppedFeaturising = errors.New("stopped while featurising")

// stoppedBeforeWriting says that a signal stopped the command while it
// did what while says, before anything was written, and ends it.
func stoppedBeforeWriting(while string) error {
	logf("stopped while %s: nothing was written; the same command starts again", while)
	return nil
}

// openDataOnce opens a pre-training run's data where env says and closes
// it (pretrain.CheckData), stopping at a signal while a CSV is featurised:
// errStoppedFeaturising.
func openDataOnce(cfg runfolder.Config, env runenv.Env) error {
	w := runenv.WatchSignals(nil)
	defer w.Close()
	env.Stop = w.Stop()
	err := pretrain.CheckData(cfg, env)
	if errors.Is(err, data.ErrStopped) {
		return errStoppedFeaturising
	}
	return err
}

// withoutFlag is args without flag (--name VALUE or --name=VALUE).
func withoutFlag(args []string, name string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--"+name {
			i++ // its value
			continue
		}
		if strings.HasPrefix(a, "--"+name+"=") {
			continue
		}
		out = append(out, a)
	}
	return out
}

// launchedEnv marks the ranks a launch plan starts: the launcher said what
// it started, so they do not say what they wait for.
const launchedEnv = "MICROGRAPH_LAUNCHED_RANK"

// sayJobWait tells at once, on stderr, what a process that its environment
// made one rank of a job (torchrun's variables, or ones left in a shell)
// will wait for, and how long: otherwise it would wait silently for the
// whole timeout.
func sayJobWait(job *distributed.Env, timeout time.Duration) {
	if job == nil || os.Getenv(launchedEnv) != "" {
		return
	}
	at := fmt.Sprintf("at %s:%d", job.MasterAddr, job.MasterPort)
	if job.Rank == 0 {
		at = fmt.Sprintf("serving the job's store on port %d", job.MasterPort)
	}
	logf("rank %d of %d, as the environment says (%s, %s, %s, %s): once the data is open, waiting up to %v for the other processes, %s; unset those variables to run alone, SIGINT or SIGTERM stops the wait",
		job.Rank, job.WorldSize, distributed.EnvRank, distributed.EnvWorldSize, distributed.EnvMasterAddr, distributed.EnvMasterPort, timeout, at)
}

// distributedJob is the data-parallel job this process was started in by
// its environment, or nil when it runs alone. A malformed environment is a
// usage error: the environment is part of how the command was started.
func distributedJob() (*distributed.Env, error) {
	env, inJob, err := distributed.FromEnv()
	if err != nil {
		return nil, usageError{err}
	}
	if !inJob {
		return nil, nil
	}
	return &env, nil
}
