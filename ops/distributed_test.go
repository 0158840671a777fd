package ops_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/micrograph/micrograph/internal/testenv"
	"github.com/micrograph/micrograph/ops"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/distributed"
)

// rankEnv makes the test binary one rank of a two-process job that runs
// Sinkhorn on its part of a batch (see TestMain).
const rankEnv = "MICROGRAPH_TEST_OPS_RANK"

func TestMain(m *testing.M) {
	if os.Getenv(rankEnv) != "" {
		os.Exit(sinkhornRank())
	}
	os.Exit(m.Run())
}

// The split of sinkhornSplitInput's nodes: rank 0 holds the first 17 (ranks'
// node counts differ, as molecules' do).
const sinkhornNodes, sinkhornMotifs, sinkhornSplit = 40, 5, 17

// sinkhornPart is what a rank reports for one way of running Sinkhorn: the
// motifs of its nodes and its columns of A, K×n_r row-major.
type sinkhornPart struct {
	Motif    []int64
	Balanced []float64
}

// sinkhornWays are the ways a rank runs Sinkhorn over the split batch: the
// kernel and the composed form, with 5 rounds and with none.
var sinkhornWays = []struct {
	name  string
	iters int
	run   func(q *torch.Tensor, lambda float64, iters int, across *torch.ProcessGroup) (motif, balanced *torch.Tensor)
}{
	{"kernel", 5, ops.SinkhornAssign}, {"composed", 5, ops.SinkhornComposed},
	{"kernel, no round", 0, ops.SinkhornAssign}, {"composed, no round", 0, ops.SinkhornComposed},
}

func sinkhornRank() int {
	torch.SetNumThreads(1)
	e, _, err := distributed.FromEnv()
	if err == nil {
		var g *torch.ProcessGroup
		if g, err = distributed.Join(e, torch.CPU, 10*time.Second); err == nil {
			s := torch.NewScope()
			q := torch.FromSlice(sinkhornInput(sinkhornNodes, sinkhornMotifs), sinkhornNodes, sinkhornMotifs)
			lo, n := int64(0), int64(sinkhornSplit)
			if g.Rank() == 1 {
				lo, n = sinkhornSplit, sinkhornNodes-sinkhornSplit
			}
			parts := map[string]sinkhornPart{}
			err = torch.Catch(func() {
				for _, w := range sinkhornWays {
					motif, a := w.run(q.Narrow(0, lo, n), 20, w.iters, g)
					parts[w.name] = sinkhornPart{Motif: ints(motif), Balanced: values(a)}
				}
			})
			s.Close()
			if err == nil {
				err = json.NewEncoder(os.Stdout).Encode(parts)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// Acceptance: with the batch's nodes split across two processes (Gloo on
// loopback), Sinkhorn balancing over the global batch, by the kernel and
// composed, assigns every node the motif one process assigns it, and A
// agrees to float32 rounding; so without a round, where A is only divided
// by its global sum.
func TestSinkhornAcrossTwoProcesses(t *testing.T) {
	if !torch.HasBackend(torch.Gloo) {
		t.Skip("the shim was built without Gloo")
	}
	if !torch.FusedKernelsFor(torch.Zeros([]int64{1}, torch.Options{DType: torch.Float32})) {
		t.Skip("the Sinkhorn kernel needs AVX2 and FMA")
	}
	port := testenv.FreePort(t)
	var cmds []*exec.Cmd
	outs := []*strings.Builder{{}, {}}
	for r := range 2 {
		c := exec.Command(os.Args[0], "-test.run=^$")
		e := distributed.Env{Rank: r, WorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: port}
		c.Env = append(append(os.Environ(), e.Vars()...), rankEnv+"=1")
		c.Stdout, c.Stderr = outs[r], os.Stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	parts := make([]map[string]sinkhornPart, 2)
	for r, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		if err := json.Unmarshal([]byte(outs[r].String()), &parts[r]); err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}

	scope(t)
	const n, k = sinkhornNodes, sinkhornMotifs
	q := torch.FromSlice(sinkhornInput(n, k), n, k)
	for _, w := range sinkhornWays {
		motif, a := ops.SinkhornAssign(q, 20, w.iters, nil)
		wantMotif, wantA := ints(motif), values(a)
		p0, p1 := parts[0][w.name], parts[1][w.name]
		if got := slices.Concat(p0.Motif, p1.Motif); !slices.Equal(got, wantMotif) {
			t.Fatalf("%s: motifs across two processes\n%v\none process\n%v", w.name, got, wantMotif)
		}
		// A's columns (nodes) are split: rank 0 holds columns 0…16 of each row.
		n0 := sinkhornSplit
		for row := range k {
			got := slices.Concat(p0.Balanced[row*n0:(row+1)*n0], p1.Balanced[row*(n-n0):(row+1)*(n-n0)])
			for col, want := range wantA[row*n : (row+1)*n] {
				// Sums over 17 and 23 nodes completed across ranks round
				// differently from one sum over 40, and ΣA cancels instead
				// of dividing: a few float32 ulps per round.
				if math.Abs(got[col]-want) > 1e-5*math.Abs(want) {
					t.Errorf("%s: A[%d][%d] = %.9g across two processes, %.9g in one", w.name, row, col, got[col], want)
				}
			}
		}
	}
}
