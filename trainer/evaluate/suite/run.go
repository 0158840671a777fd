package suite

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/evaluate"
	"github.com/micrograph/micrograph/trainer/runenv"
	"github.com/micrograph/micrograph/trainer/runpool"
)

// ErrRandomRunsStale says that the random runs Config.RandomFrom names
// cannot stand for this suite's, because their data changed or is not
// recorded: the suite must run them itself.
var ErrRandomRunsStale = errors.New("run them again")

// Run runs every evaluation under every protocol on every dataset, for
// each encoder i first with encoder i, then without pre-training: the
// encoders' architecture, randomly initialised (fine-tuned from scratch, or
// frozen for linear evaluation), with the same seeds (see Config).
// Render the outcome with Markdown. Every evaluation is planned (its data
// and encoder opened, its splits checked) before any runs, and the runs of
// all of them go into one pool, where env says (env.Jobs side by side).
// When a run fails, Run returns the entries whose runs had all finished,
// and their gains, together with the error. env.Progress also gets one
// line per evaluation as its last run finishes.
func Run(cfg Config, env runenv.Env, opts Options) (*Result, error) {
	return runenv.Run(env, cfg.Validate, func() (*Result, error) { return runSuite(cfg, env, opts) })
}

// Options are how a suite runs, beyond what it computes.
type Options struct {
	// RunFiles, when not empty, is a folder (made if missing) that keeps
	// every run as it finishes, a file each named by everything the run
	// depends on (runFile), and where each run is looked for before it is
	// made: the same suite started again, or with more seeds, makes only
	// the runs the folder lacks.
	RunFiles string
}

// planned is one entry of a suite and where it stands: its evaluation's
// plan and its runs' results (nil: taken whole from RandomFrom).
type planned struct {
	entry   Entry
	what    string // the entry in messages
	plan    *evaluate.Plan
	results []json.RawMessage
	left    int // runs still missing
}

