package torch_test

import (
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/testdevice"
)

func TestScopeFreesTemporaries(t *testing.T) {
	base := torch.LiveTensors()
	x := torch.Ones([]int64{4}, torch.Options{})
	defer x.Free()

	outer := torch.NewScope()
	y := x.Exp()
	inner := torch.NewScope()
	z := y.MulScalar(2).Relu()
	kept := inner.Keep(z.AddScalar(1))
	inner.Close()
	if got := torch.LiveTensors(); got != base+3 { // x, y, kept
		t.Errorf("after inner close: %d live, want %d", got, base+3)
	}
	assertTensor(t, "kept", kept, []int64{4}, []float64{6.43656365691809, 6.43656365691809, 6.43656365691809, 6.43656365691809}, 1e-6)
	if err := torch.Catch(func() { z.Exp() }); err == nil {
		t.Error("a tensor of a closed scope is still usable")
	}
	owned := outer.Keep(kept)
	outer.Close()
	if got := torch.LiveTensors(); got != base+2 { // x, owned
		t.Errorf("after outer close: %d live, want %d", got, base+2)
	}
	owned.Free()
	owned.Free() // twice is harmless
	if got := torch.LiveTensors(); got != base+1 {
		t.Errorf("after Free: %d live, want %d", got, base+1)
	}
}

// Scoped keeps its result and frees the rest; ScopedValue frees everything,
// also when fn panics.
func TestScopedHelpers(t *testing.T) {
	base := torch.LiveTensors()
	x := torch.Ones([]int64{3}, torch.Options{})
	defer x.Free()
	y := torch.Scoped(func() *torch.Tensor { return x.MulScalar(2).Exp().AddScalar(1) })
	if got := torch.LiveTensors(); got != base+2 { // x, y
		t.Errorf("after Scoped: %d live, want %d", got, base+2)
	}
	got, want := torch.ToSlice[float32](y), math.Exp(2)+1
	if len(got) != 3 || slices.ContainsFunc(got, func(v float32) bool { return math.Abs(float64(v)-want) > 1e-5 }) {
		t.Errorf("Scoped's result %v, want e²+1 = %v thrice", got, want)
	}
	y.Free()
	sum := torch.ScopedValue(func() float64 { return x.MulScalar(3).Sum().Item() })
	if sum != 9 {
		t.Errorf("ScopedValue's result %v, want 9", sum)
	}
	if got := torch.LiveTensors(); got != base+1 {
		t.Errorf("after ScopedValue: %d live, want %d", got, base+1)
	}
	err := torch.Catch(func() {
		torch.ScopedValue(func() int { x.MulScalar(2).Add(torch.Ones([]int64{2}, torch.Options{})); return 0 })
	})
	if err == nil {
		t.Error("adding shapes 3 and 2 did not fail")
	}
	if got := torch.LiveTensors(); got != base+1 {
		t.Errorf("after a panic in ScopedValue: %d live, want %d", got, base+1)
	}
}

func TestScopesCloseInOrder(t *testing.T) {
	outer := torch.NewScope()
	inner := torch.NewScope()
	if err := torch.Catch(outer.Close); err == nil {
		t.Error("closing the outer scope first did not fail")
	}
	inner.Close()
	outer.Close()
	outer.Close() // twice is harmless
}

// Tensors made by another goroutine never join this goroutine's scope.
func TestScopeIgnoresOtherGoroutines(t *testing.T) {
	s := torch.NewScope()
	done := make(chan *torch.Tensor)
	go func() { done <- torch.Ones([]int64{2}, torch.Options{}) }()
	other := <-done
	s.Close()
	assertTensor(t, "other goroutine's tensor", other, []int64{2}, []float64{1, 1}, 0)
	other.Free()
}

