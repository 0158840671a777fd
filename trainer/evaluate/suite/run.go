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
)

// ErrRandomRunsStale says that the random runs Config.RandomFrom names
// cannot stand for this suite's, because their data changed or is not
// recorded: the suite must run them itself.
var ErrRandomRunsStale = errors.New("run them again")

// Run runs every evaluation under every protocol on every dataset, for
// each encoder i first with encoder i, then without pre-training: the
// encoders' architecture, randomly initialised (fine-tuned from scratch, or
// frozen for linear evaluation), with the same seeds (see Config).
// Render the outcome with Markdown. When an evaluation fails, Suite returns
// the entries finished before it, and their gains, together with the error.
// Every evaluation runs where env says; env.Progress also gets one line per
// evaluation.
func Run(cfg Config, env runenv.Env) (*Result, error) {
	return runenv.Run(env, cfg.Validate, func() (*Result, error) { return runSuite(cfg, env) })
}

// runSuite is Run after runenv's prologue.
func runSuite(cfg Config, env runenv.Env) (*Result, error) {
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
	reused, err := randomRuns(cfg, arch, keys)
	if err != nil {
		return nil, err
	}
	res := &Result{Config: cfg, DataKeys: keys}
	// A later failure must not throw away hours of finished evaluations.
	finish := func(err error) (*Result, error) {
		res.Gains, res.Average = res.ComputeGains()
		res.Seconds = time.Since(start).Seconds()
		return res, err
	}
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
						entry := Entry{Benchmark: benchmark, Evaluation: evaluation, Protocol: protocol, Pretrained: pretrained, Replicate: replicate}
						what := fmt.Sprintf("%s, %s %s, %s", benchmark, evaluation, protocol, encoderLabel(pretrained, replicate))
						if earlier, ok := reused[entryKey(entry)]; ok {
							if env.Progress != nil {
								fmt.Fprintf(env.Progress, "suite: %s: test ROC-AUC %s, taken from %s\n", what, percent(earlier.Test), cfg.RandomFrom)
							}
							res.Entries = append(res.Entries, earlier)
							continue
						}
						k, _ := kindOf(evaluation)
						ev := k.of(cfg)
						c := ev.Settings()
						c.Data, c.EncoderPath, c.Encoder, c.Protocol = path, encoder, arch, protocol
						c.Seed += uint64(replicate * c.Seeds)
						out, err := ev.Evaluate(c, env)
						if err != nil {
							return finish(fmt.Errorf("%s: %w", what, err))
						}
						entry.Outcome = out
						if env.Progress != nil {
							fmt.Fprintf(env.Progress, "suite: %s: test ROC-AUC %s\n", what, percent(entry.Test))
						}
						res.Entries = append(res.Entries, entry)
					}
				}
			}
		}
	}
	return finish(nil)
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
// data.ContentKey now), the same settings of each evaluation, and random
// encoders of the same architecture (that of the earlier suite's first
// encoder).
func randomRuns(cfg Config, arch model.EncoderConfig, keys map[string]string) (map[string]Entry, error) {
	if cfg.RandomFrom == "" {
		return nil, nil
	}
	earlier, err := ReadResult(cfg.RandomFrom)
	if err != nil {
		return nil, err // the file's content, not the flag, is at fault
	}
	differs := func(what string) error {
		return field.Errorf("random_from", cfg.RandomFrom, "was run with other %s; its random encoders are not this suite's", what)
	}
	// The settings of the evaluations this suite runs, whose random runs
	// it takes.
	settings := func(c Config) string {
		var all []any
		for _, k := range evaluationKinds {
			if slices.Contains(cfg.Evaluations, k.name) {
				all = append(all, k.of(c))
			}
		}
		j, _ := json.Marshal(all)
		return string(j)
	}
	switch {
	case !slices.Equal(earlier.Config.Datasets, cfg.Datasets):
		return nil, differs("datasets")
	case settings(earlier.Config) != settings(cfg):
		return nil, differs("evaluation settings (seeds, epochs, L2 grid, …)")
	case len(earlier.Config.EncoderPaths) == 0:
		return nil, differs("encoders (none)")
	}
	theirs, err := encoderArch(earlier.Config.EncoderPaths[0])
	if err != nil {
		return nil, field.Errorf("random_from", cfg.RandomFrom, "names the encoder %s, whose architecture cannot be read: %v", earlier.Config.EncoderPaths[0], err)
	}
	if theirs != arch {
		return nil, differs("an encoder architecture")
	}
	for _, path := range cfg.Datasets {
		benchmark, _ := BenchmarkOf(path)
		switch earlier.DataKeys[benchmark] {
		case keys[benchmark]:
		case "":
			return nil, field.Errorf("random_from", cfg.RandomFrom, "does not record what %s held when it ran (it is older than that record), so its random runs cannot be checked against the data now: %w", path, ErrRandomRunsStale)
		default:
			return nil, field.Errorf("random_from", cfg.RandomFrom, "ran its random encoders on other molecules than %s holds now (content %.20s…, then %.20s…): %w",
				path, keys[benchmark], earlier.DataKeys[benchmark], ErrRandomRunsStale)
		}
	}
	out := map[string]Entry{}
	for _, e := range earlier.Entries {
		if !e.Pretrained {
			out[entryKey(e)] = e
		}
	}
	return out, nil
}

func encoderLabel(pretrained bool, replicate int) string {
	if pretrained {
		return fmt.Sprintf("pre-trained encoder %d", replicate+1)
	}
	return fmt.Sprintf("without pre-training (replicate %d)", replicate+1)
}
