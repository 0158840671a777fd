package pretrain

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/distributed"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// DefaultTimeout bounds the rendezvous and each collective of a
// data-parallel run when Options.Timeout is 0: long enough for rank 0 to
// write a checkpoint while the others wait, short enough that a hung job
// ends within minutes.
const DefaultTimeout = 5 * time.Minute

// processes are the processes a run trains in: this one alone, or the
// ranks of a data-parallel job (docs/method.md §3.3). Everything a run does
// differently in a job goes through them.
type processes interface {
	Rank() int // this process's, 0 alone
	Size() int // the number of processes, 1 alone
	// sameConfig makes sure that every process was started with cfg.
	sameConfig(cfg runfolder.Config) error
	// sameCheckpoint gives every process the checkpoint rank 0 resumes
	// from, ck on rank 0 (nil: a new run).
	sameCheckpoint(run string, ck *runfolder.Checkpoint) (*runfolder.Checkpoint, error)
	// attach makes m balance and normalise over the global batch and starts
	// every process from rank 0's state, leaving the generators alone.
	attach(m *model.MicroGraph, cfg runfolder.Config) error
	// describe is the run banner's line on the processes, "" alone.
	describe(cfg runfolder.Config, dev torch.Device) string
	// stopping says whether a stop asked of this process ends the run
	// before the next step: alone at once, in a job only once every rank
	// has seen the request travel with a step's losses.
	stopping(asked bool) bool
	// shares are this process's shares of the step's losses (see
	// job.globalShares); alone, the losses.
	shares(m *model.MicroGraph, out model.Output) model.Losses
	// beginSum, before the backward pass, stacks a step's loss values
	// (float64, on the device) and starts summing them over the processes,
	// and the gradients as the backward pass makes them; in a job a last
	// value counts the processes asking to stop. The sums are whole once
	// endSum, after the backward pass, returns.
	beginSum(values []*torch.Tensor, stop bool) (*torch.Tensor, error)
	endSum() error
	// gatherRNG is every process's generator states, named for the
	// checkpoint; the caller frees them.
	gatherRNG() ([]torch.Named, error)
	// explain turns a failed collective into the line a user reads.
	explain(err error) error
	// barrier returns once every process has called it (bench's common
	// start); total is the sum of their n (bench's memory).
	barrier() error
	total(n int64) (int64, error)
	// profile is the time this process spent in each kind of collective so
	// far (torch.ProcessGroup.Profile); alone, none. gather is every
	// process's v (as long on each), in rank order (bench's profiles).
	profile() []torch.CollectiveTime
	gather(v []float64) ([][]float64, error)
	close()
}

// alone is a run in one process.
type alone struct{}

func (alone) Rank() int                                        { return 0 }
func (alone) Size() int                                        { return 1 }
func (alone) sameConfig(runfolder.Config) error                { return nil }
func (alone) attach(*model.MicroGraph, runfolder.Config) error { return nil }
func (alone) describe(runfolder.Config, torch.Device) string   { return "" }
func (alone) stopping(asked bool) bool                         { return asked }
func (alone) gatherRNG() ([]torch.Named, error)                { return torch.RNGStates() }
func (alone) explain(err error) error                          { return err }
func (alone) close()                                           {}
func (alone) barrier() error                                   { return nil }
func (alone) total(n int64) (int64, error)                     { return n, nil }
func (alone) profile() []torch.CollectiveTime                  { return nil }
func (alone) gather(v []float64) ([][]float64, error)          { return [][]float64{v}, nil }

func (alone) sameCheckpoint(_ string, ck *runfolder.Checkpoint) (*runfolder.Checkpoint, error) {
	return ck, nil
}

func (alone) shares(_ *model.MicroGraph, out model.Output) model.Losses { return out.Losses }

func (alone) beginSum(values []*torch.Tensor, _ bool) (*torch.Tensor, error) {
	return lossRecord(values), nil
}

// lossRecord is a step's loss values stacked in float64, outside the
// autograd graph: a record to log (and, in a job, to sum over the ranks in
// place), which backpropagation never needs.
func lossRecord(values []*torch.Tensor) *torch.Tensor {
	return torch.NoGradValue(func() *torch.Tensor { return torch.Stack(values, 0).ToDType(torch.Float64) })
}