// The safety net frees (and counts) a tensor nobody freed.
func TestLeakSafetyNet(t *testing.T) {
	runtime.GC()
	time.Sleep(20 * time.Millisecond)
	before := torch.LeakedTensors()
	base := torch.LiveTensors()
	func() { torch.Zeros([]int64{1000}, torch.Options{}) }()
	// The cleanup runs on its own goroutine after a collection: wait for
	// it, however busy the machine (go test's timeout reports a hang).
	for torch.LeakedTensors() == before {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if torch.LeakedTensors() != before+1 {
		t.Fatalf("leaked count %d, want %d", torch.LeakedTensors(), before+1)
	}
	if got := torch.LiveTensors(); got != base {
		t.Errorf("%d live tensors after the leak was collected, want %d", got, base)
	}
}

// procStatus reads a numeric field of /proc/self/status (VmRSS in kB, Threads).
func procStatus(t testing.TB, field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// A training-like loop (forward, backward, Adam, each step in a scope) keeps
// the handle count constant and RSS flat, and its OS threads bounded.
func TestLongTrainingIsStable(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dev := testdevice.Get(t)
	o := torch.Options{Device: dev}
	setup := torch.NewScope()
	w1 := setup.Keep(torch.Rand([]int64{32, 16}, o).MulScalar(0.1).SetRequiresGrad(true))
	w2 := setup.Keep(torch.Rand([]int64{1, 32}, o).MulScalar(0.1).SetRequiresGrad(true))
	params := []*torch.Tensor{w1, w2}
	m := []*torch.Tensor{setup.Keep(torch.Zeros([]int64{32, 16}, o)), setup.Keep(torch.Zeros([]int64{1, 32}, o))}
	v := []*torch.Tensor{setup.Keep(torch.Zeros([]int64{32, 16}, o)), setup.Keep(torch.Zeros([]int64{1, 32}, o))}
	x := setup.Keep(torch.Rand([]int64{64, 16}, o))
	target := setup.Keep(torch.Rand([]int64{64, 1}, o))
	setup.Close()
	steps := []int64{0, 0}
	defer func() {
		for _, t := range append(append(append(params, m...), v...), x, target) {
			t.Free()
		}
	}()
	step := func() {
		s := torch.NewScope()
		defer s.Close()
		h := torch.Linear(x, w1, nil).Relu()
		loss := torch.Linear(h, w2, nil).Sub(target).PowScalar(2).Mean()
		torch.ZeroGrad(params)
		loss.Backward()
		torch.ClipGradNorm(params, 1)
		torch.AdamStep(params, m, v, steps, 1e-3, 0.9, 0.999, 1e-8, 0, false)
	}
	const warmup, total = 1000, 10000
	for range warmup {
		step()
	}
	liveStart, rssStart, threadsStart := torch.LiveTensors(), procStatus(t, "VmRSS"), procStatus(t, "Threads")
	maxThreads := threadsStart
	for i := range total - warmup {
		step()
		if i%100 == 0 {
			maxThreads = max(maxThreads, procStatus(t, "Threads"))
		}
	}
	liveEnd, rssEnd := torch.LiveTensors(), procStatus(t, "VmRSS")
	t.Logf("live handles %d → %d, RSS %d → %d kB, threads %d (max %d)", liveStart, liveEnd, rssStart, rssEnd, threadsStart, maxThreads)
	if liveEnd != liveStart {
		t.Errorf("live handles went from %d to %d", liveStart, liveEnd)
	}
	if float64(rssEnd) > 1.05*float64(rssStart) {
		t.Errorf("RSS grew from %d kB to %d kB (more than 5%%)", rssStart, rssEnd)
	}
	// Go's own threads plus libtorch's pools: a small constant, not one per step.
	if maxThreads > threadsStart+4 {
		t.Errorf("OS threads grew from %d to %d", threadsStart, maxThreads)
	}
	if steps[0] != total {
		t.Errorf("Adam counted %d steps, want %d", steps[0], total)
	}
}

// The CPU pool serves a freed large block to the next allocation of its size
// class, leaves small tensors to glibc, and keeps values intact. (From here
// on the whole test process allocates through the pool.)
func TestCPUPoolReusesBlocks(t *testing.T) {
	scope(t)
	torch.TuneAllocator()
	f32 := torch.Options{DType: torch.Float32}
	start := torch.CPUPoolStats()
	since := func() torch.PoolStats {
		s := torch.CPUPoolStats()
		return torch.PoolStats{Allocated: s.Allocated - start.Allocated, Reused: s.Reused - start.Reused,
			PooledBytes: s.PooledBytes - start.PooledBytes}
	}
	// 2 MiB exactly: its own class.
	a := torch.Full([]int64{512, 1024}, 3, f32)
	if got, want := a.Sum().Item(), 3.0*512*1024; got != want {
		t.Errorf("sum of the pooled tensor: %v, want %v", got, want)
	}
	a.Free()
	if s := since(); s.Allocated != 1 || s.PooledBytes != 2<<20 {
		t.Fatalf("after one 2 MiB tensor: %+v, want 1 block of 2 MiB", s)
	}
	// 500×1024 floats (1,953.125 KiB) round up to the same 2 MiB class.
	b := torch.Ones([]int64{500, 1024}, f32)
	if got, want := b.Sum().Item(), 500.0*1024; got != want {
		t.Errorf("sum of the reused block: %v, want %v", got, want)
	}
	if s := since(); s.Allocated != 1 || s.Reused != 1 {
		t.Errorf("a 1.9 MiB tensor after a freed 2 MiB one: %+v, want the block reused", s)
	}
	// While b holds the block, another of its class needs a new one; a
	// 3 MiB tensor needs a block of its own class; small ones bypass the pool.
	c := torch.Zeros([]int64{512, 1024}, f32)
	d := torch.Zeros([]int64{768, 1024}, f32)
	small := torch.Zeros([]int64{16, 16}, f32)
	if s := since(); s.Allocated != 3 || s.Reused != 1 || s.PooledBytes != 7<<20 {
		t.Errorf("after 2 + 3 MiB more while the first is held: %+v, want 3 blocks, 7 MiB", s)
	}
	for _, x := range []*torch.Tensor{b, c, d, small} {
		x.Free()
	}
}
