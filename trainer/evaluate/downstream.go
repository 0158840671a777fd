package evaluate

// What fine-tuning (finetune.go) and linear evaluation (linear.go) share: the masked loss, the splits they evaluate
// on, batched passes over a split, and summaries over runs (docs/method.md §7).

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/internal/inputfile"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/evaluate/linfit"
	"github.com/micrograph/micrograph/trainer/metrics"
	"github.com/micrograph/micrograph/trainer/runenv"
)

// evalBatchSize is the number of molecules per forward pass when nothing is
// learned (evaluation, embedding). In evaluation mode batch norm uses its
// running statistics and dropout is off, so the values do not depend on it.
const evalBatchSize = 256

// cvStream separates the stream of the cross-validation permutation from any
// other use of the same seed.
const cvStream = 0x6376 // "cv"

// MaskedBCEWithLogits is binary cross-entropy on logits (B×T) against labels
// (B×T, 0 or 1) averaged over the labelled entries only (mask B×T bool), as
// docs/method.md §7 and OGB's examples compute it. Each entry is
// max(x,0) − x·y + log(1 + e^−|x|), which never overflows. A batch without
// labels has loss 0.
func MaskedBCEWithLogits(logits, labels, mask *torch.Tensor) *torch.Tensor {
	m := mask.ToDType(logits.DType())
	return linfit.BCEWithLogits(logits, labels).Mul(m).Sum().Div(m.Sum().ClampMin(1))
}

// MaskedMSE is the squared error of outputs (B×T) against targets (B×T)
// averaged over the labelled entries only (mask B×T bool): the regression
// loss, on standardised targets. A batch without labels has loss 0.
func MaskedMSE(outputs, targets, mask *torch.Tensor) *torch.Tensor {
	m := mask.ToDType(outputs.DType())
	d := outputs.Sub(targets)
	return d.Mul(d).Mul(m).Sum().Div(m.Sum().ClampMin(1))
}

// CrossValidationSplits is K-fold cross-validation over n molecules (the
// paper's protocol, docs/method.md §7): a permutation drawn from seed cut into K
// folds whose sizes differ by at most one (the first n mod K folds hold one
// more); split i tests on fold i and trains on the others, with no valid
// part (the paper's selection is on the test folds). Every molecule is
// tested exactly once. Each part is sorted. The folds are plain, not
// stratified: most benchmarks have several tasks with missing labels, so
// there is no one class to stratify on, and one rule serves all seven.
func CrossValidationSplits(n, k int, seed uint64) ([]*data.Split, error) {
	if k < 2 || k > n {
		return nil, field.Errorf("protocol", fmt.Sprintf("cv%d", k), "must have between 2 and %d folds, the number of molecules", n)
	}
	perm := rand.New(rand.NewPCG(seed, cvStream)).Perm(n)
	folds := make([][]int32, k)
	start := 0
	for i := range folds {
		size := n / k
		if i < n%k {
			size++
		}
		for _, g := range perm[start : start+size] {
			folds[i] = append(folds[i], int32(g))
		}
		slices.Sort(folds[i])
		start += size
	}
	splits := make([]*data.Split, k)
	for i := range splits {
		s := &data.Split{Name: fmt.Sprintf("cv%d-fold%d", k, i), Test: folds[i]}
		for j, f := range folds {
			if j != i {
				s.Train = append(s.Train, f...)
			}
		}
		slices.Sort(s.Train)
		splits[i] = s
	}
	return splits, nil
}

// selectOnFolds is SelectOnFoldMean for a figure where higher is better
// (ROC-AUC), or, for regression, lower (RMSE): the best candidate and its
// mean over the folds.
func selectOnFolds(curves [][]metrics.Value, regression bool) (int, float64) {
	if !regression {
		return SelectOnFoldMean(curves)
	}
	negated := make([][]metrics.Value, len(curves))
	for f, c := range curves {
		negated[f] = make([]metrics.Value, len(c))
		for i, v := range c {
			negated[f][i] = -v
		}
	}
	best, mean := SelectOnFoldMean(negated)
	return best, -mean
}

// SelectOnFoldMean is the paper protocol's selection: curves[f][i] is fold
// f's test ROC-AUC at candidate i (an epoch, or a λ of the grid); it returns
// the candidate whose mean over the folds is highest (the earliest on ties;
// means with a NaN are never chosen unless all are) and that mean.
func SelectOnFoldMean[V ~float64](curves [][]V) (int, float64) {
	best, bestMean := 0, math.NaN()
	if len(curves) == 0 {
		return best, bestMean
	}
	for i := range curves[0] {
		var sum float64
		for _, c := range curves {
			sum += float64(c[i])
		}
		mean := sum / float64(len(curves))
		if mean > bestMean || (math.IsNaN(bestMean) && !math.IsNaN(mean)) {
			best, bestMean = i, mean
		}
	}
	return best, bestMean
}

