package main

import (
	"errors"
	"os/exec"
	"testing"

	"github.com/micrograph/micrograph/trainer/runpool"
)

// The run pool's variable leaked into a user's environment makes no
// command wait on its standard input (here a pipe held open): the command
// ends at once with status 2 and one line naming the variable.
func TestLeakedPoolVariableIsNamed(t *testing.T) {
	c, out := micrograph("--help")
	c.Env = append(c.Env, runpool.WorkerEnv+"=1")
	stdin, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	err = c.Run()
	var exit *exec.ExitError
	want := `micrograph: MICROGRAPH_POOL_WORKER="1" is set in the environment, but this process was not started by a pool of runs (the variable is the pool's own, for the processes it starts): unset it` + "\n"
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || out.String() != want {
		t.Errorf("%v, output %q; want status 2 and %q", err, out.String(), want)
	}
}
