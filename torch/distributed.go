package torch

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unsafe"
)

// ProcessGroup is a c10d process group: the processes (ranks) of one
// torch.distributed job, joined through a TCPStore, and the backend that
// runs their collectives (Gloo for CPU tensors, NCCL for CUDA tensors).
//
// Every rank must call the same collectives in the same order with tensors
// of the same shape and dtype. A collective that fails (a rank gone, the
// timeout passed) returns an error; the group is unusable afterwards.
type ProcessGroup struct {
	h          C.mg_group
	rank, size int
	kind       Collective // what its collectives count as in the profile
	view       bool       // made by As: Close leaves the group open
}

// Collective says what a collective is for: a group's Profile counts each
// kind apart.
type Collective int

// Kinds of collectives.
const (
	CollectiveOther             Collective = C.MG_KIND_OTHER // set-up, checkpoints, measurements
	CollectiveSinkhorn          Collective = C.MG_KIND_SINKHORN
	CollectiveNormForward       Collective = C.MG_KIND_NORM_FORWARD // synchronised batch norm's statistics
	CollectiveNormBackward      Collective = C.MG_KIND_NORM_BACKWARD
	CollectiveNegativesForward  Collective = C.MG_KIND_NEGATIVES_FORWARD // L_contra's global negatives
	CollectiveNegativesBackward Collective = C.MG_KIND_NEGATIVES_BACKWARD
	CollectiveLossWeights       Collective = C.MG_KIND_LOSS_WEIGHTS // the counts the losses' shares are weighted by
	CollectiveLosses            Collective = C.MG_KIND_LOSSES       // the logged losses
	CollectiveGradients         Collective = C.MG_KIND_GRADIENTS
	numCollectives                         = C.MG_GROUP_KINDS
)

var collectiveNames = [numCollectives]string{"other", "sinkhorn", "norm_forward", "norm_backward",
	"negatives_forward", "negatives_backward", "loss_weights", "losses", "gradients"}

// String is the kind's name in bench's profile: "sinkhorn", "norm_forward", ….
func (k Collective) String() string {
	if k < 0 || k >= numCollectives {
		return fmt.Sprintf("Collective(%d)", int(k))
	}
	return collectiveNames[k]
}

// Collectives lists every kind, in order.
func Collectives() []Collective {
	out := make([]Collective, numCollectives)
	for i := range out {
		out[i] = Collective(i)
	}
	return out
}

// backward is the kind the backward pass of a differentiable collective of
// kind k counts as.
func (k Collective) backward() Collective {
	switch k {
	case CollectiveNormForward:
		return CollectiveNormBackward
	case CollectiveNegativesForward:
		return CollectiveNegativesBackward
	}
	return k
}

// Backends of process groups.
const (
	Gloo = "gloo"
	NCCL = "nccl"
)

// collectiveOp prefixes the Op of a collective's *Error, so that
// IsCollectiveError can tell communication failures from others.
const collectiveOp = "c10d "

// IsCollectiveError reports whether err is (or wraps) the failure of a
// process group's collective: a rank gone, or the timeout passed.
func IsCollectiveError(err error) bool {
	var te *Error
	return errors.As(err, &te) && strings.HasPrefix(te.Op, collectiveOp)
}

// HasBackend reports whether the shim was built with a backend (Gloo needs
// its headers at build time, NCCL a CUDA libtorch and nccl.h).
func HasBackend(name string) bool {
	mask := int(C.mg_group_backends())
	switch name {
	case Gloo:
		return mask&1 != 0
	case NCCL:
		return mask&2 != 0
	}
	return false
}

// NewProcessGroup joins rank of a group of size processes: rank 0 serves a
// TCPStore at masterAddr:masterPort and every rank waits there for the
// others, at most timeout, which also bounds every later collective.
func NewProcessGroup(backend, masterAddr string, masterPort, rank, size int, timeout time.Duration) (*ProcessGroup, error) {
	cb, ca := C.CString(backend), C.CString(masterAddr)
	defer C.free(unsafe.Pointer(cb))
	defer C.free(unsafe.Pointer(ca))
	var h C.mg_group
	ms := max(timeout.Milliseconds(), 1)
	op := fmt.Sprintf("process group (%s, rank %d of %d, master %s:%d)", backend, rank, size, masterAddr, masterPort)
	if err := checkErr(op, C.mg_group_new(cb, ca, C.int(masterPort), C.int(rank), C.int(size), C.int64_t(ms), &h)); err != nil {
		return nil, err
	}
	return &ProcessGroup{h: h, rank: rank, size: size}, nil
}