// runSuite is Run after runenv's prologue.
func runSuite(cfg Config, env runenv.Env, opts Options) (*Result, error) {
	start := time.Now()
	var arch model.EncoderConfig
	for i, path := range cfg.EncoderPaths {
		a, err := encoderArch(path)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			arch = a
		} else if a != arch {
			return nil, field.Errorf("encoder_paths", path, "has architecture %+v, but %s has %+v; the random baseline needs one",
				a, cfg.EncoderPaths[0], arch)
		}
	}
	// Refused now rather than after hours of the other evaluations.
	for _, name := range cfg.Evaluations {
		k, _ := kindOf(name)
		if err := k.of(cfg).Settings().Precision.Check(env.Device); err != nil {
			return nil, err
		}
	}
	keys := map[string]string{} // by benchmark
	for _, path := range cfg.Datasets {
		if _, err := os.Stat(path); err != nil {
			return nil, field.Errorf("datasets", path, "cannot be read: %v", errors.Unwrap(err))
		}
		key, err := data.ContentKey(path)
		if err != nil {
			return nil, err
		}
		benchmark, _ := BenchmarkOf(path) // checked by Validate
		keys[benchmark] = key
	}
	if slices.Contains(cfg.Protocols, evaluate.ProtocolScaffold) {
		for _, path := range cfg.Datasets {
			if data.LacksSplit(path) {
				return nil, field.Errorf("datasets", path, "has no split (%w), which the %s protocol needs: leave %s out of the protocols, or featurize it with a scaffold split",
					data.ErrNoSplit, evaluate.ProtocolScaffold, evaluate.ProtocolScaffold)
			}
		}
	}
	// The columns asked for are checked, and each CSV featurised into the
	// cache, before any evaluation: a misnamed column or a text label is
	// refused now rather than after hours of the other benchmarks.
	for _, name := range cfg.Evaluations {
		k, _ := kindOf(name)
		opt := env.OpenOptions()
		opt.Columns = k.of(cfg).Settings().Columns
		for _, path := range cfg.Datasets {
			if st, err := os.Stat(path); err == nil && st.IsDir() {
				if err := opt.Columns.CheckFolder(path); err != nil {
					return nil, err
				}
			} else if _, err := data.Open(path, opt); err != nil {
				return nil, err
			}
		}
	}
	reused, randomFinetune, err := randomRuns(cfg, arch, keys)
	if err != nil {
		return nil, err
	}
	store, err := newRunStore(opts.RunFiles, cfg.EncoderPaths, keys)
	if err != nil {
		return nil, err
	}

	// Every entry, planned before any run.
	var entries []*planned
	var specs []evaluate.RunSpec
	var owner []int // the entry of each spec
	for _, path := range cfg.Datasets {
		benchmark, _ := BenchmarkOf(path) // checked by Validate
		for _, evaluation := range cfg.Evaluations {
			for _, protocol := range cfg.Protocols {
				for replicate, encoderPath := range cfg.EncoderPaths {
					for _, pretrained := range []bool{true, false} {
						encoder := ""
						if pretrained {
							encoder = encoderPath
						}
						p := &planned{
							entry: Entry{Benchmark: benchmark, Evaluation: evaluation, Protocol: protocol, Pretrained: pretrained, Replicate: replicate},
							what:  fmt.Sprintf("%s, %s %s, %s", benchmark, evaluation, protocol, encoderLabel(pretrained, replicate)),
						}
						if earlier, ok := reused[entryKey(p.entry)]; ok {
							p.entry = earlier
							entries = append(entries, p)
							continue
						}
						k, _ := kindOf(evaluation)
						ev := k.of(cfg)
						c := ev.Settings()
						c.Data, c.EncoderPath, c.Encoder, c.Protocol = path, encoder, arch, protocol
						c.Seed += uint64(replicate * c.Seeds)
						if p.plan, err = ev.Plan(c, env); err != nil {
							return nil, fmt.Errorf("%s: %w", p.what, err)
						}
						p.results, p.left = make([]json.RawMessage, len(p.plan.Runs)), len(p.plan.Runs)
						for range p.plan.Runs {
							owner = append(owner, len(entries))
						}
						specs = append(specs, p.plan.Runs...)
						entries = append(entries, p)
					}
				}
			}
		}
	}

	// finished files run i's result; an entry whose last run it is is
	// summarised.
	first := map[*planned]int{} // the index of each entry's first run
	for i := len(owner) - 1; i >= 0; i-- {
		first[entries[owner[i]]] = i
	}
	finished := func(i int, result json.RawMessage) error {
		p := entries[owner[i]]
		p.results[i-first[p]] = result
		if p.left--; p.left > 0 {
			return nil
		}
		out, err := p.plan.Outcome(p.results)
		if err != nil {
			return fmt.Errorf("%s: %w", p.what, err)
		}
		p.entry.Outcome = out
		if env.Progress != nil {
			fmt.Fprintf(env.Progress, "suite: %s: test ROC-AUC %s\n", p.what, percent(out.Test))
		}
		return nil
	}
	var todo []int // the runs to make
	for i, spec := range specs {
		result, err := store.read(spec, entries[owner[i]].entry)
		if err != nil {
			return nil, err
		}
		if result == nil {
			todo = append(todo, i)
			continue
		}
		if err := finished(i, result); err != nil {
			return nil, err
		}
	}
	if env.Progress != nil {
		for _, p := range entries {
			if p.plan == nil {
				fmt.Fprintf(env.Progress, "suite: %s: test ROC-AUC %s, taken from %s\n", p.what, percent(p.entry.Test), cfg.RandomFrom)
			}
		}
		if store != nil {
			fmt.Fprintf(env.Progress, "suite: %d of %d runs taken from %s, %d to make\n", len(specs)-len(todo), len(specs), store.dir, len(todo))
		}
	}
	missing := make([]evaluate.RunSpec, len(todo))
	for k, i := range todo {
		missing[k] = specs[i]
	}
	runErr := evaluate.RunAll(env, missing, func(k int, result json.RawMessage) error {
		i := todo[k]
		if err := store.write(specs[i], entries[owner[i]].entry, result); err != nil {
			return err
		}
		return finished(i, result)
	})
	var failed *runpool.JobError
	if errors.As(runErr, &failed) {
		runErr = fmt.Errorf("%s: %w", entries[owner[todo[failed.Job]]].what, runErr)
	}

	// A failure must not throw away hours of finished evaluations.
	res := &Result{Config: cfg, DataKeys: keys, RandomFinetune: randomFinetune}
	for _, p := range entries {
		if p.plan == nil || p.left == 0 {
			res.Entries = append(res.Entries, p.entry)
		}
	}
	res.Gains, res.Average = res.ComputeGains()
	res.Seconds = time.Since(start).Seconds()
	return res, runErr
}

