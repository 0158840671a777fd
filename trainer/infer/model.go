// Package infer scores molecules with trained models: graph embeddings from
// an encoder, property predictions from a fine-tuned model saved by
// finetune --save, streamed from a CSV file of SMILES (or a dataset folder)
// to a .npy or .csv file in input row order with bounded memory.
package infer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/internal/atomicfile"
	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/internal/inputfile"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
)

// ModelFormat names the saved-model layout; a reader refuses others.
const ModelFormat = "micrograph-model/1"

// Files of a saved-model folder.
const (
	ModelWeights = "model.pt"   // encoder.* and head.* tensors, PyTorch names (torch.save / torch.load)
	ModelInfo    = "model.json" // the SavedModel description
)

// Task is one output of a saved model and how to read it.
type Task struct {
	Name string        `json:"name"`
	Type data.TaskType `json:"type"`
	// Mean and Std map a regression output z back to the label's units,
	// z·Std + Mean (the train labels' statistics); a classification output is
	// a logit, and its probability the logistic sigmoid of it.
	Mean float64 `json:"mean,omitempty"`
	Std  float64 `json:"std,omitempty"`
}

// SavedModel is model.json: what PyTorch, or predict, needs to rebuild the
// model (encoder + head, model.Classifier) and read its outputs, and where
// it came from.
type SavedModel struct {
	Format          string              `json:"format"`
	Architecture    string              `json:"architecture"`
	Encoder         model.EncoderConfig `json:"encoder"`
	Head            string              `json:"head"`
	AtomFeatureDims []int64             `json:"atom_feature_dims"`
	BondFeatureDims []int64             `json:"bond_feature_dims"`
	Tasks           []Task              `json:"tasks"`
	Keys            []string            `json:"keys"` // the tensors of model.pt, in order
	// Provenance: the data, the split and the run the weights are from, and
	// that run's figures at the saved epoch. Free-form beyond the format.
	Dataset  json.RawMessage `json:"dataset,omitempty"`
	Training json.RawMessage `json:"training,omitempty"`
}

// headDescription is the head of model.Classifier in words, for model.json.
const headDescription = "lin2(relu(lin1(mean over the molecule's atoms of the encoder's node embeddings))), lin1 d×d, lin2 d×T"

// NewSavedModel describes a model of architecture arch with tasks; dataset
// and training are provenance (any JSON), kept as given.
func NewSavedModel(arch model.EncoderConfig, tasks []Task, dataset, training any) (*SavedModel, error) {
	m := &SavedModel{
		Format:          ModelFormat,
		Architecture:    "DeeperGCN res+ with GENConv softmax aggregation (docs/method.md §2) and a graph head (§7)",
		Encoder:         arch,
		Head:            headDescription,
		AtomFeatureDims: model.AtomFeatureDims,
		BondFeatureDims: model.BondFeatureDims,
		Tasks:           tasks,
	}
	var err error
	if m.Dataset, err = json.Marshal(dataset); err != nil {
		return nil, err
	}
	if m.Training, err = json.Marshal(training); err != nil {
		return nil, err
	}
	return m, nil
}

// SaveModel writes the new folder dir with model.pt (state, the tensors of a
// model.Classifier with their names) and model.json (m, its Keys filled
// in). The folder appears complete or not at all; it must not exist.
func SaveModel(dir string, m *SavedModel, state []torch.Named) (err error) {
	defer torch.Recover(&err)
	m.Keys = m.Keys[:0]
	for _, n := range state {
		m.Keys = append(m.Keys, n.Name)
	}
	if err := m.check(); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteDir(dir, func(tmp string) error {
		if err := torch.Save(filepath.Join(tmp, ModelWeights), state, nil); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(tmp, ModelInfo), append(b, '\n'), 0o644)
	})
}

// LoadModel reads a folder SaveModel wrote: its description and a classifier
// on dev holding its weights, which the caller frees. Any disagreement
// between the two files (format, tensor names or shapes, task count) is an
// error naming the file.
func LoadModel(dir string, dev torch.Device) (_ *SavedModel, _ *model.Classifier, err error) {
	defer torch.Recover(&err)
	infoPath := filepath.Join(dir, ModelInfo)
	var m SavedModel
	if err := inputfile.ReadJSON(infoPath, &m); err != nil {
		return nil, nil, fmt.Errorf("model %s: %w", dir, err)
	}
	if m.Format != ModelFormat {
		return nil, nil, fmt.Errorf("%s: format %s, want %q", infoPath, inputfile.Quote(m.Format), ModelFormat)
	}
	if err := m.check(); err != nil {
		return nil, nil, field.InFile(infoPath, err)
	}
	weights := filepath.Join(dir, ModelWeights)
	state, _, err := torch.Load(weights, torch.CPU)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		for _, n := range state {
			n.Tensor.Free()
		}
	}()
	if err := model.CheckClassifierSizes(m.Encoder, len(m.Tasks), state); err != nil {
		return nil, nil, fmt.Errorf("%s: %v (the weights: %s)", infoPath, err, weights)
	}
	clf, err := model.NewClassifier(m.Encoder, len(m.Tasks), dev, torch.Float32)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", infoPath, err)
	}
	if err := torch.LoadState(clf.Store.State(), state); err != nil {
		clf.Free()
		return nil, nil, fmt.Errorf("%s does not fit %s: %w", weights, infoPath, err)
	}
	return &m, clf, nil
}

// CheckTaskNames refuses task names a saved model cannot hold: an empty
// one, or one given twice (predict's columns are named by them). A
// fine-tuning that saves its models checks its dataset's before training.
func CheckTaskNames(names []string) error {
	for i, n := range names {
		if strings.TrimSpace(n) == "" || slices.Contains(names[:i], n) {
			return fmt.Errorf("task %d: the name %s is empty or repeated", i+1, inputfile.Quote(n))
		}
	}
	return nil
}

// check is the description's own consistency: an architecture that
// validates, at least one task, named once each, regression scales that
// can be undone.
func (m *SavedModel) check() error {
	if err := m.Encoder.Validate(); err != nil {
		return err
	}
	if len(m.Tasks) == 0 {
		return fmt.Errorf("the model has no tasks")
	}
	names := make([]string, len(m.Tasks))
	for i, t := range m.Tasks {
		names[i] = t.Name
	}
	if err := CheckTaskNames(names); err != nil {
		return err
	}
	for _, t := range m.Tasks {
		if t.Type == data.Regression && !(t.Std > 0) {
			return fmt.Errorf("regression task %q: std %g must be positive", t.Name, t.Std)
		}
	}
	return nil
}
