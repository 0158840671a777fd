package nn

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/micrograph/micrograph/internal/testenv"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/distributed"
	"github.com/micrograph/micrograph/torch/testdevice"
)

// rankCaseEnv makes the test binary one rank of a two-process job (see
// TestMain) that runs synchronised batch norm and prints what it computed.
const rankCaseEnv = "MICROGRAPH_TEST_NN_RANK"

func TestMain(m *testing.M) {
	if os.Getenv(rankCaseEnv) != "" {
		os.Exit(batchNormRank())
	}
	os.Exit(m.Run())
}

// The job's data: 3 channels, rank 0's 5 rows then rank 1's 3 (an uneven
// split, as an incomplete last batch gives), the gradient each row's output
// receives, and γ, β.
const acrossChannels = 3

var acrossRows = []int{5, 3}

func acrossX(i, j int) float64    { return math.Sin(1+float64(3*i+j))*float64(j+1) + float64(j) }
func acrossGrad(i, j int) float64 { return math.Cos(0.7*float64(i) - float64(j)) }

var acrossWeight, acrossBias = []float64{1.5, -0.5, 2}, []float64{0.1, 0.2, -0.3}

// acrossResult is what a rank computed with one form of synchronised batch
// norm: its rows' outputs and input gradients, its share of the
// parameters' gradients, and the running statistics.
type acrossResult struct {
	Y, GradX, GradW, GradB, RunningMean, RunningVar []float64
	Batches                                         int64
}

