package runfolder

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/internal/atomicfile"
	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/internal/inputfile"
	"github.com/micrograph/micrograph/model"
)

// Config is a pre-training run, saved as RUNDIR/config.json and in
// every checkpoint. Defaults are docs/method.md §1's.
type Config struct {
	Data string `json:"data"` // OGB folder, CSV of SMILES, or corpus folder; Run makes it absolute
	// Columns say which columns of a CSV Data hold the SMILES and the
	// labels (data.Columns; the labels are kept with the featurised
	// molecules, not trained on); the default rule when zero.
	Columns data.Columns `json:"columns,omitzero"`
	// DataKey is Data's content when the run began (data.ContentKey), set
	// by Run: a resume on other data is refused. Empty: none recorded, and
	// none checked.
	DataKey string       `json:"data_key,omitempty"`
	Model   model.Config `json:"model"` //

	BatchSize    int     `json:"batch_size"`
	LR           float64 `json:"lr"`
	ClipGradNorm float64 `json:"clip_grad_norm"` // 0: no clipping; per group of the objective's ClipGroups
	// WeightDecay > 0 makes the optimiser AdamW with this decoupled decay
	// (the released objective's, docs/method.md §12.5); 0 is Adam.
	WeightDecay float64 `json:"weight_decay,omitempty"`
	Epochs      int     `json:"epochs"`
	MaxSteps    int     `json:"max_steps"` // 0: no limit beyond Epochs
	Seed        uint64  `json:"seed"`
	// Precision of the matrix products (docs/method.md §13); a config
	// that names none is FP32.
	Precision model.Precision `json:"precision"`

	// Where and how the run runs (device, threads, workers) is not here but
	// in the runenv.Env it is given; a config.json that holds them still
	// reads, and they are ignored.
	CheckpointEvery int  `json:"checkpoint_every"` // steps
	Keep            int  `json:"keep"`             // checkpoints kept
	LogEvery        int  `json:"log_every"`        // steps per log.jsonl line
	SkipNonFinite   bool `json:"skip_nonfinite"`   // skip batches whose loss is NaN or Inf
	Deterministic   bool `json:"deterministic"`    // deterministic algorithms only (bit-identical GPU runs)
	// SyncBatchNorm normalises with the global batch's statistics when the
	// batch is split across processes (each process's own otherwise); alone
	// it changes nothing.
	SyncBatchNorm bool `json:"sync_batch_norm,omitempty"`
	// GlobalNegatives gives L_contra the subgraphs of the global batch as
	// negatives when the batch is split across processes (each process's
	// own part's otherwise, docs/method.md §3.3); alone it changes nothing.
	GlobalNegatives bool `json:"global_negatives,omitempty"`
}

// DefaultConfig is §1's pre-training on ogbg-molhiv, of the default
// objective (the paper's).
func DefaultConfig() Config { return defaultConfigOf(model.Objectives[0]) }

// DefaultConfigOf is the default run of the objective called objective:
// its model and its training defaults (model.Objectives), the rest
// DefaultConfig's; a field error ("objective") for a name of none.
func DefaultConfigOf(objective string) (Config, error) {
	k, err := model.ObjectiveNamed(objective)
	if err != nil {
		return Config{}, err
	}
	return defaultConfigOf(k), nil
}

func defaultConfigOf(k *model.ObjectiveKind) Config {
	return Config{
		Model:           k.Model(),
		BatchSize:       k.Training.BatchSize,
		LR:              1e-3,
		ClipGradNorm:    k.Training.ClipGradNorm,
		WeightDecay:     k.Training.WeightDecay,
		Epochs:          100,
		Precision:       model.FP32,
		CheckpointEvery: 500,
		Keep:            3,
		LogEvery:        1,
	}
}

