package evaluate

// The runs of an evaluation (one seed on one split) as jobs a pool can run
// (trainer/runpool), in this process or side by side in others: what a run
// is (RunSpec), what it gives back (runRecord, JSON), the Worker that runs
// them (runner, the same code in every process), and what an evaluation
// makes of their results (Plan).

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/internal/failpoint"
	"github.com/micrograph/micrograph/internal/inputfile"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/metrics"
	"github.com/micrograph/micrograph/trainer/runenv"
	"github.com/micrograph/micrograph/trainer/runpool"
)

// RunSpec is one run of an evaluation, whole: the evaluation's settings as
// the run uses them (one of Finetune and Linear, its Encoder the
// architecture run), the run's seed, and which of the protocol's splits for
// that seed it runs on (0 on the scaffold split, fold i under
// cross-validation).
type RunSpec struct {
	Finetune *FinetuneConfig   `json:"finetune,omitempty"`
	Linear   *LinearEvalConfig `json:"linear,omitempty"`
	Seed     uint64            `json:"seed"`
	Split    int               `json:"split"`
	// Member, when fine-tuning with Save, is the new folder the run writes
	// its model into (at its selected epoch, as infer.SaveModel does).
	Member string `json:"member,omitempty"`
}

// common is the spec's shared settings.
func (s RunSpec) common() Common {
	if s.Finetune != nil {
		return s.Finetune.Common
	}
	return s.Linear.Common
}

// Identity is s without what names its inputs rather than holds them (the
// data's path, the encoder's) and without the settings a run does not
// depend on (the first seed and the number of seeds, which Seed replaces;
// where models are saved): with the content of its data and its encoder,
// everything a run's result depends on.
func (s RunSpec) Identity() RunSpec {
	blank := func(c *Common) {
		c.Data, c.EncoderPath, c.Seed, c.Seeds = "", "", 0, 0
	}
	if s.Finetune != nil {
		c := *s.Finetune
		blank(&c.Common)
		c.Save, c.SaveTop = "", 0
		s.Finetune = &c
	}
	if s.Linear != nil {
		c := *s.Linear
		blank(&c.Common)
		s.Linear = &c
	}
	s.Member = ""
	return s
}

// runRecord is what one run gives back, as JSON: through a pool from
// another process, and in a suite's run files. It holds what the
// evaluation's summary needs beyond the run's own result: the per-task
// figures of every epoch or λ, from which cross-validation selects.
type runRecord struct {
	Finetune *finetuneRecord `json:"finetune,omitempty"`
	// Linear is one run per label fraction, in the configuration's order.
	Linear       []linearRecord `json:"linear,omitempty"`
	EmbedSeconds float64        `json:"embed_seconds,omitempty"` // computing the embeddings, when this run did
}

type finetuneRecord struct {
	FinetuneRun
	TestPerTaskByEpoch [][]metrics.Value `json:"test_per_task_by_epoch"`
}

type linearRecord struct {
	LinearEvalRun
	TestPerTaskByL2 [][]metrics.Value `json:"test_per_task_by_l2"`
	TestMAEByL2     []metrics.Value   `json:"test_mae_by_l2,omitempty"`
}

// run is the record's fine-tuning run with its hidden figures.
func (r *finetuneRecord) run() FinetuneRun {
	run := r.FinetuneRun
	run.testPerTaskByEpoch = fromValues2(r.TestPerTaskByEpoch)
	return run
}

// run is the record's linear run with its hidden figures.
func (r *linearRecord) run() LinearEvalRun {
	run := r.LinearEvalRun
	run.testPerTaskByL2 = fromValues2(r.TestPerTaskByL2)
	if r.TestMAEByL2 != nil {
		run.testMAEByL2 = make([]float64, len(r.TestMAEByL2))
		for i, v := range r.TestMAEByL2 {
			run.testMAEByL2[i] = float64(v)
		}
	}
	return run
}

// values2 is xs as JSON-safe values (NaN as null).
func values2(xs [][]float64) [][]metrics.Value {
	out := make([][]metrics.Value, len(xs))
	for i, x := range xs {
		out[i] = toValues(x)
	}
	return out
}

// fromValues2 undoes values2.
func fromValues2(vs [][]metrics.Value) [][]float64 {
	out := make([][]float64, len(vs))
	for i, v := range vs {
		out[i] = make([]float64, len(v))
		for j, x := range v {
			out[i][j] = float64(x)
		}
	}
	return out
}