func (alone) endSum() error { return nil }

// job is this process's place in a data-parallel run.
type job struct {
	group *torch.ProcessGroup
	grads *torch.GradientSum // once attached
	dev   torch.Device       // where the backend's tensors live (NCCL's on the GPU)
	rank  int
	size  int
}

// CheckLaunch judges, for a launcher about to start the given number of
// processes of run, what each would refuse as it starts (Run): the
// settings, the run folder, the objective and the split of the batch, so
// that a bad setting starts none.
func CheckLaunch(run string, cfg runfolder.Config, resume bool, processes int) error {
	if err := check(run, cfg, resume); err != nil {
		return err
	}
	return CheckSplit(cfg, processes)
}

// CheckSplit refuses an objective that cannot train split across
// processes, and a batch that is not a multiple of the given number of
// processes, as the default's choice of processes has it (each takes a
// consecutive part of every batch with about as many atoms as the others:
// docs/method.md §3.3).
func CheckSplit(cfg runfolder.Config, processes int) error {
	if !DataParallel(cfg) {
		return fmt.Errorf("the %s objective trains in one process only (the data-parallel form of docs/method.md §3.3 needs losses that are means over the batch's nodes, subgraphs or molecules)", cfg.Model.Objective())
	}
	if cfg.BatchSize%processes != 0 {
		return field.Errorf("batch_size", cfg.BatchSize, "is not a multiple of the %d processes", processes)
	}
	return nil
}

// ErrStoppedJoining is a run's error when its Stop was closed while it
// waited for the other processes of its job: nothing was written.
var ErrStoppedJoining = errors.New("stopped while waiting for the other processes of the job")

// joinJob starts the process group of opt.Job on dev (alone without one)
// and refuses an objective that cannot train split, or a batch that the
// processes cannot split evenly. Closing stop ends the wait for the other
// processes with ErrStoppedJoining: the rendezvous, a blocking call into
// c10d bounded by the timeout, is left to end by itself (or with the
// process), its group then closed.
func joinJob(cfg runfolder.Config, opt Options, dev torch.Device, stop <-chan struct{}) (processes, error) {
	if opt.Job == nil || opt.Job.WorldSize <= 1 {
		return alone{}, nil
	}
	w := opt.Job.WorldSize
	if err := CheckSplit(cfg, w); err != nil {
		return nil, err
	}
	timeout := opt.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	type joined struct {
		g   *torch.ProcessGroup
		err error
	}
	done := make(chan joined, 1)
	go func() {
		g, err := distributed.Join(*opt.Job, dev, timeout)
		done <- joined{g, err}
	}()
	var j joined
	select {
	case j = <-done:
	case <-stop:
		go func() {
			if j := <-done; j.g != nil {
				j.g.Close()
			}
		}()
		return nil, ErrStoppedJoining
	}
	g, err := j.g, j.err
	if err != nil {
		return nil, err
	}
	at := torch.CPU
	if distributed.Backend(dev) == torch.NCCL {
		at = dev
	}
	return &job{group: g, dev: at, rank: opt.Job.Rank, size: w}, nil
}

func (j *job) Rank() int { return j.rank }
func (j *job) Size() int { return j.size }
func (j *job) close() {
	if j.grads != nil {
		j.grads.Free()
	}
	j.group.Close()
}

func (j *job) describe(cfg runfolder.Config, dev torch.Device) string {
	return fmt.Sprintf("%d processes (%s) of %d libtorch thread(s), each with about %d of every step's %d molecules (cut by atoms)", j.size, distributed.Backend(dev), torch.NumThreads(), cfg.BatchSize/j.size, cfg.BatchSize)
}

func (j *job) barrier() error {
	t := torch.Zeros([]int64{1}, torch.Options{DType: torch.Float64, Device: j.dev})
	defer t.Free()
	return j.group.AllReduce(t, torch.ReduceMax)
}