// Validate reports the first setting that cannot work, naming its field.
func (c Config) Validate() error {
	if err := c.Model.Validate(); err != nil {
		return field.Within("model", err)
	}
	if err := c.Columns.Validate(); err != nil {
		return field.Within("columns", err)
	}
	if err := field.First(field.Finite("lr", c.LR), field.Finite("clip_grad_norm", c.ClipGradNorm), field.Finite("weight_decay", c.WeightDecay),
		c.Precision.Validate()); err != nil {
		return err
	}
	switch {
	case c.Data == "":
		return field.Errorf("data", c.Data, "must name a dataset folder or CSV file")
	case c.BatchSize < 1:
		return field.Errorf("batch_size", c.BatchSize, "must be positive")
	case !(c.LR > 0):
		return field.Errorf("lr", c.LR, "must be positive")
	case c.WeightDecay < 0:
		return field.Errorf("weight_decay", c.WeightDecay, "must not be negative")
	case c.ClipGradNorm < 0:
		return field.Errorf("clip_grad_norm", c.ClipGradNorm, "must not be negative")
	case c.Epochs < 1:
		return field.Errorf("epochs", c.Epochs, "must be positive")
	case c.MaxSteps < 0:
		return field.Errorf("max_steps", c.MaxSteps, "must not be negative")
	case c.CheckpointEvery < 1:
		return field.Errorf("checkpoint_every", c.CheckpointEvery, "must be positive")
	case c.Keep < 1:
		return field.Errorf("keep", c.Keep, "must be positive")
	case c.LogEvery < 1:
		return field.Errorf("log_every", c.LogEvery, "must be positive")
	}
	return nil
}

// resumable lists the settings a resumed run may change: how long it runs and
// where, not what it learns.
var resumable = map[string]bool{
	"epochs": true, "max_steps": true,
	"checkpoint_every": true, "keep": true, "log_every": true, "skip_nonfinite": true, "deterministic": true,
}

// CheckResume reports the first difference between a run's saved
// configuration and the one asked for on resume that the run cannot take:
// anything but its length and where and how it runs. Model shape changes get
// their own message, since the checkpoint could not even be loaded.
func CheckResume(saved, asked Config) error {
	if d := ShapeOf(saved).differences(ShapeOf(asked), "in the run", "asked"); d != "" {
		return fmt.Errorf("the model's shape differs from the run's: %s", d)
	}
	if k, was, is, ok := firstDifference(saved, asked); ok {
		return fmt.Errorf("%s is %v in the run but %v was asked; only the run's length and where it runs can change on resume", k, was, is)
	}
	return nil
}

// firstDifference is the first setting, by name, that a run cannot change
// on resume and that differs between a and b, with its two values; a
// setting one of them omits (zero, saved with omitempty) shows as zero.
func firstDifference(a, b Config) (key string, va, vb any, ok bool) {
	fa, fb := Flatten(a), Flatten(b)
	for k := range fb {
		if _, in := fa[k]; !in {
			fa[k] = nil
		}
	}
	for _, k := range slices.Sorted(maps.Keys(fa)) {
		if !resumable[k] && !reflect.DeepEqual(fa[k], fb[k]) {
			return k, zeroIfAbsent(fa[k], fb[k]), zeroIfAbsent(fb[k], fa[k]), true
		}
	}
	return "", nil, nil, false
}

// zeroIfAbsent is v, or, when v is absent (nil), the zero value of the
// other side's type: an omitted weight_decay is 0, not "<nil>".
func zeroIfAbsent(v, other any) any {
	if v == nil && other != nil {
		return reflect.Zero(reflect.TypeOf(other)).Interface()
	}
	return v
}

// ModelShape is what a checkpoint's tensors must fit: the settings that
// decide which tensors the model has and their shapes.
type ModelShape struct {
	Hidden       int
	Layers       int
	MLPLayers    int
	LearnT       bool
	BondPerLayer bool
	Motifs       int
	Objective    string // its parameters differ
}

// ShapeOf is the shape of c's model.
func ShapeOf(c Config) ModelShape {
	e := c.Model.Encoder
	return ModelShape{Hidden: e.Hidden, Layers: e.Layers, MLPLayers: e.MLPLayers, LearnT: e.LearnT,
		BondPerLayer: e.BondPerLayer, Motifs: c.Model.Motifs, Objective: c.Model.Objective()}
}

// differences names the settings where o differs from s, each as
// "model.encoder.hidden 300 in the run, 64 asked" (s's value, then o's, each
// with its label); "" when none does.
func (s ModelShape) differences(o ModelShape, mine, theirs string) string {
	var out []string
	for _, f := range []struct {
		name   string
		ours   any
		others any
	}{
		{"model.encoder.hidden", s.Hidden, o.Hidden}, {"model.encoder.layers", s.Layers, o.Layers},
		{"model.encoder.mlp_layers", s.MLPLayers, o.MLPLayers}, {"model.encoder.learn_t", s.LearnT, o.LearnT},
		{"model.encoder.bond_per_layer", s.BondPerLayer, o.BondPerLayer}, {"model.motifs", s.Motifs, o.Motifs},
		{"objective", s.Objective, o.Objective},
	} {
		if f.ours != f.others {
			out = append(out, fmt.Sprintf("%s %v %s, %v %s", f.name, f.ours, mine, f.others, theirs))
		}
	}
	return strings.Join(out, "; ")
}