// CheckResult tells whether result, as a run's result kept elsewhere (a
// suite's run file), is what a run of s gives back: a fine-tuning run's
// record for a fine-tuning spec, a linear run's for a linear one; else an
// error saying what it holds instead.
func (s RunSpec) CheckResult(result json.RawMessage) error {
	var rec runRecord
	if err := json.Unmarshal(result, &rec); err != nil {
		return fmt.Errorf("its result is not a run's: %w", err)
	}
	switch {
	case s.Finetune != nil && rec.Finetune == nil:
		return fmt.Errorf("its result, %s, is not a fine-tuning run's", inputfile.Shorten(string(result)))
	case s.Linear != nil && len(rec.Linear) == 0:
		return fmt.Errorf("its result, %s, is not a linear evaluation run's", inputfile.Shorten(string(result)))
	}
	return nil
}

// decodeRecords reads the results of a plan's runs.
func decodeRecords(results []json.RawMessage) ([]runRecord, error) {
	records := make([]runRecord, len(results))
	for i, r := range results {
		if err := json.Unmarshal(r, &records[i]); err != nil {
			return nil, fmt.Errorf("the result of run %d: %w", i, err)
		}
	}
	return records, nil
}

// Runs is the kind of pool job that is one RunSpec: every main function of
// a program whose evaluations run their runs side by side serves it
// (runpool.ServeIfWorker(evaluate.Runs)).
var Runs = runpool.Kind{Name: "evaluate.run", New: func(env runenv.Env) runpool.Worker { return &runner{env: env} }}

// RunAll runs specs where env says (env.Jobs side by side, see
// runpool.Run) and calls done with each one's index and result as it
// finishes; a run's failure is a *runpool.JobError.
func RunAll(env runenv.Env, specs []RunSpec, done func(run int, result json.RawMessage) error) error {
	jobs := make([]json.RawMessage, len(specs))
	for i, s := range specs {
		b, err := json.Marshal(s)
		if err != nil {
			return err
		}
		jobs[i] = b
	}
	return runpool.Run(env, Runs, jobs, done)
}

// runAll is RunAll collecting the results in order.
func runAll(env runenv.Env, specs []RunSpec) ([]json.RawMessage, error) {
	results := make([]json.RawMessage, len(specs))
	err := RunAll(env, specs, func(i int, r json.RawMessage) error {
		results[i] = r
		return nil
	})
	return results, err
}

// runner runs RunSpecs one after another in one process, keeping the last
// dataset and encoder it opened, and the last embeddings it computed, for
// the next run that needs the same.
type runner struct {
	env                       runenv.Env
	sessionKey, embeddingsKey string
	se                        *session
	embeddings                *torch.Tensor
}

// Do runs one RunSpec.
func (r *runner) Do(job json.RawMessage) (json.RawMessage, error) {
	var spec RunSpec
	if err := json.Unmarshal(job, &spec); err != nil {
		return nil, err
	}
	if (spec.Finetune == nil) == (spec.Linear == nil) {
		return nil, errors.New("a run must be of fine-tuning or of linear evaluation")
	}
	se, err := r.session(spec.common())
	if err != nil {
		return nil, err
	}
	c := spec.common()
	splits, err := c.Protocol.splits(filepath.Base(c.Data), se.ds, se.regression, spec.Seed)
	if err != nil {
		return nil, err
	}
	if spec.Split < 0 || spec.Split >= len(splits) {
		return nil, fmt.Errorf("seed %d has %d splits, not a split %d", spec.Seed, len(splits), spec.Split)
	}
	var rec *runRecord
	if spec.Finetune != nil {
		rec, err = r.finetune(*spec.Finetune, spec, se, splits[spec.Split])
	} else {
		rec, err = r.linear(*spec.Linear, spec.Seed, se, splits[spec.Split])
	}
	if err != nil {
		return nil, err
	}
	kind := "finetune"
	if spec.Linear != nil {
		kind = "linear"
	}
	failpoint.Crash(fmt.Sprintf("after %s run on %s, seed %d, split %d", kind, filepath.Base(c.Data), spec.Seed, spec.Split))
	return json.Marshal(rec)
}

// Close frees what the runner kept.
func (r *runner) Close() {
	if r.se != nil {
		r.se.close()
	}
	r.embeddings.Free()
}

// session is c's open data and encoder, the last one's when they are the
// same.
func (r *runner) session(c Common) (*session, error) {
	c.Seed, c.Seeds = 0, 0
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	if key := string(b); key != r.sessionKey || r.se == nil {
		if r.se != nil {
			r.se.close()
			r.se, r.sessionKey = nil, ""
		}
		r.embeddings.Free()
		r.embeddings, r.embeddingsKey = nil, ""
		if r.se, err = c.open(r.env); err != nil {
			return nil, err
		}
		r.sessionKey = key
	}
	return r.se, nil
}

