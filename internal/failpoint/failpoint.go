// Package failpoint lets crash tests kill the process at a named point, to
// show that no such crash corrupts what is on disk. Points are inert unless
// the environment variable MICROGRAPH_FAILPOINT holds a pattern
// (path.Match syntax) matching the point's name.
package failpoint

import (
	"os"
	"path"
	"syscall"
)

// Env names the environment variable holding the pattern.
const Env = "MICROGRAPH_FAILPOINT"

var pattern = os.Getenv(Env)

// Crash kills the process with SIGKILL, as a power cut or the OOM killer
// would, when name matches the pattern.
func Crash(name string) {
	if pattern == "" {
		return
	}
	if ok, _ := path.Match(pattern, name); ok {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // SIGKILL is not delivered synchronously everywhere
	}
}
