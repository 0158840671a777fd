package infer

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/internal/atomicfile"
	"github.com/micrograph/micrograph/internal/inputfile"
	"github.com/micrograph/micrograph/internal/samefile"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/metrics"
)

// An ensemble folder, as finetune --save writes it, holds several saved
// models (each a complete folder as SaveModel writes it, loadable alone) and
// EnsembleFile, which lists them.
const (
	EnsembleFile    = "ensemble.json"
	EnsembleFormat  = "micrograph-ensemble"
	EnsembleVersion = 1
)

// The metrics models are selected on, as ensemble.json and evaluate's
// results name them (evaluate, above this package, takes these).
const (
	MetricROCAUC = "roc_auc" // classification tasks: higher is better
	MetricRMSE   = "rmse"    // regression tasks, in the labels' units: lower is better
)

// EnsembleMember is one member of an ensemble folder: its saved-model
// folder and where it came from.
type EnsembleMember struct {
	Dir   string        `json:"dir"` // relative to the ensemble folder, inside it
	Seed  uint64        `json:"seed"`
	Split string        `json:"split"`
	Epoch int           `json:"epoch"`
	Valid metrics.Value `json:"valid"` // the member's figures at Epoch, in Metric
	Test  metrics.Value `json:"test"`
}

// EnsembleManifest is ensemble.json.
type EnsembleManifest struct {
	Format    string           `json:"format"`    // EnsembleFormat
	Version   int              `json:"version"`   // EnsembleVersion
	Members   []EnsembleMember `json:"members"`   // best first, by Valid
	Selection string           `json:"selection"` // how the members were chosen: "every seed", "the K best by valid"
	Metric    string           `json:"metric"`    // MetricROCAUC or MetricRMSE
}

// WriteEnsemble writes m as dir's EnsembleFile, atomically.
func WriteEnsemble(dir string, m EnsembleManifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, EnsembleFile), append(b, '\n'), 0o644)
}

// Ensemble is the models of a folder loaded for prediction: the members an
// ensemble folder lists, or the one model of a saved-model folder. Members
// agree on the architecture and on their tasks' names and types; each keeps
// its own label standardisation.
type Ensemble struct {
	Dir      string
	Manifest *EnsembleManifest // nil for a saved-model folder
	Members  []*SavedModel     // in the manifest's order
	models   []*model.Classifier
}

// LoadEnsemble loads the models of dir on dev: the members listed in
// dir/ensemble.json, each from its folder, or, without that file, the saved
// model in dir as an ensemble of one. A manifest of another format, a
// member folder outside dir or listed twice, and members that disagree on
// the architecture, the feature sizes or the tasks (names, order, types)
// are errors naming the file or the member. The caller frees it.
func LoadEnsemble(dir string, dev torch.Device) (_ *Ensemble, err error) {
	infoPath := filepath.Join(dir, EnsembleFile)
	if _, statErr := os.Stat(infoPath); errors.Is(statErr, os.ErrNotExist) {
		if _, err := os.Stat(filepath.Join(dir, ModelInfo)); errors.Is(err, os.ErrNotExist) {
			if st, err := os.Stat(dir); err == nil && st.IsDir() {
				return nil, fmt.Errorf("%s holds neither %s (an ensemble) nor %s (one saved model): want the folder of a saved fine-tuning (its ensemble) or of one of its members", dir, EnsembleFile, ModelInfo)
			}
		}
		m, clf, err := LoadModel(dir, dev)
		if err != nil {
			return nil, err
		}
		return &Ensemble{Dir: dir, Members: []*SavedModel{m}, models: []*model.Classifier{clf}}, nil
	}
	var man EnsembleManifest
	if err := inputfile.ReadJSON(infoPath, &man); err != nil {
		return nil, fmt.Errorf("ensemble %s: %w", dir, err)
	}
	if err := man.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", infoPath, err)
	}
	if err := man.confined(dir); err != nil {
		return nil, fmt.Errorf("ensemble %s: %w", dir, err)
	}
	e := &Ensemble{Dir: dir, Manifest: &man}
	defer func() {
		if err != nil {
			e.Free()
		}
	}()
	for _, mem := range man.Members {
		m, clf, err := LoadModel(filepath.Join(dir, mem.Dir), dev)
		if err != nil {
			return nil, fmt.Errorf("ensemble %s, member %s: %w", dir, mem.Dir, err)
		}
		e.Members, e.models = append(e.Members, m), append(e.models, clf)
		if err := agree(man.Members[0].Dir, e.Members[0], m); err != nil {
			return nil, fmt.Errorf("ensemble %s: member %s %w", dir, mem.Dir, err)
		}
	}
	if want := map[data.TaskType]string{data.Classification: MetricROCAUC, data.Regression: MetricRMSE}[e.Members[0].Tasks[0].Type]; man.Metric != want {
		return nil, fmt.Errorf("%s: metric %s, but the members' tasks are %s, selected on %s", infoPath, inputfile.Quote(man.Metric), e.Members[0].Tasks[0].Type, want)
	}
	return e, nil
}

