package pretrain_test

import (
	"path/filepath"
	"testing"

	"github.com/micrograph/micrograph/data/corpus"
	"github.com/micrograph/micrograph/trainer/pretrain"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// Pre-training on a sharded corpus of the synthetic dataset's SMILES logs
// exactly the losses of pre-training on the dataset folder: the corpus
// numbers the molecules in the same order and its stored filter keeps the
// same ones, so the same seed draws the same batches. Stopped after one
// epoch and resumed, the corpus run continues from the checkpoint's data
// position to the same losses.
func TestPretrainOnCorpusMatchesDataset(t *testing.T) {
	cfg := smallConfig(t)
	dir := t.TempDir()
	ref := filepath.Join(dir, "dataset")
	if _, err := pretrain.Run(ref, cfg, testEnv(t), pretrain.Options{}); err != nil {
		t.Fatal(err)
	}
	want, err := runfolder.ReadLog(ref)
	if err != nil {
		t.Fatal(err)
	}

	corpusDir := filepath.Join(dir, "corpus")
	if _, err := corpus.Featurize(filepath.Join(cfg.Data, "mapping", "mol.csv.gz"), corpusDir, corpus.Options{ShardRows: 64, Workers: 2}); err != nil {
		t.Fatal(err)
	}
	cfg.Data = corpusDir
	run := filepath.Join(dir, "on-corpus")
	if _, err := pretrain.Run(run, cfg, testEnv(t), pretrain.Options{}); err != nil {
		t.Fatal(err)
	}
	got, _ := runfolder.ReadLog(run)
	sameLosses(t, "corpus", got, want)

	resumed := filepath.Join(dir, "resumed")
	cfg.Epochs = 1
	res, err := pretrain.Run(resumed, cfg, testEnv(t), pretrain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Filter.Kept+res.Filter.Removed() != 300 {
		t.Fatalf("the corpus holds %d molecules, want 300", res.Filter.Kept+res.Filter.Removed())
	}
	cfg.Epochs = 2
	if _, err := pretrain.Run(resumed, cfg, testEnv(t), pretrain.Options{Resume: true}); err != nil {
		t.Fatal(err)
	}
	got, _ = runfolder.ReadLog(resumed)
	sameLosses(t, "corpus, resumed after one epoch", got, want)
}
