package evaluate

import (
	"github.com/micrograph/micrograph/trainer/metrics"
	"github.com/micrograph/micrograph/trainer/runenv"
)

// An Evaluation measures one encoder on one dataset under one split
// protocol (docs/method.md §7): FinetuneConfig and LinearEvalConfig are the
// two. The suite (package trainer/evaluate/suite) runs its evaluations
// through this interface only.
type Evaluation interface {
	// Settings are the evaluation's shared settings (data, encoder, seeds, …).
	Settings() Common
	// Check reports the first setting that cannot work with c in place of
	// the shared settings, naming its field.
	Check(c Common) error
	// Evaluate runs the evaluation with c in place of the shared settings,
	// where env says.
	Evaluate(c Common, env runenv.Env) (Outcome, error)
}

// Outcome is what a suite keeps of an evaluation: the test ROC-AUC over its
// runs, each run's, and the complete result (one of Finetune and Linear).
type Outcome struct {
	Test     metrics.Stat      `json:"test"`      // test ROC-AUC over runs
	RunTests []metrics.Value   `json:"run_tests"` // each run's test ROC-AUC, in run order (seed by seed, fold by fold)
	Finetune *FinetuneResult   `json:"finetune,omitempty"`
	Linear   *LinearEvalResult `json:"linear,omitempty"`
}

// Settings are c's shared settings.
func (c FinetuneConfig) Settings() Common { return c.Common }

// Check validates c with its shared settings replaced by common.
func (c FinetuneConfig) Check(common Common) error {
	c.Common = common
	return c.Validate()
}

// Evaluate fine-tunes with the shared settings replaced by common.
func (c FinetuneConfig) Evaluate(common Common, env runenv.Env) (Outcome, error) {
	c.Common = common
	r, err := Finetune(c, env)
	if err != nil {
		return Outcome{}, err
	}
	out := Outcome{Test: r.Test, Finetune: r}
	for _, run := range r.Runs {
		out.RunTests = append(out.RunTests, run.TestAtBest)
	}
	return out, nil
}

// Settings are c's shared settings.
func (c LinearEvalConfig) Settings() Common { return c.Common }

// Check validates c with its shared settings replaced by common.
func (c LinearEvalConfig) Check(common Common) error {
	c.Common = common
	return c.Validate()
}

// Evaluate runs the linear evaluation with the shared settings replaced by
// common.
func (c LinearEvalConfig) Evaluate(common Common, env runenv.Env) (Outcome, error) {
	c.Common = common
	r, err := LinearEval(c, env)
	if err != nil {
		return Outcome{}, err
	}
	out := Outcome{Test: r.Test, Linear: r}
	for _, run := range r.Runs {
		_, test := run.figures(r.Metric == MetricRMSE)
		out.RunTests = append(out.RunTests, test)
	}
	return out, nil
}