// Rank is this process's place in the group, from 0.
func (g *ProcessGroup) Rank() int { return g.rank }

// Size is the number of processes in the group (the world size).
func (g *ProcessGroup) Size() int { return g.size }

// As is the same group, its collectives counted as kind in the profile (the
// backward pass of AllReduceSumGrad as kind's backward counterpart). Close
// the group As was called on, not the view.
func (g *ProcessGroup) As(kind Collective) *ProcessGroup {
	v := *g
	v.kind, v.view = kind, true
	return &v
}

// CollectiveTime is how many collectives of a kind a group ran since it was
// made, and the time it spent in them: issuing each and waiting for it to
// end (for the slowest rank to reach it, and for the transfer).
type CollectiveTime struct {
	Kind  Collective
	Calls int64
	Time  time.Duration
}

// Profile is the group's CollectiveTime of every kind, in Collectives'
// order. Counting costs two clock readings per collective.
func (g *ProcessGroup) Profile() []CollectiveTime {
	var calls, ns [numCollectives]C.int64_t
	C.mg_group_profile(g.h, &calls[0], &ns[0])
	out := make([]CollectiveTime, numCollectives)
	for i := range out {
		out[i] = CollectiveTime{Kind: Collective(i), Calls: int64(calls[i]), Time: time.Duration(ns[i])}
	}
	return out
}

// Close releases the group; no collective may follow. On a view (As) it
// does nothing.
func (g *ProcessGroup) Close() {
	if g.h != nil && !g.view {
		C.mg_group_free(g.h)
		g.h = nil
	}
}

// AllReduce replaces t, which must be contiguous, by the reduction of every
// rank's t: ReduceSum, ReduceMax or ReduceMin.
func (g *ProcessGroup) AllReduce(t *Tensor, op Reduction) error {
	groupOp, ok := map[Reduction]C.int{ReduceSum: C.MG_GROUP_SUM, ReduceMax: C.MG_GROUP_MAX, ReduceMin: C.MG_GROUP_MIN}[op]
	if !ok {
		return &Error{Op: "all_reduce", Msg: fmt.Sprintf("reduction %d is not sum, max or min", op)}
	}
	return checkErr(collectiveOp+"all_reduce", C.mg_group_all_reduce(g.h, t.c(), groupOp, C.int(g.kind)))
}

// Broadcast replaces t, contiguous, on every rank by root's t.
func (g *ProcessGroup) Broadcast(t *Tensor, root int) error {
	return checkErr(collectiveOp+"broadcast", C.mg_group_broadcast(g.h, t.c(), C.int(root), C.int(g.kind)))
}

// AllGather stacks every rank's t in rank order: a new tensor of shape
// (Size, t's shape) on every rank.
func (g *ProcessGroup) AllGather(t *Tensor) (*Tensor, error) {
	var out C.mg_tensor
	if err := checkErr(collectiveOp+"all_gather", C.mg_group_all_gather(g.h, t.c(), C.int(g.kind), &out)); err != nil {
		return nil, err
	}
	return wrap(out), nil
}

// Barrier returns once every rank has reached it.
func (g *ProcessGroup) Barrier() error {
	return checkErr(collectiveOp+"barrier", C.mg_group_barrier(g.h, C.int(g.kind)))
}

// AllReduceSumGrad is the sum over ranks of t as part of the autograd graph:
// backpropagation through it sums the ranks' gradients (the gradient of the
// sum of every rank's loss). Every rank must call it, and run its backward
// pass, in the same order. Unlike the other collectives it sits inside tensor
// math, so a failure panics with *Error.
func (g *ProcessGroup) AllReduceSumGrad(t *Tensor) *Tensor {
	var out C.mg_tensor
	check(collectiveOp+"all_reduce_sum_autograd", C.mg_group_all_reduce_sum_autograd(g.h, t.c(), C.int(g.kind), C.int(g.kind.backward()), &out))
	return wrap(out)
}

