package evaluate

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/infer"
	"github.com/micrograph/micrograph/trainer/metrics"
)

// The ensemble a fine-tuning saves (FinetuneConfig.Save): each run's model
// at its selected epoch, a member folder, and the members kept.

// memberDir is the folder of seed's model in a saved ensemble.
func memberDir(seed uint64) string { return fmt.Sprintf("seed-%d", seed) }

// SavedMember is what a saved member's model.json records of the run its
// weights come from ("training"): the run and its figures at the saved
// epoch, the metric's (and on regression tasks the test MAE).
type SavedMember struct {
	Seed    uint64        `json:"seed"`
	Split   string        `json:"split"`
	Epoch   int           `json:"epoch"`
	Metric  string        `json:"metric"`
	Valid   metrics.Value `json:"valid"`
	Test    metrics.Value `json:"test"`
	TestMAE metrics.Value `json:"test_mae,omitempty"`
}

// saveMember writes run's model at its selected epoch, with the description
// predict and PyTorch need, into the new folder dir.
func saveMember(dir string, cfg *FinetuneConfig, se *session, run *FinetuneRun) error {
	if run.snapshot == nil {
		return fmt.Errorf("save %s: seed %d selected no epoch", cfg.Save, run.Seed)
	}
	tasks := make([]infer.Task, len(se.types))
	for j, t := range se.types {
		tasks[j] = infer.Task{Name: se.ds.Tasks[j], Type: t}
		if t == data.Regression {
			tasks[j].Mean, tasks[j].Std = run.std.Mean[j], run.std.Std[j]
		}
	}
	member := SavedMember{Seed: run.Seed, Split: run.Split, Epoch: run.BestEpoch, Metric: MetricROCAUC,
		Valid: run.BestValid, Test: run.TestAtBest, TestMAE: run.TestMAEAtBest}
	if se.regression {
		member.Metric = MetricRMSE
	}
	m, err := infer.NewSavedModel(cfg.Encoder, tasks, summarizeDataset(cfg.Data, se.ds, cfg.Protocol), member)
	if err != nil {
		return err
	}
	return infer.SaveModel(dir, m, run.snapshot)
}

// SavedEnsemble is where Config.Save's folder is and what its
// ensemble.json says.
type SavedEnsemble struct {
	Dir string `json:"dir"`
	infer.EnsembleManifest
}

// keepMembers keeps, of the members res's runs wrote into tmp (the save
// folder being made), every seed's, or with Config.SaveTop that many with
// the best valid figures; writes their ensemble.json, best first; and
// records it in res.Saved.
func keepMembers(res *FinetuneResult, tmp string) error {
	regression := res.Metric == MetricRMSE
	order := make([]int, len(res.Runs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		return better(regression, float64(res.Runs[order[a]].BestValid), float64(res.Runs[order[b]].BestValid))
	})
	e := infer.EnsembleManifest{Format: infer.EnsembleFormat, Version: infer.EnsembleVersion, Selection: "every seed", Metric: res.Metric}
	keep := len(order)
	if k := res.Config.SaveTop; k > 0 {
		keep, e.Selection = min(k, keep), fmt.Sprintf("the %d best by valid", k)
	}
	for n, i := range order {
		r := res.Runs[i]
		if n >= keep {
			if err := os.RemoveAll(filepath.Join(tmp, memberDir(r.Seed))); err != nil {
				return err
			}
			continue
		}
		e.Members = append(e.Members, infer.EnsembleMember{Dir: memberDir(r.Seed), Seed: r.Seed, Split: r.Split, Epoch: r.BestEpoch,
			Valid: r.BestValid, Test: r.TestAtBest})
	}
	if err := infer.WriteEnsemble(tmp, e); err != nil {
		return err
	}
	res.Saved = &SavedEnsemble{Dir: res.Config.Save, EnsembleManifest: e}
	return nil
}

// snapshot is a CPU copy of every tensor of the classifier, with its name.
func snapshot(clf *model.Classifier) []torch.Named {
	s := torch.NewScope() // the intermediate tensors
	defer s.Close()
	state := clf.Store.State()
	out := make([]torch.Named, len(state))
	for i, n := range state {
		out[i] = torch.Named{Name: n.Name, Tensor: n.Tensor.Detach().To(torch.CPU, false).Clone().Unscope()}
	}
	return out
}