func (j *job) total(n int64) (int64, error) {
	t := torch.Full([]int64{1}, float64(n), torch.Options{DType: torch.Int64, Device: j.dev})
	defer t.Free()
	if err := j.group.AllReduce(t, torch.ReduceSum); err != nil {
		return 0, err
	}
	return t.ItemInt(), nil
}

func (j *job) profile() []torch.CollectiveTime { return j.group.Profile() }

func (j *job) gather(v []float64) ([][]float64, error) {
	s := torch.NewScope()
	defer s.Close()
	all, err := j.group.AllGather(torch.FromSlice(v).To(j.dev, false))
	if err != nil {
		return nil, err
	}
	flat := torch.ToSlice[float64](all.To(torch.CPU, false))
	out := make([][]float64, j.size)
	for r := range out {
		out[r] = flat[r*len(v) : (r+1)*len(v)]
	}
	return out, nil
}

// stopping is false: a rank's request travels with its step's losses, and
// every rank stops after the step whose summed losses carry the first.
func (j *job) stopping(bool) bool { return false }

func (j *job) shares(m *model.MicroGraph, out model.Output) model.Losses {
	return j.globalShares(m.Objective.(model.DataParallel), out)
}

func (j *job) beginSum(values []*torch.Tensor, stop bool) (*torch.Tensor, error) {
	// A rank's stop request travels with the losses it sums.
	stopFlag := 0.0
	if stop {
		stopFlag = 1
	}
	all := lossRecord(append(values, torch.Full(nil, stopFlag, values[0].Options())))
	if err := j.grads.Begin(all); err != nil {
		return nil, err
	}
	return all, nil
}

func (j *job) endSum() error { return j.grads.End() }

// rankSeed seeds rank r's generators after the model is initialised: rank 0
// keeps the run's seed, so that one process draws exactly what it always
// drew, and rank r > 0 a seed of its own (a golden-ratio step apart), so
// that the ranks' dropout and subgraph perturbations are independent and
// reproducible (docs/method.md §3, data-parallel pre-training).
func rankSeed(seed uint64, rank int) uint64 { return seed + uint64(rank)*0x9E3779B97F4A7C15 }

// attach makes the model balance and normalise over the global batch, hooks
// its parameters for the sum of their gradients, and starts every rank from
// rank 0's model state. It draws nothing and leaves the generators as they
// are: seeded for this rank (session.newModel), or restored from the
// checkpoint a run resumes.
func (j *job) attach(m *model.MicroGraph, cfg runfolder.Config) error {
	m.Across = j.group
	if cfg.SyncBatchNorm {
		m.Encoder.NormAcross = j.group
	}
	if cfg.GlobalNegatives {
		m.Gather = distributed.GatherRows(j.group)
	}
	grads, err := j.group.NewGradientSum(m.GradientOrder(), distributed.BucketBytes)
	if err != nil {
		return err
	}
	j.grads = grads
	return distributed.BroadcastFrom0(j.group, m.Store.State())
}

// rankRNGPrefix names rank r's generator states in a checkpoint's rng.*
// entries: rank 0's keep their plain names ("cpu", "cuda:0"), as a
// single-process run saves them; rank r's are "rank<r>/cpu", ….
func rankRNGPrefix(rank int) string {
	if rank == 0 {
		return ""
	}
	return "rank" + strconv.Itoa(rank) + "/"
}

// rngOfRank is the generator states a checkpoint holds for rank, under
// their plain names.
func rngOfRank(all []torch.Named, rank int) []torch.Named {
	prefix := rankRNGPrefix(rank)
	var out []torch.Named
	for _, n := range all {
		name, ok := strings.CutPrefix(n.Name, prefix)
		if ok && !strings.HasPrefix(name, "rank") {
			out = append(out, torch.Named{Name: name, Tensor: n.Tensor})
		}
	}
	return out
}

