package model

import (
	"fmt"
	"strings"

	"github.com/micrograph/micrograph/internal/field"
)

// ObjectiveKind is one pre-training objective the program trains, as a
// configuration, the command line, its help and a run's defaults know it:
// its name, what it is, its defaults and its samplers. Objectives lists
// them, and everything that names objectives or samplers reads that list.
type ObjectiveKind struct {
	// Name is the objective as config.json's model names it
	// (ObjectivePaper, ObjectiveReleased).
	Name string
	// About says in a few words what it is, for help texts.
	About string
	// Model is its default model configuration.
	Model func() Config
	// Training is what a run of it defaults to beyond the model.
	Training Training
	// Samplers are the samplers it trains with, its default first.
	Samplers []SamplerKind

	// claims tells whether a configuration trains this objective (its own
	// settings are set); nil for the first of Objectives, which trains
	// every configuration no other claims.
	claims func(Config) bool
	// new makes the objective of c, not yet registered on a model.
	new func(c Config) Objective
}

// Training is what a pre-training run defaults to under an objective,
// beyond its model.
type Training struct {
	BatchSize    int
	WeightDecay  float64 // AdamW's decoupled decay; 0: Adam
	ClipGradNorm float64 // per group of the objective's ClipGroups; 0: none
}

// SamplerKind is a sampler an objective trains with: its name, as
// Config.Sampler holds it, and how it is made from a configuration.
type SamplerKind struct {
	Name string
	new  func(c Config) Sampler
}

// Objectives are the objectives the program trains, the default first. A
// new objective is its file in this package (its Objective and its entry
// here), its settings in Config, and its section in docs/method.md.
var Objectives = []*ObjectiveKind{&paperKind, &releasedKind}

// ObjectiveNamed is the objective called name, or a field error
// ("objective") naming those there are.
func ObjectiveNamed(name string) (*ObjectiveKind, error) {
	for _, k := range Objectives {
		if k.Name == name {
			return k, nil
		}
	}
	names := make([]string, len(Objectives))
	for i, k := range Objectives {
		names[i] = k.Name
	}
	return nil, field.Errorf("objective", name, "must be %s", alternatives(names))
}

// Kind is the objective c trains.
func (c Config) Kind() *ObjectiveKind {
	for _, k := range Objectives[1:] {
		if k.claims(c) {
			return k
		}
	}
	return Objectives[0]
}

// NewObjective makes the objective c trains, not yet registered on a
// model.
func (c Config) NewObjective() Objective { return c.Kind().new(c) }

// Objective names the objective c trains.
func (c Config) Objective() string { return c.Kind().Name }

// SamplerNames are the names of the objective's samplers, its default
// first.
func (k *ObjectiveKind) SamplerNames() []string {
	names := make([]string, len(k.Samplers))
	for i, s := range k.Samplers {
		names[i] = s.Name
	}
	return names
}

// sampler is the objective's sampler called name, made from c, or a field
// error ("sampler") naming those it has.
func (k *ObjectiveKind) sampler(c Config, name string) (Sampler, error) {
	for _, s := range k.Samplers {
		if s.Name == name {
			return s.new(c), nil
		}
	}
	return nil, field.Errorf("sampler", name, "must be %s for the %s objective", alternatives(k.SamplerNames()), k.Name)
}

// alternatives writes names as a choice: "a", "a or b", "a, b or c".
func alternatives(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return fmt.Sprintf("%s or %s", strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
}
