package runfolder

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/micrograph/micrograph/internal/samefile"
)

// ownFiles are the names a run writes at the top of its folder, with what
// each is to the run; the checkpoints folder is its own with all it holds.
var ownFiles = []struct{ name, what string }{
	{"config.json", "the settings"},
	{"log.jsonl", "the loss log"},
	{"lock", "the lock"},
	{"checkpoints", "the checkpoints folder"},
}

// IsRun tells whether dir is a pre-training run's folder, by its own files:
// config.json beside at least one of log.jsonl, checkpoints/ and lock (a
// run makes its lock and config.json before its first step, the others
// with it). A folder that holds a config.json alone is not taken for one.
func IsRun(dir string) bool {
	if st, err := os.Stat(ConfigPath(dir)); err != nil || st.IsDir() {
		return false
	}
	for _, p := range []string{LogPath(dir), CheckpointDir(dir), LockPath(dir)} {
		if _, err := os.Lstat(p); err == nil {
			return true
		}
	}
	return false
}

// OwnFile says what rel, a path relative to a run's folder, is to the run
// when the run writes there: its settings, loss log, lock, checkpoints
// folder or anything inside it, or the temporary file of an atomic write of
// one of them (with the file's name, for a message); "" when the run never
// writes there, so that another command's output may.
func OwnFile(rel string) string {
	rel = filepath.Clean(rel)
	first, rest, nested := strings.Cut(rel, string(filepath.Separator))
	if first == ".." || first == "." || filepath.IsAbs(rel) {
		return ""
	}
	for _, f := range ownFiles {
		switch {
		case nested && first == "checkpoints" && f.name == first:
			return "inside the checkpoints folder (" + rest + ")"
		case nested:
		case first == f.name:
			return f.what + " (" + f.name + ")"
		case strings.HasPrefix(first, "."+f.name+".tmp-"):
			return "a temporary file of " + f.what + " (" + first + ")"
		}
	}
	return ""
}

// Owning is the run folder, if any, one of whose own files or folders
// (OwnFile) path is, with what it is to the run: every folder above path
// that is a run's (IsRun) is asked, symbolic links resolved. ("", "") when
// none.
func Owning(path string) (run, what string) {
	p := samefile.Resolve(path)
	for dir := filepath.Dir(p); ; dir = filepath.Dir(dir) {
		if IsRun(dir) {
			if rel, err := filepath.Rel(dir, p); err == nil {
				if what := OwnFile(rel); what != "" {
					return dir, what
				}
			}
		}
		if dir == filepath.Dir(dir) {
			return "", ""
		}
	}
}
