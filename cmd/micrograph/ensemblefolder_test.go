package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/trainer/infer"
)

// An ensemble is its folder: a member that is a symbolic link to a model
// elsewhere, or whose weights are, is refused naming the member (status
// 1); two members that are one folder are refused; and no output replaces
// a member's file through a link to it or lands in a member's folder
// (status 2, the link intact).
func TestEnsembleIsItsFolder(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(in, []byte(scoreInput), 0o644); err != nil {
		t.Fatal(err)
	}
	task := []infer.Task{{Name: "p", Type: data.Classification}}
	elsewhere := filepath.Join(dir, "elsewhere")
	saveRandomModel(t, elsewhere, 9, task)
	ensemble := func(name string, members ...string) string {
		ens := filepath.Join(dir, name)
		saveRandomModel(t, filepath.Join(ens, "a"), 1, task)
		var list []infer.EnsembleMember
		for _, m := range members {
			list = append(list, infer.EnsembleMember{Dir: m})
		}
		b, _ := json.Marshal(infer.EnsembleManifest{Format: infer.EnsembleFormat, Version: infer.EnsembleVersion, Metric: infer.MetricROCAUC, Members: list})
		if err := os.WriteFile(filepath.Join(ens, infer.EnsembleFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
		return ens
	}
	linkedMember := ensemble("linked-member", "a", "b")
	if err := os.Symlink(elsewhere, filepath.Join(linkedMember, "b")); err != nil {
		t.Fatal(err)
	}
	linkedWeights := ensemble("linked-weights", "a", "b")
	os.Mkdir(filepath.Join(linkedWeights, "b"), 0o755)
	for _, f := range []string{infer.ModelInfo, infer.ModelWeights} {
		src := filepath.Join(elsewhere, f)
		if f == infer.ModelInfo { // a copy: only the weights are elsewhere
			b, _ := os.ReadFile(src)
			os.WriteFile(filepath.Join(linkedWeights, "b", f), b, 0o644)
			continue
		}
		if err := os.Symlink(src, filepath.Join(linkedWeights, "b", f)); err != nil {
			t.Fatal(err)
		}
	}
	twice := ensemble("twice", "a", "b")
	if err := os.Symlink("a", filepath.Join(twice, "b")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ens, want string
	}{
		{linkedMember, "micrograph predict: ensemble " + linkedMember + `: member "b": ` + filepath.Join(linkedMember, "b") + " resolves to " + elsewhere +
			", outside the ensemble's folder: an ensemble holds its members (copy the model in, or save a new ensemble)\n"},
		{linkedWeights, "micrograph predict: ensemble " + linkedWeights + `: member "b": ` + filepath.Join(linkedWeights, "b", infer.ModelWeights) + " resolves to " +
			filepath.Join(elsewhere, infer.ModelWeights) + ", outside the ensemble's folder: an ensemble holds its members (copy the model in, or save a new ensemble)\n"},
		{twice, "micrograph predict: ensemble " + twice + `: members "a" and "b" are the same folder, ` + filepath.Join(twice, "a") + "\n"},
	} {
		out := filepath.Join(dir, "p.csv")
		code, _, errs := runCLI(t, "predict", "--model", tc.ens, "--data", in, "--out", out)
		if code != 1 || errs != tc.want {
			t.Errorf("%s: status %d, stderr %q; want 1 and %q", tc.ens, code, errs, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s: a refused prediction wrote its output", tc.ens)
			os.Remove(out)
		}
	}

	// --out a link to a member's weights, and --out inside the ensemble.
	good := ensemble("good", "a")
	weights := filepath.Join(good, "a", infer.ModelWeights)
	before, _ := os.ReadFile(weights)
	link := filepath.Join(dir, "l.npy")
	if err := os.Symlink(weights, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ out, want string }{
		{link, "micrograph predict: --out " + link + " is the input --model " + weights + ": writing it would replace what is read; choose another file (see micrograph predict --help)\n"},
		{filepath.Join(good, "a", "p.npy"), "micrograph predict: --out " + filepath.Join(good, "a", "p.npy") + " is inside the input folder --model " + filepath.Join(good, "a") + ", which is only read; choose another place (see micrograph predict --help)\n"},
	} {
		code, _, errs := runCLI(t, "predict", "--model", good, "--data", in, "--out", tc.out)
		if code != 2 || errs != tc.want {
			t.Errorf("--out %s: status %d, stderr %q; want 2 and %q", tc.out, code, errs, tc.want)
		}
	}
	if target, err := os.Readlink(link); err != nil || target != weights {
		t.Errorf("the link --out named is now %q (%v), not a link to %s", target, err, weights)
	}
	if after, _ := os.ReadFile(weights); string(after) != string(before) {
		t.Error("the member's weights changed")
	}

	// A folder that is neither an ensemble nor a saved model says so.
	empty := filepath.Join(dir, "empty")
	os.Mkdir(empty, 0o755)
	code, _, errs := runCLI(t, "predict", "--model", empty, "--data", in, "--out", filepath.Join(dir, "e.npy"))
	want := "micrograph predict: " + empty + " holds neither ensemble.json (an ensemble) nor model.json (one saved model): want the folder of a saved fine-tuning (its ensemble) or of one of its members\n"
	if code != 1 || errs != want {
		t.Errorf("an empty folder: status %d, stderr %q; want 1 and %q", code, errs, want)
	}
}
