package runfolder

import (
	"os"
	"path/filepath"
	"testing"
)

// A run folder is told by config.json beside one of the run's other files;
// OwnFile names the places a run writes, and only those.
func TestIsRunAndOwnFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		files []string
		run   bool
	}{
		{nil, false},
		{[]string{"config.json"}, false},
		{[]string{"log.jsonl", "lock"}, false},
		{[]string{"config.json", "lock"}, true},
		{[]string{"config.json", "log.jsonl"}, true},
		{[]string{"config.json", "checkpoints/"}, true},
	} {
		d, err := os.MkdirTemp(dir, "run")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range tc.files {
			p := filepath.Join(d, f)
			if f[len(f)-1] == '/' {
				err = os.Mkdir(p, 0o755)
			} else {
				err = os.WriteFile(p, nil, 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if got := IsRun(d); got != tc.run {
			t.Errorf("IsRun of a folder holding %v = %v, want %v", tc.files, got, tc.run)
		}
	}
	for rel, want := range map[string]string{
		"config.json":                   "the settings (config.json)",
		"./log.jsonl":                   "the loss log (log.jsonl)",
		"lock":                          "the lock (lock)",
		"checkpoints":                   "the checkpoints folder (checkpoints)",
		"checkpoints/step-000000001.pt": "inside the checkpoints folder (step-000000001.pt)",
		"checkpoints/sub/x.csv":         "inside the checkpoints folder (sub/x.csv)",
		".config.json.tmp-12-34":        "a temporary file of the settings (.config.json.tmp-12-34)",
		"encoder.pt":                    "",
		"config.pt":                     "",
		"encoders/config.json":          "",
		"sub/checkpoints/step-1.pt":     "",
		"../config.json":                "",
		".":                             "",
		".config.json":                  "",
		"log.jsonl.bak":                 "",
	} {
		if got := OwnFile(rel); got != want {
			t.Errorf("OwnFile(%q) = %q, want %q", rel, got, want)
		}
	}
}