// batchNormRank runs the fused and the composed synchronised batch norm on
// this rank's rows and prints both results as JSON.
func batchNormRank() int {
	torch.SetNumThreads(1)
	e, ok, err := distributed.FromEnv()
	if err != nil || !ok {
		fmt.Fprintln(os.Stderr, "no job in the environment:", err)
		return 2
	}
	g, err := distributed.Join(e, torch.CPU, 20*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer g.Close()
	first := 0
	for r := range e.Rank {
		first += acrossRows[r]
	}
	n := acrossRows[e.Rank]
	var xs, gs []float64
	for i := first; i < first+n; i++ {
		for j := range acrossChannels {
			xs, gs = append(xs, acrossX(i, j)), append(gs, acrossGrad(i, j))
		}
	}
	out := map[string]acrossResult{}
	err = torch.Catch(func() {
		for _, form := range []string{"fused", "composed"} {
			s := NewStore(torch.CPU, torch.Float64)
			b := NewBatchNorm1d(s.Root().Sub("bn"), acrossChannels)
			scope := torch.NewScope()
			torch.NoGrad(func() {
				b.Weight.CopyFrom(torch.FromSlice(acrossWeight), false)
				b.Bias.CopyFrom(torch.FromSlice(acrossBias), false)
			})
			x := torch.FromSlice(xs, int64(n), acrossChannels).SetRequiresGrad(true)
			var y *torch.Tensor
			if form == "fused" {
				if !torch.FusedKernelsFor(x) {
					scope.Close()
					s.Free()
					continue // this CPU runs the composed form only
				}
				y = b.ForwardAcross(x, g)
			} else {
				y = b.forwardAcrossComposed(x, g)
			}
			y.Mul(torch.FromSlice(gs, int64(n), acrossChannels)).Sum().Backward()
			out[form] = acrossResult{
				Y: torch.ToSlice[float64](y.Detach()), GradX: torch.ToSlice[float64](x.Grad()),
				GradW: torch.ToSlice[float64](b.Weight.Grad()), GradB: torch.ToSlice[float64](b.Bias.Grad()),
				RunningMean: torch.ToSlice[float64](b.RunningMean), RunningVar: torch.ToSlice[float64](b.RunningVar),
				Batches: b.NumBatchesTracked.ItemInt(),
			}
			scope.Close()
			s.Free()
		}
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	json.NewEncoder(os.Stdout).Encode(out)
	return 0
}

// acrossReference is synchronised batch norm of the job's rows computed in
// one place from its definition (float64 arithmetic, no tensors): every
// row's output and input gradient, each rank's share of the parameters'
// gradients, and the running statistics after one step from (0, 1) with
// momentum 0.1.
func acrossReference() (y, gradX [][]float64, gradW, gradB [][]float64, runMean, runVar []float64) {
	total := 0
	for _, n := range acrossRows {
		total += n
	}
	N := float64(total)
	mean, variance := make([]float64, acrossChannels), make([]float64, acrossChannels)
	for j := range acrossChannels {
		for i := range total {
			mean[j] += acrossX(i, j) / N
		}
		for i := range total {
			d := acrossX(i, j) - mean[j]
			variance[j] += d * d / N
		}
	}
	y, gradX = make([][]float64, total), make([][]float64, total)
	xhat := func(i, j int) float64 { return (acrossX(i, j) - mean[j]) / math.Sqrt(variance[j]+1e-5) }
	// dL/dx = γ/σ · (g − mean(g) − x̂·mean(g·x̂)), the means over the global batch.
	meanG, meanGX := make([]float64, acrossChannels), make([]float64, acrossChannels)
	for i := range total {
		for j := range acrossChannels {
			meanG[j] += acrossGrad(i, j) / N
			meanGX[j] += acrossGrad(i, j) * xhat(i, j) / N
		}
	}
	gradW, gradB = make([][]float64, len(acrossRows)), make([][]float64, len(acrossRows))
	i := 0
	for r, n := range acrossRows {
		gradW[r], gradB[r] = make([]float64, acrossChannels), make([]float64, acrossChannels)
		for range n {
			y[i], gradX[i] = make([]float64, acrossChannels), make([]float64, acrossChannels)
			for j := range acrossChannels {
				y[i][j] = xhat(i, j)*acrossWeight[j] + acrossBias[j]
				gradX[i][j] = acrossWeight[j] / math.Sqrt(variance[j]+1e-5) * (acrossGrad(i, j) - meanG[j] - xhat(i, j)*meanGX[j])
				gradW[r][j] += acrossGrad(i, j) * xhat(i, j)
				gradB[r][j] += acrossGrad(i, j)
			}
			i++
		}
	}
	runMean, runVar = make([]float64, acrossChannels), make([]float64, acrossChannels)
	for j := range acrossChannels {
		runMean[j] = 0.1 * mean[j]
		runVar[j] = 0.9 + 0.1*variance[j]*N/(N-1)
	}
	return y, gradX, gradW, gradB, runMean, runVar
}

// Synchronised batch norm over two ranks, in the fused kernel (the CPU's
// form) and composed from tensor ops around the differentiable all-reduce
// (the form a GPU under NCCL runs, which no data-parallel test took): each
// rank's outputs and input gradients are those of batch norm over the
// global batch, its gradients of γ and β are its own rows' share (the job
// sums them with the other gradients: a share already summed would count
// twice, a wrong scale that Adam's steps hide), and the running statistics
// move towards the global batch's, its variance unbiased. Against a float64
// computation of the definition, to 1e-12.
func TestBatchNormAcrossTwoRanks(t *testing.T) {
	if dev := testdevice.Get(t); dev.IsCUDA() {
		t.Skipf("the ranks run on the CPU (%s is %s)", testdevice.Env, dev)
	}
	if !torch.HasBackend(torch.Gloo) {
		t.Skip("the shim was built without Gloo")
	}
	port := testenv.FreePort(t)
	cmds := make([]*exec.Cmd, len(acrossRows))
	outs := make([]*strings.Builder, len(acrossRows))
	for r := range acrossRows {
		e := distributed.Env{Rank: r, WorldSize: len(acrossRows), MasterAddr: "127.0.0.1", MasterPort: port}
		c := exec.Command(os.Args[0], "-test.run=^$")
		c.Env = append(append(os.Environ(), e.Vars()...), rankCaseEnv+"=1", "OMP_NUM_THREADS=1")
		outs[r] = &strings.Builder{}
		c.Stdout, c.Stderr = outs[r], os.Stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[r] = c
	}
	results := make([]map[string]acrossResult, len(acrossRows))
	for r, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		if err := json.Unmarshal([]byte(outs[r].String()), &results[r]); err != nil {
			t.Fatalf("rank %d: %v: %q", r, err, outs[r].String())
		}
	}
	y, gradX, gradW, gradB, runMean, runVar := acrossReference()
	near := func(what string, got, want []float64) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%s: %d values, want %d", what, len(got), len(want))
			return
		}
		for k := range want {
			if math.Abs(got[k]-want[k]) > 1e-12*math.Max(1, math.Abs(want[k])) {
				t.Errorf("%s[%d] = %.15g, want %.15g", what, k, got[k], want[k])
			}
		}
	}
	flat := func(rows [][]float64) []float64 {
		var out []float64
		for _, r := range rows {
			out = append(out, r...)
		}
		return out
	}
	forms := []string{"composed"}
	if _, fused := results[0]["fused"]; fused {
		forms = append(forms, "fused")
	}
	for _, form := range forms {
		first := 0
		for r, n := range acrossRows {
			got, ok := results[r][form]
			if !ok {
				t.Fatalf("rank %d ran no %s form", r, form)
			}
			what := fmt.Sprintf("%s, rank %d: ", form, r)
			near(what+"y", got.Y, flat(y[first:first+n]))
			near(what+"dL/dx", got.GradX, flat(gradX[first:first+n]))
			near(what+"dL/dγ", got.GradW, gradW[r])
			near(what+"dL/dβ", got.GradB, gradB[r])
			near(what+"running_mean", got.RunningMean, runMean)
			near(what+"running_var", got.RunningVar, runVar)
			if got.Batches != 1 {
				t.Errorf("%snum_batches_tracked %d, want 1", what, got.Batches)
			}
			first += n
		}
	}
}
