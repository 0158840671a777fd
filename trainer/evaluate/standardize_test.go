package evaluate_test

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/evaluate"
	"github.com/micrograph/micrograph/trainer/infer"
)

// Fine-tuning a regression task trains on labels standardised with the
// train part's mean and population std only, which the saved model records
// to map its outputs back (z·Std + Mean): on synthetic molecules with
// random labels, model.json's Mean and Std are the train labels'
// statistics, recomputed here, and not those of every label, which differ.
func TestFinetuneStandardisesOnTrainLabels(t *testing.T) {
	full := synthetic.Table(synthetic.Options{Molecules: 120, Seed: 13})
	one := *full
	one.Tasks, one.Labels = []string{"value"}, nil
	r := rand.New(rand.NewPCG(3, 4))
	for range full.SMILES {
		one.Labels = append(one.Labels, float32(5+3*r.NormFloat64()))
	}
	dir := filepath.Join(t.TempDir(), "regression")
	if _, err := data.Featurize(&one, dir, data.FeaturizeOptions{Split: "scaffold"}); err != nil {
		t.Fatal(err)
	}
	ds, err := data.Open(dir, data.OpenOptions{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	stats := func(idx []int32) (mean, std float64) {
		for _, i := range idx {
			mean += float64(ds.Labels[i])
		}
		mean /= float64(len(idx))
		for _, i := range idx {
			std += (float64(ds.Labels[i]) - mean) * (float64(ds.Labels[i]) - mean)
		}
		return mean, math.Sqrt(std / float64(len(idx)))
	}
	mean, std := stats(ds.Split.Train)
	allMean, allStd := stats(data.AllIndices(ds.NumGraphs()))
	if math.Abs(mean-allMean) < 1e-3 || math.Abs(std-allStd) < 1e-3 {
		t.Fatalf("train (%v ± %v) and all labels (%v ± %v) have the same statistics: the test cannot tell them apart", mean, std, allMean, allStd)
	}

	cfg := smallFinetune(t, dir)
	cfg.Epochs, cfg.Seeds, cfg.Save = 1, 1, filepath.Join(t.TempDir(), "model")
	res, err := evaluate.Finetune(cfg, testEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	saved, clf, err := infer.LoadModel(filepath.Join(cfg.Save, res.Saved.Members[0].Dir), torch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	clf.Free()
	task := saved.Tasks[0]
	if task.Type != data.Regression || math.Abs(task.Mean-mean) > 1e-6 || math.Abs(task.Std-std) > 1e-6 {
		t.Errorf("saved %s task: mean %v, std %v; want the train labels' %v and %v (all labels': %v and %v)",
			task.Type, task.Mean, task.Std, mean, std, allMean, allStd)
	}
}
