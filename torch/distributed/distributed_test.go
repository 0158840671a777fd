package distributed_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

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
	// Gradients: p = [1, 2, 3] (one bucket with q, of another shape); loss_r
	// = (r+1)·Σp² gives grad 2(r+1)p, summed: 6p for two ranks.
	p := torch.FromSlice([]float32{1, 2, 3}).SetRequiresGrad(true)
	q := torch.FromSlice([]float32{1, 1, 1, 1}, 2, 2).SetRequiresGrad(true)
	unused := torch.FromSlice([]float32{5}).SetRequiresGrad(true)
	p.Mul(p).Sum().MulScalar(r + 1).Add(q.Sum().MulScalar(r)).Backward()
	if err := distributed.SumGradients(g, []*torch.Tensor{p, unused, q}); err != nil {
		return err
	}
	out["grad_p"] = torch.ToSlice[float64](p.Grad().ToDType(torch.Float64))
	out["grad_q"] = torch.ToSlice[float64](q.Grad().ToDType(torch.Float64))
	if unused.Grad() != nil {
		return fmt.Errorf("a parameter without a gradient got one")
	}
	// The differentiable sum: y = Σ_ranks x_r, loss_r = (r+1)·Σ y, so
	// d(Σ_r loss_r)/dx = Σ_r (r+1) = 3 on every rank.
	x := torch.FromSlice([]float64{r, 2 * r}).SetRequiresGrad(true)
	y := g.AllReduceSumGrad(x)
	out["sum_grad_forward"] = torch.ToSlice[float64](y.Detach())
	y.Sum().MulScalar(r + 1).Backward()
	out["sum_grad_backward"] = torch.ToSlice[float64](x.Grad())
	return nil
}

// freePort is a TCP port that was free a moment ago on loopback.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

type rankRun struct {
	res    rankResult
	stderr string
	err    error // the process's exit
}

// runJob runs a case as world ranks of this test binary over loopback.
func runJob(t *testing.T, name string, world int) []rankRun {
	t.Helper()
	port := freePort(t)
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
		"grad_p":            {6, 12, 18},
		"grad_q":            {1, 1, 1, 1},
		"sum_grad_forward":  {1, 2},
		"sum_grad_backward": {3, 3},
	}
	for r, run := range runJob(t, "collectives", 2) {
		if run.err != nil {
			t.Fatalf("rank %d: %v\n%s", r, run.err, run.stderr)
		}
		for k, w := range want {
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
