package infer

import (
	"encoding/json"
	"path/filepath"

	"github.com/micrograph/micrograph/internal/atomicfile"
	"github.com/micrograph/micrograph/trainer/metrics"
)

// The ensemble folder finetune --save writes: EnsembleFile, and each member
// in a folder of its own beside it, a saved model as SaveModel writes it
// (loadable alone).
const (
	EnsembleFile    = "ensemble.json"
	EnsembleFormat  = "micrograph-ensemble"
	EnsembleVersion = 1
)

// Ensemble is EnsembleFile: the members, best first (by the valid figure
// of Metric: descending ROC-AUC, ascending RMSE), and how they were chosen
// ("every seed", or "the K best by valid").
type Ensemble struct {
	Format    string           `json:"format"`
	Version   int              `json:"version"`
	Members   []EnsembleMember `json:"members"`
	Selection string           `json:"selection"`
	Metric    string           `json:"metric"` // "roc_auc" or "rmse"
}

// EnsembleMember is one member: its folder (relative to the ensemble's),
// the fine-tuning run its weights come from (seed, split, selected epoch)
// and that run's valid and test figures at that epoch.
type EnsembleMember struct {
	Dir   string        `json:"dir"`
	Seed  uint64        `json:"seed"`
	Split string        `json:"split"`
	Epoch int           `json:"epoch"`
	Valid metrics.Value `json:"valid"`
	Test  metrics.Value `json:"test"`
}

// WriteEnsemble writes e as dir's EnsembleFile, atomically.
func WriteEnsemble(dir string, e Ensemble) error {
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, EnsembleFile), append(b, '\n'), 0o644)
}