// check is the manifest's own consistency: its format, at least one member,
// each in its own folder inside the ensemble's, and a metric.
func (m *EnsembleManifest) check() error {
	if m.Format != EnsembleFormat || m.Version != EnsembleVersion {
		return fmt.Errorf("format %s version %d, want %q version %d", inputfile.Quote(m.Format), m.Version, EnsembleFormat, EnsembleVersion)
	}
	if len(m.Members) == 0 {
		return errors.New("the ensemble lists no members")
	}
	var seen []string
	for i, mem := range m.Members {
		dir := filepath.Clean(mem.Dir)
		if mem.Dir == "" || !filepath.IsLocal(dir) || dir == "." {
			return fmt.Errorf("member %d: folder %s is not a folder inside the ensemble's", i+1, inputfile.Quote(mem.Dir))
		}
		if slices.Contains(seen, dir) {
			return fmt.Errorf("member %d: folder %s is listed twice", i+1, inputfile.Quote(mem.Dir))
		}
		seen = append(seen, dir)
	}
	if m.Metric != MetricROCAUC && m.Metric != MetricRMSE {
		return fmt.Errorf("metric %s, want %q or %q", inputfile.Quote(m.Metric), MetricROCAUC, MetricRMSE)
	}
	return nil
}

// confined checks that the members of the ensemble folder dir are its own:
// each member's folder and the files a member is loaded from lie inside
// dir once every symbolic link is followed (a link to a model elsewhere is
// not a member), and no two members are the same folder under two names.
func (m *EnsembleManifest) confined(dir string) error {
	var seen []string
	for _, mem := range m.Members {
		for _, p := range MemberFiles(filepath.Join(dir, mem.Dir)) {
			if _, err := os.Lstat(p); err != nil {
				continue // LoadModel says what is missing
			}
			if !samefile.Inside(p, dir) {
				return fmt.Errorf("member %s: %s resolves to %s, outside the ensemble's folder: an ensemble holds its members (copy the model in, or save a new ensemble)",
					inputfile.Quote(mem.Dir), p, samefile.Resolve(p))
			}
		}
		resolved := samefile.Resolve(filepath.Join(dir, mem.Dir))
		for i, other := range seen {
			if other == resolved {
				return fmt.Errorf("members %s and %s are the same folder, %s", inputfile.Quote(m.Members[i].Dir), inputfile.Quote(mem.Dir), resolved)
			}
		}
		seen = append(seen, resolved)
	}
	return nil
}

// MemberFiles are the paths a saved-model folder dir is loaded from: the
// folder, its description and its weights.
func MemberFiles(dir string) []string {
	return []string{dir, filepath.Join(dir, ModelInfo), filepath.Join(dir, ModelWeights)}
}

// ModelFiles are the paths predict reads of the model folder dir: a saved
// model's MemberFiles, or an ensemble's manifest and every listed member's
// (as far as the manifest can be read: what cannot is refused when loaded),
// for a command that must not write over what it reads.
func ModelFiles(dir string) []string {
	files := MemberFiles(dir)
	infoPath := filepath.Join(dir, EnsembleFile)
	var man EnsembleManifest
	if _, err := os.Stat(infoPath); err != nil || inputfile.ReadJSON(infoPath, &man) != nil {
		return files
	}
	files = append(files, infoPath)
	for _, mem := range man.Members {
		if mem.Dir != "" {
			files = append(files, MemberFiles(filepath.Join(dir, mem.Dir))...)
		}
	}
	return files
}