// BatchNorm is training-mode batch norm of 2-d x over every rank's rows
// (synchronised batch norm) in the fused CPU kernel, where
// FusedKernelsFor(x): each rank's per-channel means and sums of squares are
// gathered and combined forward (one all-gather), the per-channel sums of the
// backward pass summed (one all-reduce), the running statistics move towards
// the global batch's, and the gradients of weight and bias are this rank's
// share, which the job sums with the others. Every rank calls it, and runs
// its backward pass, in the same order; a failure panics with *Error.
func (g *ProcessGroup) BatchNorm(x, weight, bias, runningMean, runningVar *Tensor, momentum, eps float64) *Tensor {
	var out C.mg_tensor
	check(collectiveOp+"batch_norm", C.mg_group_batch_norm(g.h, x.c(), weight.c(), bias.c(), runningMean.c(), runningVar.c(),
		C.double(momentum), C.double(eps), &out))
	return wrap(out)
}

// Sinkhorn is FusedSinkhorn over every rank's rows of q (the batch's nodes
// split across the ranks), where FusedKernelsFor(q): the row sums are summed
// over ranks, one all-reduce per round, and N is the global batch's; motif
// and the balanced matrix's columns are this rank's nodes'. Every rank calls
// it in the same order; a failure panics with *Error.
func (g *ProcessGroup) Sinkhorn(q *Tensor, lambda float64, iters int) (motif, balanced *Tensor) {
	var m, a C.mg_tensor
	check(collectiveOp+"sinkhorn", C.mg_group_sinkhorn(g.h, q.c(), C.double(lambda), C.int(iters), &m, &a))
	return wrap(m), wrap(a)
}

// GradientSum sums a job's gradients over its ranks while the backward pass
// runs: hooks on the parameters copy each gradient into a flat bucket as
// backpropagation makes it, and each bucket's all-reduce starts as soon as
// the bucket is whole and every bucket before it has started, on a second
// group of the same processes (so that the collectives of the backward pass
// itself never queue behind a bucket). The buckets are the same at every
// step, so each sum adds the same values in the same order whatever the
// run's history.
type GradientSum struct {
	h C.mg_grad_sum
}

// NewGradientSum hooks params (in the same order on every rank; each
// requiring a gradient) for sums in buckets of about bucketBytes, filled in
// the order of params: the order in which the backward pass makes their
// gradients lets each bucket start as early as it can (another order only
// starts them later). Every rank calls it, as it makes a group.
func (g *ProcessGroup) NewGradientSum(params []*Tensor, bucketBytes int64) (*GradientSum, error) {
	hs := handles(params)
	var h C.mg_grad_sum
	if err := checkErr(collectiveOp+"gradient sum", C.mg_grad_sum_new(g.h, firstHandle(hs), C.int(len(hs)), C.int64_t(bucketBytes), &h)); err != nil {
		return nil, err
	}
	return &GradientSum{h: h}, nil
}

// Begin comes before a backward pass, the parameters' gradients none
// (ZeroGrad): it starts summing values (contiguous; nil: none) over the
// ranks, in place, and arms the hooks.
func (s *GradientSum) Begin(values *Tensor) error {
	var v C.mg_tensor
	if values != nil {
		v = values.c()
	}
	return checkErr(collectiveOp+"gradient sum", C.mg_grad_sum_begin(s.h, v))
}

// End comes after the backward pass: it starts the buckets left (a
// parameter without a gradient on this rank contributes zeros and keeps no
// gradient, as the optimiser then skips it), waits for every sum, and
// replaces each gradient, and Begin's values, by the sum over the ranks.
func (s *GradientSum) End() error {
	return checkErr(collectiveOp+"gradient sum", C.mg_grad_sum_end(s.h))
}

// Free removes the hooks.
func (s *GradientSum) Free() {
	if s.h != nil {
		C.mg_grad_sum_free(s.h)
		s.h = nil
	}
}