// splitLabels is the label matrix (len(idx)×T, NaN where missing) of the
// molecules idx, in that order.
func splitLabels(ds *data.Dataset, idx []int32) []float32 {
	t := ds.NumTasks()
	out := make([]float32, 0, len(idx)*t)
	for _, g := range idx {
		out = append(out, ds.Labels[int(g)*t:int(g+1)*t]...)
	}
	return out
}

// hasBothClasses reports whether some task has a positive and a negative label.
func hasBothClasses(labels []float32, tasks int) bool {
	for t := range tasks {
		var pos, neg bool
		for i := t; i < len(labels); i += tasks {
			switch labels[i] {
			case 1:
				pos = true
			case 0:
				neg = true
			}
		}
		if pos && neg {
			return true
		}
	}
	return false
}

// batchPrepare is the loader's Prepare for dev: pinned staging on a GPU.
func batchPrepare(dev torch.Device) func(*feed.Batch) error {
	if dev.IsCUDA() {
		return feed.PinMemory
	}
	return nil
}

// forEachBatch calls fn on the molecules idx of ds, in order, evalBatchSize
// at a time, each call inside its own scope (passed to fn, to Keep what must
// outlive it) and without autograd.
func forEachBatch(ds *data.Dataset, idx []int32, workers int, dev torch.Device, fn func(b *feed.Batch, s *torch.Scope)) error {
	loader, err := feed.NewLoader(feed.LoaderConfig{
		Dataset: ds, Indices: idx, BatchSize: evalBatchSize, Epochs: 1, Workers: workers, Prepare: batchPrepare(dev),
	})
	if err != nil {
		return err
	}
	defer loader.Close()
	for {
		b, err := loader.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		func() {
			s := torch.NewScope()
			defer s.Close()
			defer loader.Release(b)
			torch.NoGrad(func() { fn(b, s) })
		}()
	}
}

// downstreamEncoder is the architecture a protocol runs and, when path is
// not empty, the pre-trained weights to load into it (CPU tensors the caller
// frees with freeNamed). Without a file the architecture is arch, randomly
// initialised: the "Non-Pretrain" baseline of docs/method.md §7.
func downstreamEncoder(path string, arch model.EncoderConfig) (model.EncoderConfig, []torch.Named, error) {
	if path == "" {
		return arch, nil, arch.Validate()
	}
	info, state, err := model.LoadEncoder(path)
	if err != nil {
		return arch, nil, err
	}
	return info.Encoder, state, nil
}

// DatasetSummary identifies the data a result was computed on.
type DatasetSummary struct {
	Name      string   `json:"name"` // base name of the path: folder or CSV file
	Path      string   `json:"path"`
	Molecules int      `json:"molecules"`
	Tasks     []string `json:"tasks"`
	Split     string   `json:"split"` // "scaffold" or "cvK"
}

func summarizeDataset(path string, ds *data.Dataset, p Protocol) DatasetSummary {
	return DatasetSummary{Name: filepath.Base(path), Path: path, Molecules: ds.NumGraphs(), Tasks: ds.Tasks, Split: p.splitName(ds)}
}

// TaskStat is one task's test ROC-AUC over runs.
type TaskStat struct {
	Task string `json:"task"`
	metrics.Stat
}

// perTaskStats summarises, task by task, the per-task values of every run.
func perTaskStats(tasks []string, runs [][]metrics.Value) []TaskStat {
	out := make([]TaskStat, len(tasks))
	for t, name := range tasks {
		xs := make([]float64, len(runs))
		for r, run := range runs {
			xs[r] = float64(run[t])
		}
		out[t] = TaskStat{Task: name, Stat: metrics.StatOf(xs)}
	}
	return out
}

// toValues converts float64s to JSON-safe Values.
func toValues(xs []float64) []metrics.Value {
	out := make([]metrics.Value, len(xs))
	for i, x := range xs {
		out[i] = metrics.Value(x)
	}
	return out
}

// downstreamSetup is what both protocols do first: the dataset and its task
// types (inferred from the labels unless override names them; see
// data.Dataset.TaskTypes). The tasks must all be classification or all
// regression: one metric selects and reports.
func downstreamSetup(dataPath string, opt data.OpenOptions, override map[string]data.TaskType) (*data.Dataset, []data.TaskType, error) {
	ds, err := data.Open(dataPath, opt)
	if err != nil {
		return nil, nil, err
	}
	if ds.NumTasks() == 0 {
		return nil, nil, fmt.Errorf("dataset %s: no label column to evaluate on", dataPath)
	}
	if !slices.ContainsFunc(ds.Labels, func(y float32) bool { return y == y }) {
		what := "its label column " + inputfile.Quote(ds.Tasks[0]) + " is"
		if ds.NumTasks() > 1 {
			what = fmt.Sprintf("all its %d label columns are", ds.NumTasks())
		}
		return nil, nil, fmt.Errorf("dataset %s has no labels: %s empty in every row", dataPath, what)
	}
	types, err := ds.TaskTypes(override)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", dataPath, err)
	}
	for j, t := range types {
		if t != types[0] {
			return nil, nil, fmt.Errorf("dataset %s mixes task types (%s is %s, %s is %s): evaluate them separately",
				dataPath, ds.Tasks[0], types[0], ds.Tasks[j], t)
		}
	}
	return ds, types, nil
}

