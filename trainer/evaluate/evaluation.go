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
	// Plan opens the data and encoder with c in place of the shared
	// settings where env says, checks that every run can be made, and
	// lists the runs, which RunAll runs and Plan.Outcome summarises.
	Plan(c Common, env runenv.Env) (*Plan, error)
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

// Settings are c's shared settings.
func (c LinearEvalConfig) Settings() Common { return c.Common }

// Check validates c with its shared settings replaced by common.
func (c LinearEvalConfig) Check(common Common) error {
	c.Common = common
	return c.Validate()
}
