package atomicfile

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// temps are the temporary files and folders of writes under way.
var temps struct {
	sync.Mutex
	paths map[string]bool
}

// track records a temporary path until the returned function is called.
func track(path string) (forget func()) {
	temps.Lock()
	defer temps.Unlock()
	if temps.paths == nil {
		temps.paths = map[string]bool{}
	}
	temps.paths[path] = true
	return func() {
		temps.Lock()
		defer temps.Unlock()
		delete(temps.paths, path)
	}
}

// renameTemp renames the tracked temporary tmp to path, unless an
// interruption removed it; it waits while one is removing temporaries, so
// that nothing is renamed into place after the interruption began.
func renameTemp(tmp, path string) error {
	temps.Lock()
	defer temps.Unlock()
	return os.Rename(tmp, path)
}

// removeTemps removes the temporary files and folders of every write under
// way and returns with the writes stopped: no rename happens until unlock.
func removeTemps() (unlock func()) {
	temps.Lock()
	for p := range temps.paths {
		os.RemoveAll(p)
	}
	return temps.Unlock
}

var interruptOnce sync.Once

// RemoveTempsOnInterrupt makes SIGINT and SIGTERM remove the temporary
// files and folders of the writes under way, then end the process with
// status 128 + the signal's number, as a shell reports a process a signal
// ended. A program that handles those signals itself, to finish its work,
// must not call it.
func RemoveTempsOnInterrupt() {
	interruptOnce.Do(func() {
		signals := make(chan os.Signal, 1)
		signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
		go func() {
			sig := <-signals
			removeTemps()                            // and never let a write finish after it
			os.Exit(128 + int(sig.(syscall.Signal))) // as the shell reports a process the signal ended
		}()
	})
}