// agree is nil when m computes what first (named firstName) does, up to
// its weights and label standardisation: the same encoder shape, feature
// sizes and tasks; else what differs, worded to follow m's name.
func agree(firstName string, first, m *SavedModel) error {
	a, b := first.Encoder, m.Encoder
	a.Dropout, b.Dropout = 0, 0 // evaluation mode: dropout does nothing
	switch {
	case a != b:
		return fmt.Errorf("has the architecture %+v, but member %s has %+v", m.Encoder, firstName, first.Encoder)
	case !slices.Equal(first.AtomFeatureDims, m.AtomFeatureDims) || !slices.Equal(first.BondFeatureDims, m.BondFeatureDims):
		return fmt.Errorf("has atom and bond feature sizes %v and %v, but member %s has %v and %v",
			m.AtomFeatureDims, m.BondFeatureDims, firstName, first.AtomFeatureDims, first.BondFeatureDims)
	case !slices.EqualFunc(first.Tasks, m.Tasks, func(x, y Task) bool { return x.Name == y.Name && x.Type == y.Type }):
		return fmt.Errorf("has the tasks %s, but member %s has %s", describeTasks(m.Tasks), firstName, describeTasks(first.Tasks))
	}
	return nil
}

// describeTasks lists tasks as "name (type)" for a message.
func describeTasks(tasks []Task) string {
	parts := make([]string, len(tasks))
	for i, t := range tasks {
		parts[i] = fmt.Sprintf("%s (%s)", inputfile.Quote(t.Name), t.Type)
	}
	return inputfile.Shorten("[" + strings.Join(parts, ", ") + "]")
}

// Tasks are the members' tasks: names and types (the first member's
// standardisation, which each member has its own of).
func (e *Ensemble) Tasks() []Task { return e.Members[0].Tasks }

// Free releases the members' weights.
func (e *Ensemble) Free() {
	for _, m := range e.models {
		m.Free()
	}
	e.models = nil
}

// Suffixes of the columns Predict writes: for a task named T, column T is
// the members' mean and T+StdSuffix their population standard deviation;
// MembersColumn, the last, is the number of members.
const (
	StdSuffix     = "_std"
	MembersColumn = "members"
)

// columns are the names of Predict's value columns: every task's mean,
// every task's standard deviation, the number of members; a name written
// twice (a task called "x_std" beside "x", or "members") is an error.
func (e *Ensemble) columns() ([]string, error) {
	tasks := e.Tasks()
	names := make([]string, 0, 2*len(tasks)+1)
	for _, t := range tasks {
		names = append(names, t.Name)
	}
	for _, t := range tasks {
		names = append(names, t.Name+StdSuffix)
	}
	names = append(names, MembersColumn)
	for i, n := range names {
		if slices.Contains(names[:i], n) || n == "row" || n == "smiles" {
			return nil, fmt.Errorf("model %s: the output would have two columns named %s: rename the task in model.json", e.Dir, inputfile.Quote(n))
		}
	}
	return names, nil
}

// summarise maps the members' raw outputs for one molecule (member-major,
// M×T: logits, or standardised values) to what Predict writes: per task the
// mean over the members of the probability of class 1 (the sigmoid of each
// logit) or of the value in the label's units (each member's own
// standardisation undone), then per task the members' population standard
// deviation of the same, then the member count. Welford's recurrence in
// float64 gives identical members a mean equal to their value and a
// deviation of exactly 0.
func (e *Ensemble) summarise(raw []float32, out []float64) {
	nt := len(e.Tasks())
	for t := range nt {
		var mean, m2 float64
		for k, m := range e.Members {
			task := m.Tasks[t]
			x := float64(raw[k*nt+t])
			if task.Type == data.Regression {
				x = x*task.Std + task.Mean
			} else {
				x = 1 / (1 + math.Exp(-x))
			}
			d := x - mean
			mean += d / float64(k+1)
			m2 += d * (x - mean)
		}
		out[t], out[nt+t] = mean, math.Sqrt(m2/float64(len(e.Members)))
	}
	out[2*nt] = float64(len(e.Members))
}
