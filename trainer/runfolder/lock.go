package runfolder

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/micrograph/micrograph/internal/inputfile"
)

// LockPath is RUNDIR/lock, the file whose advisory lock (flock) the process
// working on the run holds, and which names that process.
func LockPath(run string) string { return filepath.Join(run, "lock") }

// Lock is a held lock on a run folder. The kernel releases it when the
// process ends however it ends, so a killed run needs no cleanup.
type Lock struct{ f *os.File }

// TakeLock takes the lock of the existing folder run without waiting; a run
// that another process holds is an error naming that process.
func TakeLock(run string) (*Lock, error) {
	f, err := os.OpenFile(LockPath(run), os.O_RDWR|os.O_CREATE|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return nil, fmt.Errorf("locking run %s: %w", run, err)
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = &inputfile.NotRegularError{Path: LockPath(run), Mode: st.Mode()}
		}
		return nil, fmt.Errorf("locking run %s: %w", run, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := "another process"
		if b, rerr := inputfile.ReadAll(LockPath(run), 64); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
				holder = fmt.Sprintf("process %d", pid)
			}
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("run folder %s is in use by %s (it holds %s); wait for it to end or stop it", run, holder, LockPath(run))
		}
		return nil, fmt.Errorf("locking run %s: %w", run, err)
	}
	// The holder's pid, only for the message of whoever tries next.
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return &Lock{f: f}, nil
}

// Release gives the lock up; the file stays, naming no one who holds it.
func (l *Lock) Release() {
	if l != nil {
		l.f.Close()
	}
}