// Flatten is a config as dotted JSON keys, for naming differences.
func Flatten(c Config) map[string]any {
	var m map[string]any
	b, _ := json.Marshal(c)
	json.Unmarshal(b, &m)
	out := map[string]any{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if sub, ok := v.(map[string]any); ok {
			for k, x := range sub {
				if prefix != "" {
					k = prefix + "." + k
				}
				walk(k, x)
			}
			return
		}
		out[prefix] = v
	}
	walk("", m)
	return out
}

// CheckRunFolder refuses a run folder that cannot be one, naming why: a
// file, a symbolic link to nothing, or, for a new run, a folder that holds
// other things but no run (a dataset folder given by mistake would be
// written into). An empty folder, or one that does not exist yet, is fine.
func CheckRunFolder(run string, resume bool) error {
	if lst, err := os.Lstat(run); err == nil && lst.Mode()&os.ModeSymlink != 0 {
		if _, err := os.Stat(run); err != nil {
			target, _ := os.Readlink(run)
			return field.Errorf("run", run, "is a symbolic link to %s, which does not exist", target)
		}
	}
	st, err := os.Stat(run)
	switch {
	case err != nil:
		return nil // made for a new run; resume says what is missing
	case !st.IsDir():
		return field.Errorf("run", run, "is a file, not a folder")
	case resume:
		return nil
	}
	entries, err := os.ReadDir(run)
	if err != nil {
		return field.Errorf("run", run, "cannot be read: %v", err)
	}
	if _, err := os.Stat(ConfigPath(run)); len(entries) > 0 && errors.Is(err, os.ErrNotExist) {
		return field.Errorf("run", run, "is not empty (%d entries) and holds no run (no config.json): choose a new or empty folder", len(entries))
	}
	return nil
}

// ConfigPath is RUNDIR/config.json.
func ConfigPath(run string) string { return filepath.Join(run, "config.json") }

// WriteConfig saves c as RUNDIR/config.json, atomically.
func WriteConfig(run string, c Config) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(ConfigPath(run), append(b, '\n'), 0o644)
}

// ReadConfig loads RUNDIR/config.json and checks every setting in it. A
// setting that cannot work, and a key that is no setting (one added by
// hand, such as "objective", which the model's settings imply), is an error
// naming the file: what the file says is what the run trains, never
// silently something else.
func ReadConfig(run string) (Config, error) {
	var saved savedConfig
	if err := inputfile.ReadStrictJSON(ConfigPath(run), &saved); err != nil {
		var unknown *inputfile.UnknownKeyError
		if errors.As(err, &unknown) {
			return Config{}, fmt.Errorf("%w: config.json holds the run's settings, and this is none (the objective, for one, follows from the model's \"released\" block)", err)
		}
		return Config{}, err
	}
	c := saved.Config.upgraded()
	if err := c.Validate(); err != nil {
		return Config{}, field.InFile(ConfigPath(run), err)
	}
	return c, nil
}

// savedConfig is a Config as runs of every version saved it: runs made
// before runenv.Env kept where they ran (device, threads, workers) there
// too, which is read and ignored.
type savedConfig struct {
	Config
	Device  json.RawMessage `json:"device,omitempty"`
	Threads json.RawMessage `json:"threads,omitempty"`
	Workers json.RawMessage `json:"workers,omitempty"`
}

// decodeConfig reads a Config saved as JSON (a checkpoint's meta.config)
// as ReadConfig reads config.json.
func decodeConfig(b []byte) (Config, error) {
	var saved savedConfig
	if err := inputfile.UnmarshalStrict(b, &saved); err != nil {
		return Config{}, err
	}
	c := saved.Config.upgraded()
	return c, c.Validate()
}

// upgraded fills in the settings a run saved before they existed with what
// such runs did.
func (c Config) upgraded() Config {
	if c.Precision == "" {
		c.Precision = model.FP32
	}
	return c
}
