package distributed_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/micrograph/micrograph/internal/testenv"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/distributed"
)

// caseEnv makes the test binary one rank of a job (see TestMain): its value
// names the case the rank runs.
const caseEnv = "MICROGRAPH_TEST_DISTRIBUTED_CASE"

func TestMain(m *testing.M) {
	if name := os.Getenv(caseEnv); name != "" {
		os.Exit(runRank(name))
	}
	os.Exit(m.Run())
}

// rankResult is what a rank reports on stdout, as JSON.
type rankResult struct {
	Values map[string][]float64 `json:"values"`
	Error  string               `json:"error,omitempty"`
}

// runRank joins the job from the environment, runs a case and prints what it
// computed.
func runRank(name string) int {
	torch.SetNumThreads(1)
	e, ok, err := distributed.FromEnv()
	if err != nil || !ok {
		fmt.Fprintln(os.Stderr, "no job in the environment:", err)
		return 2
	}
	g, err := distributed.Join(e, torch.CPU, 5*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	res := rankResult{Values: map[string][]float64{}}
	switch name {
	case "collectives":
		err = collectives(g, res.Values)
	case "batch-norm":
		err = torch.Catch(func() { batchNormAcross(g, res.Values) })
	case "dead-peer":
		if g.Rank() == 1 {
			os.Exit(3) // gone without a word, as after kill -9
		}
		err = g.AllReduce(torch.Ones([]int64{4}, torch.Options{DType: torch.Float32}), torch.ReduceSum)
		collectiveErr := err
		if err == nil {
			err = fmt.Errorf("all-reduce with a dead peer succeeded")
		} else {
			res.Error, err = err.Error(), nil
			if torch.IsCollectiveError(fmt.Errorf("wrapped: %w", collectiveErr)) {
				res.Values["is_collective_error"] = []float64{1}
			}
		}
	default:
		err = fmt.Errorf("unknown case %q", name)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

// collectives runs every collective on values that depend on the rank r:
// the results are hand-computable for 2 ranks.
func collectives(g *torch.ProcessGroup, out map[string][]float64) error {
	r := float64(g.Rank())
	s := torch.NewScope()
	defer s.Close()
	f32 := torch.FromSlice([]float32{float32(r + 1), float32(10 * (r + 1)), 0.25})
	if err := g.AllReduce(f32, torch.ReduceSum); err != nil {
		return err
	}
	out["sum_f32"] = torch.ToSlice[float64](f32.ToDType(torch.Float64))
	f64 := torch.FromSlice([]float64{1 + r, 1e-3 * (r + 1)}, 2)
	if err := g.AllReduce(f64, torch.ReduceSum); err != nil {
		return err
	}
	out["sum_f64"] = torch.ToSlice[float64](f64)
	mx := torch.FromSlice([]float64{r, -r})
	if err := g.AllReduce(mx, torch.ReduceMax); err != nil {
		return err
	}
	out["max"] = torch.ToSlice[float64](mx)
	b := torch.FromSlice([]float64{r, r + 0.5, r + 0.75, 7 * r}, 2, 2)
	if err := g.Broadcast(b, 1); err != nil {
		return err
	}
	out["broadcast_from_1"] = torch.ToSlice[float64](b)
	ga, err := g.AllGather(torch.FromSlice([]float64{r, 100 + r, 200 + r}))
	if err != nil {
		return err
	}
	out["all_gather"] = append(torch.ToSlice[float64](ga), float64(ga.Size(0)), float64(ga.Size(1)))
	if err := g.Barrier(); err != nil {
		return err
	}
	// Gradients, three steps: loss_r = (r+1)·k·Σp² + r·Σq at step k gives p
	// the gradient 2(r+1)·k·p, summed 6k·p for two ranks, and q 1 in every
	// entry; at step 3 rank 1 alone adds 5·u, so that u's gradient is 5 on
	// rank 1 and none on rank 0. Buckets of 12 bytes: p, q and u apart, in
	// that order, so that p's and q's start during the backward pass and u's
	// (which waits for them) then too where u has a gradient, else at End.
	p := torch.FromSlice([]float32{1, 2, 3}).SetRequiresGrad(true)
	q := torch.FromSlice([]float32{1, 1, 1, 1}, 2, 2).SetRequiresGrad(true)
	u := torch.FromSlice([]float32{5}).SetRequiresGrad(true)
	params := []*torch.Tensor{p, q, u}
	sum, err := g.NewGradientSum(params, 12)
	if err != nil {
		return err
	}
	defer sum.Free()
	for k := 1.0; k <= 3; k++ {
		torch.ZeroGrad(params)
		values := torch.FromSlice([]float64{r + 1, 10 * k * r})
		if err := sum.Begin(values); err != nil {
			return err
		}
		loss := p.Mul(p).Sum().MulScalar((r + 1) * k).Add(q.Sum().MulScalar(r))
		if k == 3 && r == 1 {
			loss = loss.Add(u.Sum().MulScalar(5))
		}
		before := g.Profile()[torch.CollectiveGradients].Calls
		loss.Backward()
		// From the second step on, buckets start during the backward pass.
		out[fmt.Sprintf("buckets_started_in_backward_%g", k)] = []float64{float64(g.Profile()[torch.CollectiveGradients].Calls - before)}
		if err := sum.End(); err != nil {
			return err
		}
		step := fmt.Sprintf("_%g", k)
		out["values"+step] = torch.ToSlice[float64](values)
		out["grad_p"+step] = torch.ToSlice[float64](p.Grad().ToDType(torch.Float64))
		out["grad_q"+step] = torch.ToSlice[float64](q.Grad().ToDType(torch.Float64))
		if gu := u.Grad(); gu != nil {
			out["grad_u"+step] = torch.ToSlice[float64](gu.ToDType(torch.Float64))
		}
	}
	// The profile counts collectives by kind: two as loss weights.
	losses := g.As(torch.CollectiveLossWeights)
	for range 2 {
		if err := losses.AllReduce(torch.FromSlice([]float32{1}), torch.ReduceSum); err != nil {
			return err
		}
	}
	lw := g.Profile()[torch.CollectiveLossWeights]
	out["loss_weights_profile"] = []float64{float64(lw.Calls), float64(min(lw.Time, 1))}
	// The differentiable sum: y = Σ_ranks x_r, loss_r = (r+1)·Σ y, so
	// d(Σ_r loss_r)/dx = Σ_r (r+1) = 3 on every rank.
	x := torch.FromSlice([]float64{r, 2 * r}).SetRequiresGrad(true)
	y := g.AllReduceSumGrad(x)
	out["sum_grad_forward"] = torch.ToSlice[float64](y.Detach())
	y.Sum().MulScalar(r + 1).Backward()
	out["sum_grad_backward"] = torch.ToSlice[float64](x.Grad())
	return nil
}

// The synchronised batch norm's input: normRows × normChannels values far
// from 0 (offset) and varying by about 1 within each channel, rank 0 holding
// the first normSplit rows; the loss Σ y·weights.
const normRows, normChannels, normSplit = 9, 4, 4

func normInput(offset float64) (x, lossWeights []float64) {
	for i := range normRows * normChannels {
		x = append(x, offset*float64(1+i%normChannels)+math.Sin(float64(7*i+1)))
		lossWeights = append(lossWeights, math.Cos(float64(3*i+2)))
	}
	return x, lossWeights
}

// batchNormAcross runs ProcessGroup.BatchNorm on this rank's rows, in float64
// (offset 3) and in float32 (offset 1e3, where a sum of squares about zero
// would lose the variance to cancellation), and reports its output, the
// gradients of x and of the parameters (this rank's share) and the running
// statistics.
func batchNormAcross(g *torch.ProcessGroup, out map[string][]float64) {
	s := torch.NewScope()
	defer s.Close()
	lo, n := int64(0), int64(normSplit)
	if g.Rank() == 1 {
		lo, n = normSplit, normRows-normSplit
	}
	for _, tc := range []struct {
		name   string
		dt     torch.DType
		offset float64
	}{{"f64", torch.Float64, 3}, {"f32", torch.Float32, 1e3}} {
		xs, ws := normInput(tc.offset)
		opts := torch.Options{DType: tc.dt}
		x := torch.FromSlice(xs, normRows, normChannels).ToDType(tc.dt).Narrow(0, lo, n).Clone().SetRequiresGrad(true)
		weight := torch.FromSlice([]float64{1, 0.5, 2, -1}).ToDType(tc.dt).SetRequiresGrad(true)
		bias := torch.FromSlice([]float64{0, 1, -2, 0.25}).ToDType(tc.dt).SetRequiresGrad(true)
		mean, variance := torch.Zeros([]int64{normChannels}, opts), torch.Ones([]int64{normChannels}, opts)
		y := g.BatchNorm(x, weight, bias, mean, variance, 0.1, 1e-5)
		y.Mul(torch.FromSlice(ws, normRows, normChannels).ToDType(tc.dt).Narrow(0, lo, n)).Sum().Backward()
		for name, t := range map[string]*torch.Tensor{"y": y.Detach(), "grad_x": x.Grad(), "grad_weight": weight.Grad(),
			"grad_bias": bias.Grad(), "running_mean": mean, "running_var": variance} {
			out[tc.name+"_"+name] = torch.ToSlice[float64](t.ToDType(torch.Float64))
		}
	}
}

type rankRun struct {
	res    rankResult
	stderr string
	err    error // the process's exit
}

// runJob runs a case as world ranks of this test binary over loopback.
func runJob(t *testing.T, name string, world int) []rankRun {
	t.Helper()
	port := testenv.FreePort(t)
	cmds := make([]*exec.Cmd, world)
	outs := make([]*strings.Builder, world)
	errs := make([]*strings.Builder, world)
	for r := range world {
		e := distributed.Env{Rank: r, WorldSize: world, MasterAddr: "127.0.0.1", MasterPort: port}
		c := exec.Command(os.Args[0], "-test.run=^$")
		c.Env = append(append(os.Environ(), e.Vars()...), caseEnv+"="+name, "OMP_NUM_THREADS=1")
		outs[r], errs[r] = &strings.Builder{}, &strings.Builder{}
		c.Stdout, c.Stderr = outs[r], errs[r]
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[r] = c
	}
	runs := make([]rankRun, world)
	for r, c := range cmds {
		runs[r].err = c.Wait()
		runs[r].stderr = errs[r].String()
		if s := strings.TrimSpace(outs[r].String()); s != "" {
			if err := json.Unmarshal([]byte(s), &runs[r].res); err != nil {
				t.Fatalf("rank %d: %v: %q", r, err, s)
			}
		}
	}
	return runs
}

func TestCollectivesOverGlooOnLoopback(t *testing.T) {
	if !torch.HasBackend(torch.Gloo) {
		t.Skip("the shim was built without Gloo")
	}
	want := map[string][]float64{
		"sum_f32":           {3, 30, 0.5},
		"sum_f64":           {3, 3e-3},
		"max":               {1, 0},
		"broadcast_from_1":  {1, 1.5, 1.75, 7},
		"all_gather":        {0, 100, 200, 1, 101, 201, 2, 3},
		"sum_grad_forward":  {1, 2},
		"sum_grad_backward": {3, 3},

		"buckets_started_in_backward_1": {2}, // p and q; u, without a gradient, at End
		"values_1":                      {3, 10},
		"grad_p_1":                      {6, 12, 18},
		"grad_q_1":                      {1, 1, 1, 1},
		"buckets_started_in_backward_2": {2},
		"values_2":                      {3, 20},
		"grad_p_2":                      {12, 24, 36},
		"grad_q_2":                      {1, 1, 1, 1},
		"values_3":                      {3, 30},
		"grad_p_3":                      {18, 36, 54},
		"grad_q_3":                      {1, 1, 1, 1},
		"loss_weights_profile":          {2, 1}, // calls, and some time spent
	}
	for r, run := range runJob(t, "collectives", 2) {
		if run.err != nil {
			t.Fatalf("rank %d: %v\n%s", r, run.err, run.stderr)
		}
		w := maps.Clone(want)
		w["buckets_started_in_backward_3"] = []float64{2 + float64(r)} // u's too, on rank 1
		if r == 1 {
			w["grad_u_3"] = []float64{5}
		}
		for k := range run.res.Values {
			if _, ok := w[k]; !ok && strings.HasPrefix(k, "grad_u") {
				t.Errorf("rank %d: %s = %v: a parameter without a gradient here got one", r, k, run.res.Values[k])
			}
		}
		for k, w := range w {
			if got := run.res.Values[k]; !reflect.DeepEqual(got, w) {
				t.Errorf("rank %d: %s = %v, want %v", r, k, got, w)
			}
		}
	}
}

func TestDeadPeerFailsTheCollective(t *testing.T) {
	if !torch.HasBackend(torch.Gloo) {
		t.Skip("the shim was built without Gloo")
	}
	runs := runJob(t, "dead-peer", 2)
	if ee, ok := runs[1].err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("rank 1 should exit 3 at once: %v\n%s", runs[1].err, runs[1].stderr)
	}
	if runs[0].err != nil || runs[0].res.Error == "" || len(runs[0].res.Values["is_collective_error"]) != 1 {
		t.Fatalf("rank 0 should see its all-reduce fail: %v, %+v\n%s", runs[0].err, runs[0].res, runs[0].stderr)
	}
	t.Logf("rank 0's error: %s", runs[0].res.Error)
}

func TestFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want distributed.Env
		ok   bool
		err  string
	}{
		{"alone", map[string]string{}, distributed.Env{WorldSize: 1}, false, ""},
		{"one", map[string]string{"WORLD_SIZE": "1", "RANK": "0"}, distributed.Env{WorldSize: 1, MasterPort: 29500}, false, ""},
		{"torchrun", map[string]string{"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1", "MASTER_ADDR": "node0", "MASTER_PORT": "1234"},
			distributed.Env{Rank: 3, WorldSize: 4, LocalRank: 1, MasterAddr: "node0", MasterPort: 1234}, true, ""},
		{"rank outside", map[string]string{"WORLD_SIZE": "2", "RANK": "2", "MASTER_ADDR": "h"}, distributed.Env{}, false, "RANK=2: outside 0…1"},
		{"no master", map[string]string{"WORLD_SIZE": "2", "RANK": "1"}, distributed.Env{}, false, "MASTER_ADDR is empty"},
		{"bad number", map[string]string{"WORLD_SIZE": "two", "RANK": "0"}, distributed.Env{}, false, `WORLD_SIZE="two": not an integer`},
		{"no rank", map[string]string{"WORLD_SIZE": "2", "MASTER_ADDR": "h"}, distributed.Env{}, false, "environment WORLD_SIZE=2 is set but RANK is not: a launcher sets both (unset WORLD_SIZE to run alone)"},
		{"rank alone", map[string]string{"RANK": "1"}, distributed.Env{}, false, "environment RANK=1 is set but WORLD_SIZE is not: a launcher sets both (unset RANK to run alone)"},
		{"rank 1 of 1", map[string]string{"WORLD_SIZE": "1", "RANK": "1"}, distributed.Env{}, false, "RANK=1: outside 0…0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"} {
				t.Setenv(k, tc.env[k])
				if _, set := tc.env[k]; !set {
					os.Unsetenv(k)
				}
			}
			got, ok, err := distributed.FromEnv()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || ok != tc.ok || got != tc.want {
				t.Fatalf("FromEnv = %+v, %v, %v; want %+v, %v", got, ok, err, tc.want, tc.ok)
			}
		})
	}
}

