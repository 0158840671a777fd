package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/model"
)

// The low faults of issue 40, each one line with the status its cause
// deserves: an empty --encoder or --run names nothing (misuse; it was read
// as a file called ".json", status 1); a 100 kB flag value is quoted
// briefly, as a file's content is (it was echoed whole, twice); an
// encoder's .json whose switch contradicts the weights names the file and
// the setting (it said "missing keys"); export --model given a file says
// it takes names only, predict --model given a shipped model says to
// fine-tune it first (they said "not a .pt file" and "open …/model.json");
// --resume --nproc 3 of a run whose batch does not split in three blames
// the flag just given (it blamed config.json with status 1).
func TestMisnamedModelsAndFlags(t *testing.T) {
	dir := t.TempDir()
	run, _ := tinyRun(t, dir)
	csv := writeMolecules(t, dir, 4)
	enc := writeTinyEncoder(t)
	var desc map[string]any
	b, err := os.ReadFile(model.EncoderInfoPath(enc))
	if err == nil {
		err = json.Unmarshal(b, &desc)
	}
	if err != nil {
		t.Fatal(err)
	}
	desc["encoder"].(map[string]any)["learn_t"] = true
	if b, err = json.Marshal(desc); err == nil {
		err = os.WriteFile(model.EncoderInfoPath(enc), b, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "e.npy")
	long := strings.Repeat("a", 100_000)
	checkCLI(t, []cliCase{
		{"empty --encoder", []string{"embed", "--encoder", "", "--data", csv, "--out", out}, 2,
			"--encoder is empty: it names a file, folder or model"},
		{"empty --encoder, a random one's default", []string{"finetune", "--encoder", "", "--data", csv, "--out", filepath.Join(dir, "r.json")}, 2,
			"--encoder is empty: it names a file, folder or model"},
		{"a 100 kB --encoder", []string{"embed", "--encoder", long, "--data", csv, "--out", out}, 2,
			"--encoder " + strings.Repeat("a", 64) + "… (100000 bytes) is not a shipped model (known: " + strings.Join(model.ShippedModels(), ", ") + ") nor a .pt file"},
		{"a switch the weights contradict", []string{"embed", "--encoder", enc, "--data", csv, "--out", out, "--device", "cpu"}, 1,
			model.EncoderInfoPath(enc) + ": learn_t true differs from the weights, which hold no convs.0.t (the weights: " + enc + ")"},
		{"export --model a file", []string{"export", "--model", enc, "--out", filepath.Join(dir, "x.pt")}, 2,
			"--model " + enc + ": export --model takes a shipped model's name (" + strings.Join(model.ShippedModels(), ", ") + "), not a file: a .pt from export is exported already, and a checkpoint goes with --checkpoint"},
		{"predict --model a shipped model", []string{"predict", "--model", defaultModel, "--data", csv, "--out", filepath.Join(dir, "p.csv")}, 2,
			"--model " + defaultModel + " is a shipped pre-trained encoder, which predicts nothing until fine-tuned on labels: micrograph finetune --encoder " + defaultModel + " --data LABELLED.csv --out result.json --save DIR, then predict --model DIR"},
		{"--resume --nproc 3", []string{"pretrain", "--run", run, "--resume", "--nproc", "3", "--epochs", "2"}, 2,
			"--nproc 3: batch_size 8 is not a multiple of the 3 processes (the run's settings, in " + filepath.Join(run, "config.json") + ")"},
	})
	// A long path is cut too, wherever the message names it.
	code, _, errs := runCLI(t, "embed", "--encoder", "x/"+long+".pt", "--data", csv, "--out", out)
	if code == 0 || len(errs) > 1000 || strings.Count(errs, "\n") != 1 {
		t.Errorf("a 100 kB path: status %d, %d bytes on stderr", code, len(errs))
	}
}