// entryKey identifies an evaluation run within a suite.
func entryKey(e Entry) string {
	return fmt.Sprintf("%s\x00%s\x00%s\x00%v\x00%d", e.Benchmark, e.Evaluation, e.Protocol, e.Pretrained, e.Replicate)
}

// encoderArch is the architecture of the exported encoder at path, checked
// against its weights, with dropout 0 (each evaluation sets its own).
func encoderArch(path string) (model.EncoderConfig, error) {
	info, state, err := model.LoadEncoder(path)
	if err != nil {
		return model.EncoderConfig{}, err
	}
	torch.FreeNamed(state) // each evaluation loads the weights itself
	info.Encoder.Dropout = 0
	return info.Encoder, nil
}

// randomRuns reads cfg.RandomFrom's runs without pre-training, by entryKey,
// after checking that they are the runs cfg would make: the same datasets
// (paths) holding the same molecules (keys, each benchmark's
// data.ContentKey now), the same settings of each evaluation but
// fine-tuning's recipe (evaluationKind.shared), and random encoders of the
// same architecture (that of the earlier suite's first encoder). When the
// earlier suite fine-tuned with another recipe, its fine-tuning settings
// come back too.
func randomRuns(cfg Config, arch model.EncoderConfig, keys map[string]string) (map[string]Entry, *evaluate.FinetuneConfig, error) {
	if cfg.RandomFrom == "" {
		return nil, nil, nil
	}
	earlier, err := ReadResult(cfg.RandomFrom)
	if err != nil {
		return nil, nil, err // the file's content, not the flag, is at fault
	}
	differs := func(what string) error {
		return field.Errorf("random_from", cfg.RandomFrom, "was run with other %s; its random encoders are not this suite's", what)
	}
	// The settings of the evaluations this suite runs that the random runs
	// it takes depend on.
	settings := func(c Config) string {
		var all []any
		for _, k := range evaluationKinds {
			if slices.Contains(cfg.Evaluations, k.name) {
				all = append(all, k.shared(c))
			}
		}
		j, _ := json.Marshal(all)
		return string(j)
	}
	switch {
	case !slices.Equal(earlier.Config.Datasets, cfg.Datasets):
		return nil, nil, differs("datasets")
	case settings(earlier.Config) != settings(cfg):
		return nil, nil, differs("evaluation settings (seeds, epochs, L2 grid, …)")
	case len(earlier.Config.EncoderPaths) == 0:
		return nil, nil, differs("encoders (none)")
	}
	theirs, err := encoderArch(earlier.Config.EncoderPaths[0])
	if err != nil {
		return nil, nil, field.Errorf("random_from", cfg.RandomFrom, "names the encoder %s, whose architecture cannot be read: %v", earlier.Config.EncoderPaths[0], err)
	}
	if theirs != arch {
		return nil, nil, differs("an encoder architecture")
	}
	for _, path := range cfg.Datasets {
		benchmark, _ := BenchmarkOf(path)
		switch earlier.DataKeys[benchmark] {
		case keys[benchmark]:
		case "":
			return nil, nil, field.Errorf("random_from", cfg.RandomFrom, "does not record what %s held when it ran (it is older than that record), so its random runs cannot be checked against the data now: %w", path, ErrRandomRunsStale)
		default:
			return nil, nil, field.Errorf("random_from", cfg.RandomFrom, "ran its random encoders on other molecules than %s holds now (content %.20s…, then %.20s…): %w",
				path, keys[benchmark], earlier.DataKeys[benchmark], ErrRandomRunsStale)
		}
	}
	out := map[string]Entry{}
	for _, e := range earlier.Entries {
		if !e.Pretrained {
			out[entryKey(e)] = e
		}
	}
	// How the runs taken were fine-tuned: as the earlier suite's own, or
	// as those it took from yet another.
	recipe := earlier.RandomFinetune
	if recipe == nil {
		recipe = &earlier.Config.Finetune
	}
	if differ, _ := settingsDifference(*recipe, cfg.Finetune); !slices.Contains(cfg.Evaluations, EvaluationFinetune) || len(differ) == 0 {
		recipe = nil
	}
	return out, recipe, nil
}

func encoderLabel(pretrained bool, replicate int) string {
	if pretrained {
		return fmt.Sprintf("pre-trained encoder %d", replicate+1)
	}
	return fmt.Sprintf("without pre-training (replicate %d)", replicate+1)
}
