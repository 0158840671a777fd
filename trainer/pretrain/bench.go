package pretrain

import (
	"fmt"
	"slices"
	"time"

	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/runenv"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// BenchConfig is a throughput measurement of pre-training steps.
type BenchConfig struct {
	Pretrain runfolder.Config // model, batch size, seed, precision
	Warmup   int              // untimed steps first
	Steps    int              // timed steps (ignored with Epoch)
	Epoch    bool             // time one whole epoch instead
}

// BenchResult is what `micrograph bench` prints, one JSON line.
type BenchResult struct {
	MoleculesPerS    float64 `json:"molecules_per_s"`
	SPerStep         float64 `json:"s_per_step"`
	SPerEpoch        float64 `json:"s_per_epoch"`        // measured with Epoch, else s_per_step × steps per epoch
	DataWaitFraction float64 `json:"data_wait_fraction"` // of the timed wall time spent waiting for batches
	PeakMemoryBytes  int64   `json:"peak_memory_bytes"`  // GPU: allocator peak in the timed steps; CPU: peak RSS; summed over the processes
	Device           string  `json:"device"`
	Libtorch         string  `json:"libtorch"`
	OpenBLAS         string  `json:"openblas,omitempty"` // the kernels of the CPU's matrix products (torch.OpenBLASCore)
	Steps            int     `json:"steps"`
	BatchSize        int     `json:"batch_size"`
	StepsPerEpoch    int     `json:"steps_per_epoch"`
	// Threads is libtorch's intra-op threads in each process (also
	// OpenBLAS's bound on the CPU), Processes the processes that ran the
	// steps, each on its part of every batch: threads × processes cores'
	// worth of work at most.
	Threads   int `json:"threads"`
	Processes int `json:"processes"`
	// Precision of the matrix products, and the speed of the step's typical
	// product at it: a batch's atoms (N×d) by a d×d weight, as a GENConv's
	// one-layer MLP multiplies, in GFLOP/s (2·N·d² per product).
	Precision     model.Precision `json:"precision"`
	ProductGFLOPS float64         `json:"product_gflops"`
	// Operators libtorch dispatched for one step (torch.CountOps), counted
	// on an untimed step after the timed ones: the whole step (the batch put
	// on the device, forward, backward, the optimiser), of which the
	// batch's upload; and those the loader ran to collate and prepare one
	// batch, off the step's thread (none on the CPU: collation is Go).
	OpsPerStep int64 `json:"ops_per_step"`
	OpsUpload  int64 `json:"ops_upload"`
	OpsCollate int64 `json:"ops_collate"`
	// Ranks, with several processes, is each one's part of the timed steps:
	// its atoms and molecules, and its time computing and in each kind of
	// collective.
	Ranks []RankProfile `json:"ranks,omitempty"`
}

// Bench times pre-training steps after Warmup untimed ones, where env
// says: the steps a new run of cfg.Pretrain takes (forward, backward, the
// clipped optimiser step, the losses read one step late), each logged to
// opt.Sinks. With opt.Job (opt.Resume and opt.Opened do not apply) this
// process is one rank of a data-parallel job that times its steps as Run
// would run them, and every rank returns the job's result: the global
// batch's molecules over the slowest rank's time.
func Bench(cfg BenchConfig, env runenv.Env, opt Options) (*BenchResult, error) {
	cfg.Pretrain.Epochs = max(cfg.Pretrain.Epochs, 1)
	return runenv.Run(env, cfg.Validate, func() (*BenchResult, error) { return bench(cfg, env, opt) })
}

// CheckBenchLaunch judges, for a launcher about to start the given number
// of processes of a bench, what each would refuse as it starts: the
// settings, the objective and the split of the batch.
func CheckBenchLaunch(cfg BenchConfig, processes int) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	return CheckSplit(cfg.Pretrain, processes)
}

// Validate reports the first setting that cannot work, naming its field.
func (cfg BenchConfig) Validate() error {
	if err := cfg.Pretrain.Validate(); err != nil {
		return err
	}
	switch {
	case cfg.Warmup < 0:
		return field.Errorf("warmup", cfg.Warmup, "must not be negative")
	case !cfg.Epoch && cfg.Steps < 1:
		return field.Errorf("steps", cfg.Steps, "must be positive")
	}
	return nil
}