// gatherRNG collects every rank's generator states on every rank (on the
// backend's device and back), named for the checkpoint. The caller frees
// the tensors.
func (j *job) gatherRNG() ([]torch.Named, error) {
	mine, err := torch.RNGStates()
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, n := range mine {
			n.Tensor.Free()
		}
	}()
	var out []torch.Named
	for _, n := range mine {
		s := torch.NewScope()
		all, err := j.group.AllGather(n.Tensor.To(j.dev, false))
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("gathering the ranks' %s generator states: %w", n.Name, err)
		}
		for r := range j.size {
			out = append(out, torch.Named{Name: rankRNGPrefix(r) + n.Name, Tensor: all.Narrow(0, int64(r), 1).Squeeze(0).To(torch.CPU, false).Clone().Unscope()})
		}
		s.Close()
	}
	return out, nil
}

// globalShares turns this rank's losses, each a mean over its part of the
// batch, into its shares of the global batch's means: each is weighted by
// the rank's share of what it averages over (model.DataParallel: for the
// paper's objective nodes for L_node-mot, live subgraphs for L_mot-sub,
// molecules for L_reg, molecules with a live subgraph for L_contra),
// counted across ranks with one all-reduce. Summed over ranks, the shares
// (and so the gradients) are the means one process would compute over the
// whole batch, for every loss whose terms are per node, subgraph or
// molecule; L_contra's negatives stay within the rank (docs/method.md §3).
// Subgraphs stays this rank's count: summed, it is the batch's. A failed
// all-reduce panics with its *torch.Error.
func (j *job) globalShares(o model.DataParallel, out model.Output) model.Losses {
	l := out.Losses
	dev, dt := l.Total.Device(), l.Total.DType()
	f64 := torch.Options{DType: torch.Float64, Device: dev}
	live := out.Subgraphs.Live.ToDType(torch.Float64)
	molecules := live.Reshape(-1, out.Subgraphs.PerGraph).Size(0)
	// Indexed by model.MeanOver.
	counts := torch.Stack([]*torch.Tensor{
		torch.Full(nil, float64(out.H.Size(0)), f64),
		live.Sum(),
		torch.Full(nil, float64(molecules), f64),
		live.Reshape(molecules, out.Subgraphs.PerGraph).Amax(1, false).Sum(),
	}, 0)
	global := counts.Clone()
	if err := j.group.As(torch.CollectiveLossWeights).AllReduce(global, torch.ReduceSum); err != nil {
		panic(err)
	}
	share := counts.Div(global.ClampMin(1)).ToDType(dt)
	part := func(i int64) *torch.Tensor { return share.Narrow(0, i, 1).Reshape() }
	over := o.MeansOver()
	parts := make([]torch.Named, len(l.Parts))
	for i, p := range l.Parts {
		parts[i] = torch.Named{Name: p.Name, Tensor: p.Tensor.Mul(part(int64(over[i])))}
	}
	l.Parts = parts
	l.Total = o.Total(l.Parts)
	return l
}

// sameCheckpoint gives every rank the checkpoint rank 0 resumes from (nil
// when it starts afresh): rank 0 broadcasts its step, and the other ranks
// load the run's newest readable checkpoint (the run folder is shared by
// the job's machines, as torchrun's users arrange) and check that it is the
// same.
func (j *job) sameCheckpoint(run string, ck *runfolder.Checkpoint) (*runfolder.Checkpoint, error) {
	step := int64(-1)
	if ck != nil {
		step = ck.Step
	}
	t := torch.Full([]int64{1}, float64(step), torch.Options{DType: torch.Int64, Device: j.dev})
	defer t.Free()
	if err := j.group.Broadcast(t, 0); err != nil {
		if ck != nil {
			ck.Free()
		}
		return nil, fmt.Errorf("learning how rank 0 starts the run: %w", err)
	}
	step = t.ItemInt()
	if j.rank == 0 || step < 0 {
		return ck, nil
	}
	mine, _, err := runfolder.LatestCheckpoint(run)
	if err != nil {
		return nil, fmt.Errorf("rank %d: %w", j.rank, err)
	}
	if mine.Step != step {
		mine.Free()
		return nil, fmt.Errorf("rank %d: the newest checkpoint it reads, %s, is not rank 0's (step %d): is %s the same folder on every machine?", j.rank, mine.Path, step, run)
	}
	return mine, nil
}

