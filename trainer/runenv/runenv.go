// Package runenv is where and how a job runs, apart from what it computes:
// the device, libtorch's threads, the goroutines collating batches, where
// derived datasets are cached, where progress goes and what stops a long
// job. cmd/micrograph builds one Env from its runtime flags, once, and hands
// it to every entry point (pretrain.Run and Bench, evaluate's Finetune,
// LinearEval and Suite, diagnose.Run, report.BuildMotifReport,
// infer.Embed and Predict), whose configurations hold only what is saved
// with a result and reproduces it. Run is the prologue they all share.
package runenv

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/cpu"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/torch"
)

// Env is where and how a job runs. Nothing in it is saved with a result;
// on the CPU, nothing in it changes one. As JSON it is what a process of a
// pool (trainer/runpool) is told; the writers and the stop signal stay
// behind.
type Env struct {
	// Device is where tensors live, already resolved: "auto" and the
	// data-parallel rank rule are the caller's (cmd/micrograph's) to apply.
	Device torch.Device
	// Threads is libtorch's intra-op threads; 0 leaves libtorch's default.
	// With Jobs, each process's.
	Threads int
	// Workers is the goroutines collating batches ahead of the device.
	Workers int
	// Jobs is how many of an evaluation's runs (seeds, folds, encoders) run
	// side by side, each in a process of its own (trainer/runpool); 0 and 1
	// run them one after another in this process.
	Jobs int
	// Dataset says where Open keeps what it derives from a dataset (the
	// featurised CSVs, binary caches), the bounds on CSV rows and where it
	// reports rejected rows; its Stop is Stop's (OpenOptions).
	Dataset data.OpenOptions
	// Progress receives progress lines and messages; nil is silent. A
	// terminal (*os.File) gets pre-training's progress bar.
	Progress io.Writer `json:"-"`
	// Stop, when closed (SIGINT, SIGTERM), ends a long job (pre-training)
	// after its current step; nil never stops it.
	Stop <-chan struct{} `json:"-"`
}

// Default is a job on the CPU with libtorch's threads and two collating
// goroutines, silent.
func Default() Env { return Env{Device: torch.CPU, Workers: 2} }

// Validate reports the first setting that cannot work, naming its field.
func (e Env) Validate() error {
	switch {
	case e.Threads < 0:
		return field.Errorf("threads", e.Threads, "must not be negative")
	case e.Workers < 1:
		return field.Errorf("workers", e.Workers, "must be positive")
	case e.Jobs < 0:
		return field.Errorf("jobs", e.Jobs, "must not be negative")
	}
	return nil
}

// OpenOptions are how entry points open a dataset: Dataset, with Stop
// ending a CSV's featurisation too.
func (e Env) OpenOptions() data.OpenOptions {
	o := e.Dataset
	o.Stop = e.Stop
	return o
}

// Terminal is Progress when it is a file (for a progress bar), else nil.
func (e Env) Terminal() *os.File {
	f, _ := e.Progress.(*os.File)
	return f
}

// Run is the prologue of every entry point, then body: a libtorch error
// raised as a panic comes back as the error; e and the job's configuration
// (validate, which may be nil) are validated before anything is touched;
// the goroutine is locked to its OS thread (libtorch keeps grad mode and
// scopes per thread) until body returns; libtorch's threads are set.
func Run[T any](e Env, validate func() error, body func() (T, error)) (res T, err error) {
	defer torch.Recover(&err)
	if err := e.Validate(); err != nil {
		return res, err
	}
	if validate != nil {
		if err := validate(); err != nil {
			return res, err
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if e.Threads > 0 {
		torch.SetNumThreads(e.Threads)
	}
	return body()
}

// PeakMemory is the job's peak memory on dev: on a GPU the caching
// allocator's peak since it was last reset, on the CPU the process's peak
// resident set size (VmHWM).
func PeakMemory(dev torch.Device) (int64, error) {
	if dev.IsCUDA() {
		return torch.PeakMemory(dev, false)
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/self/status")
}

// AvailableMemory is the memory the kernel says new work can take
// (/proc/meminfo's MemAvailable), in bytes; 0 when unknown.
func AvailableMemory() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
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

// librarySettings is the environment the CPU's libraries should have read
// when they were loaded:
//   - the two pools of worker threads a CPU step uses, libtorch's OpenMP
//     pool and OpenBLAS's own, sleep when idle instead of spinning:
//     spinning, each pool holds the cores the other's next operation needs
//     (docs/speed.md);
//   - OpenBLAS's matrix-product kernels as wide as the CPU's vectors, where
//     the kernels it chose (openBLASCore, "" without OpenBLAS) are older
//     (openBLASCoreType).
func librarySettings(openBLASCore string, cpu vectorUnits) []string {
	env := []string{"OMP_WAIT_POLICY=PASSIVE", "OPENBLAS_THREAD_TIMEOUT=4"}
	if t := openBLASCoreType(openBLASCore, cpu); t != "" {
		env = append(env, "OPENBLAS_CORETYPE="+t)
	}
	return env
}

// vectorUnits are the CPU's vector instructions that OpenBLAS's kernels
// are built for.
type vectorUnits struct {
	AVX2FMA bool // AVX2 and FMA3: Haswell's kernels
	AVX512  bool // AVX-512 F, CD, BW, DQ and VL: SkylakeX's kernels
}

// hostVectorUnits are this CPU's, as far as the OS enables them.
func hostVectorUnits() vectorUnits {
	x := cpu.X86
	return vectorUnits{
		AVX2FMA: x.HasAVX2 && x.HasFMA,
		AVX512:  x.HasAVX512F && x.HasAVX512CD && x.HasAVX512BW && x.HasAVX512DQ && x.HasAVX512VL,
	}
}

// modernOpenBLASCores are OpenBLAS's kernels for AVX2 and wider, by the
// names openblas_get_corename gives them (lower case).
var modernOpenBLASCores = map[string]bool{"haswell": true, "zen": true, "skylakex": true, "cooperlake": true, "sapphirerapids": true}

// openBLASCoreType is the OPENBLAS_CORETYPE that gives a CPU with vectors
// cpu kernels of their width when OpenBLAS chose core, kernels without
// AVX2, as it does for CPUs newer than its release (Debian 12's 0.3.21
// runs an Emerald Rapids Xeon on its SSE3 "Prescott" kernels, a fifth of
// the speed of its AVX-512 ones); "" keeps OpenBLAS's choice.
func openBLASCoreType(core string, cpu vectorUnits) string {
	switch {
	case core == "" || modernOpenBLASCores[strings.ToLower(core)]:
		return ""
	case cpu.AVX512:
		return "SkylakeX"
	case cpu.AVX2FMA:
		return "Haswell"
	}
	return ""
}

// RestartWithLibrarySettings restarts the program with librarySettings in
// its environment unless it already holds them or the user set those
// variables; a failed restart carries on as it is. A program calls it
// first, before libtorch and OpenBLAS, loaded with it, are used.
func RestartWithLibrarySettings() {
	env := os.Environ()
	added := false
	for _, kv := range librarySettings(torch.OpenBLASCore(), hostVectorUnits()) {
		name, _, _ := strings.Cut(kv, "=")
		if _, set := os.LookupEnv(name); !set {
			env = append(env, kv)
			added = true
		}
	}
	if !added {
		return
	}
	if exe, err := os.Executable(); err == nil {
		_ = syscall.Exec(exe, os.Args, env)
	}
}