// Acceptance: synchronised batch norm over two ranks (4 + 5 rows) computes
// what batch norm computes over the 9 rows in one process, in float64 to
// 1e-12, and in float32 on values near 1e3 to float32 rounding of the
// output (a variance from sums of squares about zero would be lost there):
// each rank's rows of the output and of x's gradient, the running
// statistics, and the parameters' gradients summed over the ranks.
func TestBatchNormAcrossTwoProcesses(t *testing.T) {
	if !torch.HasBackend(torch.Gloo) {
		t.Skip("the shim was built without Gloo")
	}
	if !torch.FusedKernelsFor(torch.Zeros([]int64{1}, torch.Options{DType: torch.Float32})) {
		t.Skip("the batch-norm kernel needs AVX2 and FMA")
	}
	runs := runJob(t, "batch-norm", 2)
	for r, run := range runs {
		if run.err != nil {
			t.Fatalf("rank %d: %v\n%s", r, run.err, run.stderr)
		}
	}
	s := torch.NewScope()
	defer s.Close()
	for _, tc := range []struct {
		name   string
		dt     torch.DType
		offset float64
		tol    float64
	}{{"f64", torch.Float64, 3, 1e-12}, {"f32", torch.Float32, 1e3, 2e-3}} {
		// The reference: libtorch's batch norm over every row, in float64
		// from the same (rounded) inputs.
		xs, ws := normInput(tc.offset)
		x := torch.FromSlice(xs, normRows, normChannels).ToDType(tc.dt).ToDType(torch.Float64).SetRequiresGrad(true)
		weight := torch.FromSlice([]float64{1, 0.5, 2, -1}).SetRequiresGrad(true)
		bias := torch.FromSlice([]float64{0, 1, -2, 0.25}).SetRequiresGrad(true)
		f64 := torch.Options{DType: torch.Float64}
		mean, variance := torch.Zeros([]int64{normChannels}, f64), torch.Ones([]int64{normChannels}, f64)
		y := torch.BatchNorm(x, weight, bias, mean, variance, true, 0.1, 1e-5)
		y.Mul(torch.FromSlice(ws, normRows, normChannels)).Sum().Backward()
		want := map[string][]float64{"y": torch.ToSlice[float64](y.Detach()), "grad_x": torch.ToSlice[float64](x.Grad()),
			"grad_weight": torch.ToSlice[float64](weight.Grad()), "grad_bias": torch.ToSlice[float64](bias.Grad()),
			"running_mean": torch.ToSlice[float64](mean), "running_var": torch.ToSlice[float64](variance)}
		got := map[string][]float64{}
		for _, k := range []string{"y", "grad_x"} {
			got[k] = slices.Concat(runs[0].res.Values[tc.name+"_"+k], runs[1].res.Values[tc.name+"_"+k])
		}
		for _, k := range []string{"grad_weight", "grad_bias"} {
			a, b := runs[0].res.Values[tc.name+"_"+k], runs[1].res.Values[tc.name+"_"+k]
			for i := range a {
				got[k] = append(got[k], a[i]+b[i])
			}
		}
		for _, k := range []string{"running_mean", "running_var"} {
			got[k] = runs[0].res.Values[tc.name+"_"+k]
			if !slices.Equal(got[k], runs[1].res.Values[tc.name+"_"+k]) {
				t.Errorf("%s: %s differs between the ranks", tc.name, k)
			}
		}
		for k, w := range want {
			if len(got[k]) != len(w) {
				t.Fatalf("%s %s: %d values, want %d", tc.name, k, len(got[k]), len(w))
			}
			for i := range w {
				if d := math.Abs(got[k][i] - w[i]); d > tc.tol*math.Max(1, math.Abs(w[i])) {
					t.Errorf("%s %s[%d] = %.12g over two ranks, %.12g in one", tc.name, k, i, got[k][i], w[i])
				}
			}
		}
	}
}