// explain turns a failed collective into the one line a user reads: which
// rank saw it, and that another rank died or stopped answering, with the
// backend's own message. Other errors pass unchanged. Run applies it to
// whatever it returns.
func (j *job) explain(err error) error {
	var already *JobError
	if !torch.IsCollectiveError(err) || errors.As(err, &already) {
		return err
	}
	return &JobError{Rank: j.rank, Size: j.size, Err: err}
}

// JobError is a data-parallel run that cannot go on because a collective
// failed: another rank died or did not answer within the timeout. The
// newest checkpoint is intact (rank 0 writes each one atomically).
type JobError struct {
	Rank, Size int
	Err        error
}

func (e *JobError) Error() string {
	return fmt.Sprintf("rank %d of %d: another process of the job failed or stopped answering: %v",
		e.Rank, e.Size, strings.ReplaceAll(e.Err.Error(), "\n", " "))
}

func (e *JobError) Unwrap() error { return e.Err }

// sameConfig makes sure that every rank was started with the same
// configuration (every flag, --seed included): ranks that disagree would
// broadcast tensors of other shapes, which aborts the backend, or train a
// model other than the one the run records. Each rank's SHA-256 of its
// JSON configuration is gathered on every rank; where they differ, rank 0's
// JSON is broadcast so that each differing rank names the fields, and every
// rank returns one line.
func (j *job) sameConfig(cfg runfolder.Config) error {
	blob, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(blob)
	words := make([]int64, 4)
	for i := range words {
		words[i] = int64(binary.LittleEndian.Uint64(sum[8*i:]))
	}
	s := torch.NewScope()
	defer s.Close()
	all, err := j.group.AllGather(torch.FromSlice(words).To(j.dev, false))
	if err != nil {
		return fmt.Errorf("comparing the ranks' configurations: %w", err)
	}
	hashes := torch.ToSlice[int64](all.To(torch.CPU, false).Reshape(int64(j.size), 4))
	var differ []string
	for r := 1; r < j.size; r++ {
		if !slices.Equal(hashes[4*r:4*r+4], hashes[:4]) {
			differ = append(differ, strconv.Itoa(r))
		}
	}
	if len(differ) == 0 {
		return nil
	}
	// Rank 0's configuration, for the differing ranks to name the fields.
	n := torch.Full([]int64{1}, float64(len(blob)), torch.Options{DType: torch.Int64, Device: j.dev})
	if err := j.group.Broadcast(n, 0); err != nil {
		return fmt.Errorf("comparing the ranks' configurations: %w", err)
	}
	theirs := make([]uint8, n.ItemInt())
	if j.rank == 0 {
		copy(theirs, blob)
	}
	t := torch.FromSlice(theirs).To(j.dev, false)
	if err := j.group.Broadcast(t, 0); err != nil {
		return fmt.Errorf("comparing the ranks' configurations: %w", err)
	}
	const advice = "start every rank with the same flags"
	if j.rank == 0 || !slices.Contains(differ, strconv.Itoa(j.rank)) {
		return fmt.Errorf("rank %d of %d: rank %s started with another configuration than rank 0's: %s",
			j.rank, j.size, strings.Join(differ, ", "), advice)
	}
	var zero runfolder.Config
	if err := json.Unmarshal(torch.ToSlice[uint8](t.To(torch.CPU, false)), &zero); err != nil {
		return fmt.Errorf("rank %d of %d: reading rank 0's configuration: %w", j.rank, j.size, err)
	}
	var fields []string
	mine, theirs0 := runfolder.Flatten(cfg), runfolder.Flatten(zero)
	for _, k := range slices.Sorted(maps.Keys(mine)) {
		if v, ok := theirs0[k]; !ok || !reflect.DeepEqual(mine[k], v) {
			fields = append(fields, fmt.Sprintf("%s %v (rank 0: %v)", k, mine[k], v))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(theirs0)) {
		if _, ok := mine[k]; !ok {
			fields = append(fields, fmt.Sprintf("%s unset (rank 0: %v)", k, theirs0[k]))
		}
	}
	return fmt.Errorf("rank %d of %d: its configuration differs from rank 0's: %s: %s", j.rank, j.size, strings.Join(fields, ", "), advice)
}
