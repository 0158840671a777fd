package pretrain

import (
	"fmt"
	"strings"
	"time"

	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/trainer/metrics"
	"github.com/micrograph/micrograph/trainer/runfolder"

	"github.com/micrograph/micrograph/torch"
)

// pendingStep is a step whose losses are still on the device.
type pendingStep struct {
	step      int64
	epoch     int
	values    *torch.Tensor // total, node_mot, mot_sub, reg, contra, subgraphs; in a job also stop (ranks asking to stop)
	skipped   bool
	molecules int
	queued    time.Time // once steps are queued as fast as the device runs them, their spacing is its pace
}

// step runs one optimiser step on a batch and returns its losses, stacked
// and still on the device. With SkipNonFinite it reads the loss first and
// skips the update of a non-finite one. In a data-parallel job the losses are
// the global batch's means (see globalShares), the gradients are summed
// across ranks, and stop says that this rank was asked to stop; a failed
// collective is the error (or, within the model's maths, a panic as any
// failed tensor op).
func (t *pretrainer) step(b *feed.Batch, stop bool) (values *torch.Tensor, skipped bool, err error) {
	s := torch.NewScope()
	defer s.Close()
	l := t.procs.shares(t.model, t.model.Forward(b.Graph(t.dev), true))
	t.adam.ZeroGrad()
	parts := []*torch.Tensor{l.Total}
	for _, p := range l.Parts {
		parts = append(parts, p.Tensor)
	}
	parts = append(parts, l.Subgraphs.ToDType(l.Total.DType()))
	if values, err = t.procs.beginSum(parts, stop); err != nil {
		return nil, false, err
	}
	l.Total.Backward()
	if err = t.procs.endSum(); err != nil {
		return nil, false, err
	}
	if t.cfg.ClipGradNorm > 0 {
		for _, group := range t.clipGroups {
			torch.ClipGradNorm(group, t.cfg.ClipGradNorm)
		}
	}
	if t.cfg.SkipNonFinite && !metrics.IsFinite(values.Narrow(0, 0, 1).Item()) {
		t.adam.ZeroGrad()
		skipped = true
	} else {
		t.adam.Step()
	}
	return s.Keep(values), skipped, nil
}

// advance runs one optimiser step on b, and then logs the step before it,
// whose losses the device has computed by now: the device never waits for
// the host.
func (t *pretrainer) advance(b *feed.Batch, stop bool) error {
	t.steps++
	values, skipped, err := t.step(b, stop) // queued on the device, not yet read
	next := &pendingStep{step: t.steps, epoch: b.Pos.Epoch + 1, values: values, skipped: skipped,
		molecules: t.cfg.BatchSize, queued: time.Now()}
	t.loader.Release(b)
	if err != nil {
		return err
	}
	previous := t.pending
	t.pending = next
	return t.logStep(previous)
}

// flush logs the pending step, if any.
func (t *pretrainer) flush() error {
	p := t.pending
	t.pending = nil
	return t.logStep(p)
}

// logStep reads a step's losses (freeing them), logs them, and stops the run
// on a non-finite loss unless it was skipped; nil logs nothing.
func (t *pretrainer) logStep(p *pendingStep) error {
	if p == nil {
		return nil
	}
	v := torch.ToSlice[float64](p.values)
	p.values.Free()
	// v: the loss, its parts, the subgraphs and, in a job, the stop flag.
	names := t.model.Objective.PartNames()
	r := runfolder.LogRecord{Step: p.step, Epoch: p.epoch, Loss: metrics.Value(v[0]),
		Subgraphs: int64(v[1+len(names)]), LR: metrics.Value(t.adam.LR), Skipped: p.skipped}
	for i, name := range names {
		r.Parts = append(r.Parts, runfolder.LossPart{Name: name, Value: metrics.Value(v[1+i])})
	}
	t.stopAgreed = t.stopAgreed || len(v) > 2+len(names) && v[2+len(names)] > 0 // only a job's steps carry a stop flag
	t.molecules += p.molecules
	if p.step%int64(t.cfg.LogEvery) == 0 || !metrics.IsFinite(v[0]) {
		r.MoleculesPerS = metrics.Value(float64(t.molecules) / p.queued.Sub(t.lastLog).Seconds())
		t.molecules, t.lastLog = 0, p.queued
		for _, s := range t.sinks {
			if err := s.Write(r); err != nil {
				return err
			}
		}
	}
	if !metrics.IsFinite(v[0]) && !p.skipped {
		e := &NonFiniteLossError{Step: p.step, Loss: v[0], Parts: r.Parts}
		if t.run != "" { // a bench has no run folder
			if paths, _ := runfolder.ReadableCheckpoints(t.run, nil); len(paths) > 0 {
				e.LastCheckpoint = paths[0]
			}
		}
		return e
	}
	if p.skipped {
		t.bar.printf("micrograph: step %d: non-finite loss %v, update skipped", p.step, v[0])
	}
	return nil
}

// NonFiniteLossError stops a run whose loss became NaN or infinite (unless
// Config.SkipNonFinite skips such batches); nothing of that step is saved.
type NonFiniteLossError struct {
	Step           int64
	Loss           float64
	Parts          []runfolder.LossPart
	LastCheckpoint string // the newest checkpoint, which resuming continues from; "" if none
}

func (e *NonFiniteLossError) Error() string {
	where := "no checkpoint was written yet"
	if e.LastCheckpoint != "" {
		where = "the last good checkpoint is " + e.LastCheckpoint
	}
	parts := make([]string, len(e.Parts))
	for i, p := range e.Parts {
		parts[i] = fmt.Sprintf("%s %v", p.Name, float64(p.Value))
	}
	return fmt.Sprintf("step %d: the loss is %v (%s); stopped without saving: %s",
		e.Step, e.Loss, strings.Join(parts, ", "), where)
}

// checkpoint saves the run's state after its last step (flushing first, so
// that a checkpoint never holds the result of a non-finite step).
func (t *pretrainer) checkpoint() error {
	step := t.steps
	if err := t.flush(); err != nil {
		return err
	}
	rngs, err := t.procs.gatherRNG()
	if err != nil {
		return fmt.Errorf("checkpoint at step %d: %w", step, err)
	}
	defer func() {
		for _, n := range rngs {
			n.Tensor.Free()
		}
	}()
	if t.procs.Rank() != 0 {
		return nil
	}
	path, err := runfolder.SaveCheckpoint(t.run, runfolder.Checkpoint{
		Step: step, Position: t.loader.Position(), Config: t.cfg, World: t.procs.Size(), Threads: torch.NumThreads(),
		Model: t.model.Store.State(), Optim: t.adam.State(), RNG: rngs,
	})
	if err != nil {
		return fmt.Errorf("checkpoint at step %d: %w", step, err)
	}
	t.lastCheckpoint = path
	return nil
}
