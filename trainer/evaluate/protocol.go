package evaluate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/internal/field"
)

// Protocol is an evaluation protocol: how a dataset is split and how the
// reported epoch (fine-tuning) or λ (linear evaluation) is chosen. It is
// ProtocolScaffold or "cvK", K-fold cross-validation (ProtocolCV10 is the
// paper's); every rule that differs between the two is a method here.
type Protocol string

const (
	// ProtocolScaffold is OGB's: the dataset's scaffold split, the epoch or
	// λ chosen on the valid part, the test ROC-AUC reported.
	ProtocolScaffold Protocol = "scaffold"
	// ProtocolCV10 is the paper's: 10-fold cross-validation over the whole
	// dataset, reporting the epoch or λ with the best test ROC-AUC averaged
	// over the folds. Choosing on test is optimistic: the figure is the
	// best of a curve measured on the data it reports, not a held-out one.
	ProtocolCV10 Protocol = "cv10"
)

// ProtocolWant says what a protocol may be, after its name.
var ProtocolWant = fmt.Sprintf("must be %s or %s (cvK: K-fold cross-validation, K ≥ 2)", ProtocolScaffold, ProtocolCV10)

// Validate reports a protocol that is neither ProtocolScaffold nor "cvK"
// with K ≥ 2, as the field "protocol".
func (p Protocol) Validate() error {
	if p == ProtocolScaffold || p.Folds() > 0 {
		return nil
	}
	return field.Errorf("protocol", string(p), "%s", ProtocolWant)
}

// Folds is the number of cross-validation folds: K for "cvK" with K ≥ 2
// written plainly, 0 for ProtocolScaffold and anything else.
func (p Protocol) Folds() int {
	k, ok := strings.CutPrefix(string(p), "cv")
	if n, err := strconv.Atoi(k); ok && err == nil && n >= 2 && strconv.Itoa(n) == k {
		return n
	}
	return 0
}

// CrossValidated says the protocol draws its own folds, has no valid part,
// and chooses the epoch or λ on the test figure averaged over the folds.
func (p Protocol) CrossValidated() bool { return p.Folds() > 0 }

// PairedBy is what pairs a pre-trained run with a random one when a suite
// has one encoder: the seed, and under cross-validation the fold too.
func (p Protocol) PairedBy() string {
	if p.CrossValidated() {
		return "seed×fold"
	}
	return "seed"
}

// splitName is the split a dataset summary names: the dataset's own under
// ProtocolScaffold, else the protocol's.
func (p Protocol) splitName(ds *data.Dataset) string {
	if p.CrossValidated() {
		return string(p)
	}
	return ds.Split.Name
}

// checkDataset is the error of a dataset without a split (featurised with
// none) under the scaffold protocol, which evaluates on the dataset's split;
// cross-validation draws its own folds and needs none.
func (p Protocol) checkDataset(name string, ds *data.Dataset) error {
	if !p.CrossValidated() && ds.Split == nil {
		return field.Errorf("protocol", string(ProtocolScaffold), "needs a split, and dataset %s has none (%w): use %s (cross-validation), or featurize it with a scaffold split", name, data.ErrNoSplit, ProtocolCV10)
	}
	return nil
}

// splits are the splits the protocol runs on: the dataset's own (scaffold)
// split, or the K folds of cross-validation drawn from seed. Each must leave
// molecules to train on and, in its valid (when it has one) and test parts,
// a task with both classes (classification: otherwise ROC-AUC, and with it
// model selection, is undefined) or with a label (regression). name is the
// dataset's in messages.
func (p Protocol) splits(name string, ds *data.Dataset, regression bool, seed uint64) ([]*data.Split, error) {
	var splits []*data.Split
	if p.CrossValidated() {
		var err error
		if splits, err = CrossValidationSplits(ds.NumGraphs(), p.Folds(), seed); err != nil {
			return nil, err
		}
	} else {
		splits = []*data.Split{ds.Split} // present: Common.open checked it (checkDataset)
	}
	for _, s := range splits {
		if len(s.Train) == 0 {
			return nil, fmt.Errorf("%s split of %s: no molecule to train on", s.Name, name)
		}
		parts := []struct {
			name string
			idx  []int32
		}{{"valid", s.Valid}, {"test", s.Test}}
		if p.CrossValidated() {
			parts = parts[1:]
		}
		for _, part := range parts {
			labels := splitLabels(ds, part.idx)
			switch {
			case regression && !slices.ContainsFunc(labels, func(y float32) bool { return y == y }):
				return nil, fmt.Errorf("%s split of %s: the %s part (%d molecules) has no label, so RMSE is undefined",
					s.Name, name, part.name, len(part.idx))
			case !regression && !hasBothClasses(labels, ds.NumTasks()):
				return nil, fmt.Errorf("%s split of %s: the %s part (%d molecules) has no task with both classes, so ROC-AUC is undefined",
					s.Name, name, part.name, len(part.idx))
			}
		}
	}
	return splits, nil
}
