package suite

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/internal/inputfile"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// LockFolder takes the lock of a suite's output folder dir (made if
// missing), so that two suites never write into one folder at once, each
// making every run; unlock releases it, and removes dir again when this
// suite made it and left nothing else in it.
func LockFolder(dir string) (unlock func(), err error) {
	made := false
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, err
		}
		made = true
	}
	lock, err := runfolder.TakeLock(dir)
	if err != nil {
		if made {
			os.Remove(dir)
		}
		return nil, fmt.Errorf("%s: another suite writes into it: %w", dir, err)
	}
	return func() {
		lock.Release()
		if entries, err := os.ReadDir(dir); made && err == nil && len(entries) == 1 && entries[0].Name() == "lock" {
			os.RemoveAll(dir)
		}
	}, nil
}

// CheckSameSuite refuses to run c into the output folder dir when dir's
// suite.json holds a suite of other settings, which this one would replace:
// the first setting that differs is a field error naming it and the file.
// The number of seeds may differ (a suite started again with more seeds
// completes the earlier one), and a folder without suite.json passes.
func CheckSameSuite(dir string, c Config) error {
	file := filepath.Join(dir, "suite.json")
	if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var earlier struct {
		Config json.RawMessage `json:"config"`
	}
	if err := inputfile.ReadJSON(file, &earlier); err != nil {
		return err
	}
	was, err := settingsOf(earlier.Config)
	if err != nil {
		return fmt.Errorf("%s: config: %w", file, err)
	}
	b, _ := json.Marshal(c)
	now, _ := settingsOf(b)
	for _, name := range slices.Sorted(maps.Keys(joinKeys(was, now))) {
		if was[name] != now[name] {
			there := was[name]
			if there == "" {
				there = "not set"
			}
			var value any
			json.Unmarshal([]byte(now[name]), &value)
			return field.Errorf(name, value, "differs from the suite in %s (%s there), which this one would replace: choose another folder, or remove that file", file, there)
		}
	}
	return nil
}

// settingsOf is a suite configuration (JSON) as its settings by dotted
// field name, each value as JSON, lists whole, without the seeds.
func settingsOf(config json.RawMessage) (map[string]string, error) {
	var tree map[string]any
	if err := json.Unmarshal(config, &tree); err != nil {
		return nil, err
	}
	out := flatJSON(tree)
	delete(out, "finetune.seeds")
	delete(out, "linear.seeds")
	return out, nil
}

// joinKeys is the set of the keys of a and b.
func joinKeys(a, b map[string]string) map[string]bool {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	return keys
}