// finetune is one fine-tuning run, and with spec.Member its saved model.
func (r *runner) finetune(cfg FinetuneConfig, spec RunSpec, se *session, split *data.Split) (*runRecord, error) {
	f := &finetuner{cfg: &cfg, name: filepath.Base(cfg.Data), ds: se.ds, regression: se.regression, split: split,
		dev: se.dev, workers: se.workers, progress: se.progress, seed: spec.Seed}
	var run FinetuneRun
	var runErr error
	err := torch.Catch(func() { run, runErr = f.run(se.state) })
	defer torch.FreeNamed(run.snapshot)
	if err != nil || runErr != nil {
		return nil, fmt.Errorf("seed %d, %s split: %w", spec.Seed, split.Name, errors.Join(err, runErr))
	}
	if spec.Member != "" {
		if err := saveMember(spec.Member, &cfg, se, &run); err != nil {
			return nil, err
		}
		failpoint.Crash("after member " + filepath.Base(spec.Member))
	}
	return &runRecord{Finetune: &finetuneRecord{FinetuneRun: run, TestPerTaskByEpoch: values2(run.testPerTaskByEpoch)}}, nil
}

// linear is one linear evaluation run: every label fraction's fit on one
// split.
func (r *runner) linear(cfg LinearEvalConfig, seed uint64, se *session, split *data.Split) (*runRecord, error) {
	rec := &runRecord{}
	// A pre-trained encoder's embeddings are the same for every seed; a
	// random encoder is drawn from the seed.
	key := "pre-trained"
	if se.state == nil {
		key = fmt.Sprint(seed)
	}
	if key != r.embeddingsKey || r.embeddings == nil {
		r.embeddings.Free()
		r.embeddings, r.embeddingsKey = nil, ""
		start := time.Now()
		var embedErr error
		if err := torch.Catch(func() {
			r.embeddings, embedErr = embedMolecules(se.ds, se.arch, se.state, seed, se.dev, cfg.Precision, se.workers)
		}); err != nil || embedErr != nil {
			return nil, fmt.Errorf("encoder %s on %s: %w", encoderName(cfg.EncoderPath), cfg.Data, errors.Join(err, embedErr))
		}
		r.embeddingsKey = key
		rec.EmbedSeconds = time.Since(start).Seconds()
	}
	fit := FitLinear
	if se.regression {
		fit = fitRidgeRun
	}
	fractions := cfg.fractions()
	subsets, err := LabelSubsets(split.Train, splitLabels(se.ds, split.Train), se.ds.NumTasks(), fractions, seed)
	if err != nil {
		return nil, err
	}
	for k, fraction := range fractions {
		labelled := *split
		labelled.Train = subsets[k]
		name := split.Name + " split"
		if len(cfg.LabelFractions) > 0 {
			name += fmt.Sprintf(", %.4g %% of train labels (%d molecules)", 100*fraction, len(labelled.Train))
		}
		var run LinearEvalRun
		var runErr error
		if err := torch.Catch(func() { run, runErr = fit(&cfg, se.ds, &labelled, r.embeddings, seed) }); err != nil || runErr != nil {
			return nil, fmt.Errorf("seed %d, %s: %w", seed, name, errors.Join(err, runErr))
		}
		run.LabelFraction, run.TrainPart = fraction, len(split.Train)
		lr := linearRecord{LinearEvalRun: run, TestPerTaskByL2: values2(run.testPerTaskByL2)}
		if run.testMAEByL2 != nil {
			lr.TestMAEByL2 = toValues(run.testMAEByL2)
		}
		rec.Linear = append(rec.Linear, lr)
	}
	return rec, nil
}

// Plan is an evaluation's runs, to be run in this process or side by side
// in others (RunAll), and what its Outcome makes of their results.
type Plan struct {
	Runs    []RunSpec // seed by seed, split by split within a seed
	outcome func(records []runRecord) (Outcome, error)
}

// Outcome is the evaluation's outcome from its runs' results, in Runs'
// order.
func (p *Plan) Outcome(results []json.RawMessage) (Outcome, error) {
	if len(results) != len(p.Runs) {
		return Outcome{}, fmt.Errorf("%d results of %d runs", len(results), len(p.Runs))
	}
	records, err := decodeRecords(results)
	if err != nil {
		return Outcome{}, err
	}
	return p.outcome(records)
}

// planRuns lists the runs of seeds seeds from first, splits[i] splits for
// seed i, each with spec's settings.
func planRuns(spec RunSpec, first uint64, splits []int) []RunSpec {
	var runs []RunSpec
	for i, n := range splits {
		for split := range n {
			s := spec
			s.Seed, s.Split = first+uint64(i), split
			runs = append(runs, s)
		}
	}
	return runs
}

// checkSplits makes every seed's splits of c, checking each, and returns
// how many each seed has.
func (c Common) checkSplits(se *session) ([]int, error) {
	counts := make([]int, c.Seeds)
	for i := range c.Seeds {
		splits, err := c.Protocol.splits(filepath.Base(c.Data), se.ds, se.regression, c.Seed+uint64(i))
		if err != nil {
			return nil, err
		}
		counts[i] = len(splits)
	}
	return counts, nil
}