// Common are the settings every evaluation shares: which encoder is measured
// on which data, with how many seeds under which split protocol, and where.
type Common struct {
	Data string `json:"data"` // OGB dataset folder or CSV of SMILES and labels
	// Columns say which columns of a CSV Data are the SMILES and the
	// labels; the default rule when zero (and for a dataset folder).
	Columns     data.Columns `json:"columns,omitzero"`
	EncoderPath string       `json:"encoder_path,omitempty"` // exported encoder (.pt); empty: random initialisation
	// Encoder is the architecture used without EncoderPath; with it the
	// file's architecture is used. Results record the one used.
	Encoder model.EncoderConfig `json:"encoder"`

	// Seeds runs per split; run i is seeded with Seed+i, which fixes the
	// model's initialisation and draws its cross-validation folds.
	Seeds    int      `json:"seeds"`
	Seed     uint64   `json:"seed"`
	Protocol Protocol `json:"protocol"` // ProtocolScaffold or ProtocolCV10 (any "cvK")

	// TaskTypes overrides, by task name, the type inferred from the labels
	// (classification when all are 0, 1 or missing, regression otherwise).
	TaskTypes map[string]data.TaskType `json:"task_types,omitempty"`

	// Precision of the encoder's and head's matrix products (docs/method.md
	// §13); a result that names none is FP32.
	Precision model.Precision `json:"precision"`

	// Where and how an evaluation runs (device, threads, workers, the
	// dataset cache, progress) is the runenv.Env it is given, not saved
	// (a result file that holds device, threads or workers still reads).
}

// defaultCommon is docs/method.md §7's protocol: 10 seeds on the scaffold
// split, with §1's encoder architecture for runs without a pre-trained one.
func defaultCommon() Common {
	return Common{Encoder: model.DefaultEncoderConfig(), Seeds: 10, Protocol: ProtocolScaffold, Precision: model.FP32}
}

// Runs is how many runs an evaluation of c makes: Seeds on each of the
// protocol's splits.
func (c Common) Runs() int { return c.Seeds * max(1, c.Protocol.Folds()) }

// validate checks the shared settings, naming their fields.
func (c Common) validate() error {
	switch {
	case c.Data == "":
		return field.Errorf("data", c.Data, "must name a dataset folder or CSV file")
	case c.Seeds < 1:
		return field.Errorf("seeds", c.Seeds, "must be positive")
	}
	if err := c.Columns.Validate(); err != nil {
		return field.Within("columns", err)
	}
	if err := c.Protocol.Validate(); err != nil {
		return err
	}
	return c.Precision.Validate()
}

// session is what an evaluation opens before its runs: the encoder's
// architecture and weights (nil without EncoderPath), the device, the
// collating goroutines, where progress goes, and the dataset.
type session struct {
	arch       model.EncoderConfig
	state      []torch.Named
	dev        torch.Device
	ds         *data.Dataset
	types      []data.TaskType // one per task, all alike
	regression bool            // the tasks are regression tasks: RMSE selects, not ROC-AUC
	workers    int             // goroutines collating batches
	progress   io.Writer       // one line per epoch or run; nil is silent
}

// open loads c's encoder and dataset where env says, after runenv.Run's
// prologue (which validated the configuration).
func (c Common) open(env runenv.Env) (_ *session, err error) {
	if err := c.Precision.Check(env.Device); err != nil {
		return nil, err // before any file is read
	}
	if err := reproducible(env.Device); err != nil {
		return nil, err
	}
	arch, state, err := downstreamEncoder(c.EncoderPath, c.Encoder)
	if err != nil {
		return nil, err
	}
	s := &session{arch: arch, state: state, dev: env.Device, workers: env.Workers, progress: env.Progress}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	opt := env.OpenOptions()
	opt.Columns = c.Columns
	if s.ds, s.types, err = downstreamSetup(c.Data, opt, c.TaskTypes); err != nil {
		return nil, err
	}
	s.regression = s.types[0] == data.Regression
	if err := c.Protocol.checkDataset(filepath.Base(c.Data), s.ds); err != nil {
		return nil, err
	}
	return s, nil
}

// close frees the encoder's weights.
func (s *session) close() { torch.FreeNamed(s.state) }

// reproducible makes an evaluation's runs on dev give the same bits whenever
// they run: alone or side by side, in a suite resumed or not, as an
// ensemble's member or a single model. On the CPU every kernel already does;
// on a GPU, scatter-adds sum in a varying order unless libtorch is limited to
// deterministic algorithms, so it is, for the rest of the process (an
// evaluation's results are compared run against run; pre-training asks for it
// with --deterministic).
func reproducible(dev torch.Device) error {
	if !dev.IsCUDA() {
		return nil
	}
	return torch.SetDeterministic(true)
}