// bench is Bench after runenv's prologue: a pretrainer made as a run's is
// (its session, processes, model, optimiser with its clip groups, and
// loader; no run folder), whose steps are timed as the run takes them
// (advance, the losses read one step late).
func bench(cfg BenchConfig, env runenv.Env, opt Options) (res *BenchResult, err error) {
	pc := cfg.Pretrain
	se, err := openSession(pc, env)
	if err != nil {
		return nil, err
	}
	t := &pretrainer{cfg: pc, dev: se.dev, session: se, procs: alone{}}
	defer func() { err = t.Close(err) }()
	defer torch.Recover(&err)
	if err := t.join(pc, opt, env.Stop); err != nil {
		return nil, err
	}
	if err := t.build(0); err != nil {
		return nil, err
	}
	dev, perEpoch := t.dev, t.loader.BatchesPerEpoch()
	t.bar = newProgress(nil, 0, 0, int64(perEpoch))
	if t.procs.Rank() == 0 {
		t.sinks = opt.Sinks
	}
	steps := cfg.Steps
	if cfg.Epoch {
		steps = perEpoch
	}
	if steps < 1 || perEpoch < 1 {
		return nil, fmt.Errorf("nothing to time: %d steps, %d batches per epoch", steps, perEpoch)
	}

	var wait time.Duration
	tally := rankTally{steps: steps}
	run := func(n int, timed bool) error {
		for range n {
			began := time.Now()
			b, err := t.loader.Next()
			if err != nil {
				return err
			}
			if timed {
				wait += time.Since(began)
				tally.atoms += len(b.Nodes)
				tally.molecules += b.NumGraphs()
			}
			if err := t.advance(b, false); err != nil {
				return err
			}
		}
		return nil
	}
	t.lastLog = time.Now()
	if err := run(cfg.Warmup, false); err != nil {
		return nil, err
	}
	if err := torch.Synchronize(dev); err != nil {
		return nil, err
	}
	if dev.IsCUDA() {
		if _, err := torch.PeakMemory(dev, true); err != nil {
			return nil, err
		}
	}
	// The processes start the timed steps together (a collective), so that
	// each one's time is the same steps' and none counts another's start.
	if err := t.procs.barrier(); err != nil {
		return nil, err
	}
	tally.before = t.procs.profile()
	start := time.Now()
	if err := run(steps, true); err != nil {
		return nil, err
	}
	if err := t.flush(); err != nil {
		return nil, err
	}
	if err := torch.Synchronize(dev); err != nil {
		return nil, err
	}
	tally.elapsed, tally.wait, tally.after = time.Since(start), wait, t.procs.profile()
	all, err := t.procs.gather([]float64{tally.elapsed.Seconds()})
	if err != nil {
		return nil, err
	}
	seconds := make([]float64, len(all)) // every rank's
	for r, v := range all {
		seconds[r] = v[0]
	}
	ranks, err := rankProfiles(t.procs, tally)
	if err != nil {
		return nil, err
	}

	res = &BenchResult{
		Device: dev.String(), Libtorch: torch.Version(), OpenBLAS: torch.OpenBLASCore(), Steps: steps, BatchSize: pc.BatchSize,
		StepsPerEpoch: perEpoch, Threads: torch.NumThreads(), Processes: t.procs.Size(), Ranks: ranks,
	}
	benchTimes(res, seconds, wait.Seconds(), cfg.Epoch)
	if res.PeakMemoryBytes, err = runenv.PeakMemory(dev); err != nil {
		return nil, err
	}
	if res.PeakMemoryBytes, err = t.procs.total(res.PeakMemoryBytes); err != nil {
		return nil, err
	}
	var atoms int
	res.OpsPerStep, res.OpsUpload, res.OpsCollate, atoms, err = countStepOps(t)
	if err != nil {
		return nil, err
	}
	res.Precision = pc.Precision
	res.ProductGFLOPS = productGFLOPS(dev, t.model.Store.Compute(), atoms, int64(pc.Model.Encoder.Hidden))
	return res, nil
}

// benchTimes sets res's figures of time (s_per_step, molecules_per_s,
// s_per_epoch, data_wait_fraction) from what the timed steps measured, with
// res's Steps, BatchSize (the global batch) and StepsPerEpoch: seconds is
// each rank's time (in rank order; one alone) from the start the ranks
// share to its last step's end, the losses read one step late and the
// device synchronised; wait is this rank's time waiting for batches; epoch
// says that the steps were one whole epoch. A job's time is its slowest
// rank's: every rank ends each step with the others (the gradients' sum),
// and the global batch is the job's.
func benchTimes(res *BenchResult, seconds []float64, wait float64, epoch bool) {
	slowest := slices.Max(seconds)
	res.SPerStep = slowest / float64(res.Steps)
	res.MoleculesPerS = float64(res.Steps*res.BatchSize) / slowest
	res.SPerEpoch = res.SPerStep * float64(res.StepsPerEpoch)
	if epoch {
		res.SPerEpoch = slowest
	}
	res.DataWaitFraction = wait / slowest
}

// productGFLOPS times the product of rows×d by d×d matrices in dtype dt on
// dev, the inputs already in dt, as the median of 9 after 2 untimed.
func productGFLOPS(dev torch.Device, dt torch.DType, rows int, d int64) float64 {
	s := torch.NewScope()
	defer s.Close()
	opts := torch.Options{DType: torch.Float32, Device: dev}
	x := torch.Rand([]int64{int64(rows), d}, opts).ToDType(dt)
	w := torch.Rand([]int64{d, d}, opts).ToDType(dt)
	times := make([]float64, 0, 9)
	for i := range 11 {
		began := time.Now()
		y := torch.Linear(x, w, nil)
		torch.Synchronize(dev)
		if i >= 2 {
			times = append(times, time.Since(began).Seconds())
		}
		y.Free()
	}
	slices.Sort(times)
	return 2 * float64(rows) * float64(d*d) / times[len(times)/2] / 1e9
}

// countStepOps runs one more step, untimed, counting the operators it
// dispatches (step), then those of putting the same batch on the device
// again (upload) and of collating and preparing its molecules again the way
// a loader worker does (collate). atoms is the batch's.
func countStepOps(t *pretrainer) (step, upload, collate int64, atoms int, err error) {
	loader, se := t.loader, t.session
	b, err := loader.Next()
	if err != nil {
		return 0, 0, 0, 0, err
	}
	defer loader.Release(b)
	var values *torch.Tensor
	step = torch.CountOps(func() { values, _, err = t.step(b, false) })
	if err != nil {
		return 0, 0, 0, 0, err
	}
	torch.ToSlice[float64](values)
	values.Free()
	s := torch.NewScope() // frees what the recounts create
	defer s.Close()
	upload = torch.CountOps(func() { b.Graph(t.dev) })
	var again feed.Batch
	collate = torch.CountOps(func() {
		if err = feed.Collate(se.set.Molecules, b.Graphs, &again); err == nil {
			err = se.prepare(&again)
		}
	})
	return step, upload, collate, len(b.Nodes), err
}
