// Package atomicfile writes files and folders so that readers see either the
// old content or the complete new content, never a partial write: data goes to
// a temporary name in the same folder, is synced, and is renamed into place.
//
// The temporary name is .NAME.tmp-PID-RANDOM, PID the writing process's. A
// process killed by SIGKILL (or a power cut) leaves its temporary behind;
// the next write of NAME removes every such temporary whose process is gone,
// so that none accumulates. (This assumes the writers of a folder share one
// machine's process ids, as they share a local disk; a temporary from
// before the PID was in the name is left alone.)
package atomicfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/micrograph/micrograph/internal/failpoint"
	"github.com/micrograph/micrograph/internal/inputfile"
)

// Write creates or replaces path with what fill writes. If fill fails, path is
// left untouched and the temporary file is removed.
// Its errors name path, never the temporary file; a path that exists as a
// folder, device, FIFO or anything but a regular file is refused (renaming
// over /dev/null would replace the device). The temporary file is removed
// on SIGINT or SIGTERM once RemoveTempsOnInterrupt is in force.
func Write(path string, perm os.FileMode, fill func(w io.Writer) error) (err error) {
	if err := checkTarget(path); err != nil {
		return err
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, tempPattern(path))
	if err != nil {
		return writeError(path, err)
	}
	tmp := f.Name()
	forget := track(tmp)
	defer forget()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err = fill(f); err != nil {
		return err
	}
	if err = f.Chmod(perm); err != nil {
		return writeError(path, err)
	}
	if err = f.Sync(); err != nil {
		return writeError(path, err)
	}
	if err = f.Close(); err != nil {
		return writeError(path, err)
	}
	failpoint.Crash("before rename " + filepath.Base(path))
	if err = renameTemp(tmp, path); err != nil {
		return writeError(path, err)
	}
	return SyncDir(dir)
}

// tempPattern is the os.CreateTemp pattern of path's temporary names in
// this process, after removing the temporaries of path's writers that are
// gone.
func tempPattern(path string) string {
	prefix := "." + filepath.Base(path) + ".tmp-"
	removeStaleTemps(filepath.Dir(path), prefix)
	return prefix + strconv.Itoa(os.Getpid()) + "-*"
}

// removeStaleTemps removes the entries of dir named prefix + PID + "-…"
// whose process PID no longer exists. Failures change nothing: the write
// goes on.
func removeStaleTemps(dir, prefix string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		digits, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(digits)
		if !ok || err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

// checkTarget refuses a path that exists, or links to something that
// exists, as anything but a regular file.
func checkTarget(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return nil // absent (a dangling link too), or reported by the write itself
	}
	switch {
	case st.IsDir():
		return fmt.Errorf("write %s: it is a folder", path)
	case !st.Mode().IsRegular():
		return fmt.Errorf("write %s: it is not a regular file (%s)", path, inputfile.Kind(st.Mode()))
	}
	return nil
}

// writeError is a failure to write path, named by path alone.
func writeError(path string, err error) error {
	return fmt.Errorf("write %s: %w", path, cause(err))
}

// cause is the system's reason inside a path error, without the path (of
// a temporary file the user never asked for).
func cause(err error) error {
	var pe *os.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		return pe.Err
	case errors.As(err, &le):
		return le.Err
	}
	return err
}

// WriteFile is Write for content already in memory.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteJSON writes v as indented JSON and a newline to path, atomically:
// a command's result file.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return WriteFile(path, append(b, '\n'), 0o644)
}

// WriteDir creates the folder path, which must not exist yet, with what fill
// puts into the temporary folder it is given. The folder appears only once
// fill has succeeded and every file in it is synced.
func WriteDir(path string, fill func(tmp string) error) (err error) {
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("%s already exists", path)
	}
	parent := filepath.Dir(path)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, tempPattern(path))
	if err != nil {
		return writeError(path, err)
	}
	forget := track(tmp)
	defer forget()
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	if err = fill(tmp); err != nil {
		return err
	}
	if err = syncTree(tmp); err != nil {
		return err
	}
	if err = os.Chmod(tmp, 0o755); err != nil {
		return writeError(path, err)
	}
	if err = renameTemp(tmp, path); err != nil {
		return writeError(path, err)
	}
	return SyncDir(parent)
}

// SyncDir makes a rename or removal inside dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func syncTree(root string) error {
	return filepath.WalkDir(root, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		return f.Sync()
	})
}
