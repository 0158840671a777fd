package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/internal/testenv"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/distributed"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// `pretrain --nproc 2` runs two ranks of this binary that write one run:
// its log counts the global batch, its checkpoint every rank's generators;
// it refuses a batch the ranks cannot split and a launcher's environment.
func TestPretrainNproc(t *testing.T) {
	if !torch.HasBackend(torch.Gloo) {
		t.Skip("the shim was built without Gloo")
	}
	dir := t.TempDir()
	synth := filepath.Join(dir, "synth")
	if _, err := synthetic.Write(synth, synthetic.Options{Molecules: 40, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	t.Setenv(asMainEnv, "1") // the ranks are this test binary acting as micrograph
	run := filepath.Join(dir, "run")
	args := []string{"pretrain", "--data", synth, "--run", run, "--hidden", "8", "--layers", "1", "--motifs", "4",
		"--batch-size", "8", "--max-steps", "3", "--device", "cpu", "--threads", "1"}
	if code, _, errs := runCLI(t, append(args, "--nproc", "2")...); code != 0 {
		t.Fatalf("pretrain --nproc 2: status %d: %s", code, errs)
	}
	records, err := runfolder.ReadLog(run)
	if err != nil || len(records) != 3 || records[2].Step != 3 {
		t.Fatalf("log %+v, %v", records, err)
	}
	ck, _, err := runfolder.LatestCheckpoint(run)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Free()
	var names []string
	for _, n := range ck.RNG {
		names = append(names, n.Name)
	}
	if ck.Step != 3 || !slices.Contains(names, "rank1/cpu") {
		t.Fatalf("checkpoint at step %d with generators %v", ck.Step, names)
	}

	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--nproc", "3", "--run", filepath.Join(dir, "odd")}, "", "--batch-size 8 is not a multiple of the 3 processes"},
		{[]string{"--nproc", "0", "--run", filepath.Join(dir, "none")}, "", "--nproc 0 must be positive"},
		{[]string{"--nproc", "2", "--run", filepath.Join(dir, "twice")}, "2", "--nproc 2 under a launcher that set WORLD_SIZE=2"},
	} {
		if tc.env != "" {
			t.Setenv("WORLD_SIZE", tc.env)
			t.Setenv("RANK", "0")
			t.Setenv("MASTER_ADDR", "127.0.0.1")
		}
		code, _, errs := runCLI(t, append(args[:len(args):len(args)], tc.args...)...)
		if code != 2 || !strings.Contains(errs, tc.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: status %d, stderr %q; want 2 and %q", tc.args, code, errs, tc.want)
		}
	}
}

// An incomplete torchrun environment is misuse, one line and status 2,
// before any run folder is made (issue #28: WORLD_SIZE without RANK said
// `RANK="": not an integer`; RANK=1 alone ran, and wrote, a whole job).
func TestPretrainRefusesAnIncompleteJobEnvironment(t *testing.T) {
	dir := t.TempDir()
	synth := filepath.Join(dir, "synth")
	if _, err := synthetic.Write(synth, synthetic.Options{Molecules: 40, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"world size alone", map[string]string{"WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1"}, "environment WORLD_SIZE=2 is set but RANK is not: a launcher sets both (unset WORLD_SIZE to run alone)"},
		{"rank alone", map[string]string{"RANK": "1"}, "environment RANK=1 is set but WORLD_SIZE is not: a launcher sets both (unset RANK to run alone)"},
		{"rank outside", map[string]string{"RANK": "3", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1"}, "environment RANK=3: outside 0…1 (WORLD_SIZE=2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"} {
				t.Setenv(k, tc.env[k])
				if _, set := tc.env[k]; !set {
					os.Unsetenv(k)
				}
			}
			run := filepath.Join(dir, "run")
			code, _, errs := runCLI(t, "pretrain", "--data", synth, "--run", run, "--hidden", "8", "--layers", "1", "--motifs", "4", "--batch-size", "8", "--epochs", "1", "--device", "cpu")
			if code != 2 || !strings.Contains(errs, tc.want) || strings.Count(errs, "\n") != 1 {
				t.Errorf("status %d, stderr %q; want 2 and one line with %q", code, errs, tc.want)
			}
			if _, err := os.Stat(run); err == nil {
				t.Errorf("the refused pretrain made %s", run)
				os.RemoveAll(run)
			}
		})
	}
}

// A torchrun-style rank whose rendezvous cannot start fails in one line
// naming the cause, status 1 (a fault of the job's surroundings, found only
// on contact, not a mistake in the command line), after the line saying
// what it waits for, and makes no run folder:
// a MASTER_ADDR that does not resolve, and on rank 0 a MASTER_PORT that
// another process holds (issue #28: libtorch printed 12 and 4 glog lines
// first). The ranks run as processes of their own, so that what libtorch
// writes to file descriptor 2 is seen.
func TestPretrainJobRendezvousFailsInOneLine(t *testing.T) {
	if !torch.HasBackend(torch.Gloo) {
		t.Skip("the shim was built without Gloo")
	}
	dir := t.TempDir()
	synth := filepath.Join(dir, "synth")
	if _, err := synthetic.Write(synth, synthetic.Options{Molecules: 40, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	busy, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port
	for _, tc := range []struct {
		name string
		env  distributed.Env
		want string
	}{
		{"unresolvable master", distributed.Env{Rank: 1, WorldSize: 2, MasterAddr: "no-such-host.invalid", MasterPort: 29500},
			"joining the job (rank 1 of 2): environment MASTER_ADDR=no-such-host.invalid: the name does not resolve ("},
		{"busy port", distributed.Env{Rank: 0, WorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: busyPort},
			fmt.Sprintf("joining the job (rank 0 of 2): environment MASTER_PORT=%d: the port is in use on this host", busyPort)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := filepath.Join(dir, "run")
			c := exec.Command(os.Args[0], "pretrain", "--data", synth, "--run", run, "--hidden", "8", "--layers", "1", "--motifs", "4",
				"--batch-size", "8", "--max-steps", "1", "--device", "cpu", "--threads", "1", "--timeout", "2s")
			c.Env = append(append(os.Environ(), tc.env.Vars()...), asMainEnv+"=1")
			var stderr strings.Builder
			c.Stderr = &stderr
			err := c.Run()
			var exit *exec.ExitError
			lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
			if !errors.As(err, &exit) || exit.ExitCode() != 1 || len(lines) != 2 || !strings.HasPrefix(lines[0], fmt.Sprintf("micrograph: rank %d of 2", tc.env.Rank)) ||
				!strings.HasPrefix(lines[1], "micrograph pretrain: "+tc.want) {
				t.Errorf("%v, stderr %q; want status 1, the line on the wait and one line with %q", err, stderr.String(), tc.want)
			}
			if _, err := os.Stat(run); err == nil {
				t.Errorf("the failed rank made %s", run)
				os.RemoveAll(run)
			}
		})
	}
}

// A job environment left in a shell (as after a torchrun session) makes
// pretrain and bench say at once, before waiting, which rank of how many
// they are, where they wait and for how long; SIGTERM or SIGINT during the
// wait ends pretrain with status 0, one line saying so and no run folder,
// and ends bench as a signal ends any command (128 + its number). pretrain
// used to wait silently for the whole timeout, and to answer SIGTERM with
// "finishing the step" and go on waiting.
//
// The signal is sent once the process is in the wait, an event, not after
// a pause: rank 1 has connected to the test's listener on MASTER_PORT (held
// by the test, so no other process can take it), rank 0 listens on its
// port (found in /proc/net). Nothing depends on how fast a busy machine is
// but the test's own deadline, which only reports a hang.
func TestStrayJobEnvironmentSpeaksAndStops(t *testing.T) {
	if !torch.HasBackend(torch.Gloo) {
		t.Skip("the shim was built without Gloo")
	}
	dir := t.TempDir()
	synth := filepath.Join(dir, "synth")
	if _, err := synthetic.Write(synth, synthetic.Options{Molecules: 40, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	small := []string{"--data", synth, "--hidden", "8", "--layers", "1", "--motifs", "4", "--batch-size", "8", "--device", "cpu", "--threads", "1"}
	for _, tc := range []struct {
		name   string
		rank   int
		args   []string
		signal os.Signal
		code   int
		last   string
	}{
		{"pretrain rank 1, SIGTERM", 1, []string{"pretrain", "--run", filepath.Join(dir, "run1"), "--max-steps", "1", "--timeout", "30m"}, syscall.SIGTERM, 0,
			"micrograph: stopped while waiting for the other processes of the job: nothing was written; the same command starts again"},
		{"pretrain rank 0, SIGINT", 0, []string{"pretrain", "--run", filepath.Join(dir, "run0"), "--max-steps", "1", "--timeout", "30m"}, syscall.SIGINT, 0,
			"micrograph: stopped while waiting for the other processes of the job: nothing was written; the same command starts again"},
		{"bench rank 1, SIGINT", 1, []string{"bench", "--steps", "1", "--warmup", "0"}, syscall.SIGINT, 130, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hang := testenv.HangReport(t)
			// inWait is closed once the process waits for the other rank.
			inWait := make(chan struct{})
			var port int
			if tc.rank == 1 {
				store, err := net.Listen("tcp", "127.0.0.1:0") // rank 0's store, which never answers
				if err != nil {
					t.Fatal(err)
				}
				defer store.Close()
				port = store.Addr().(*net.TCPAddr).Port
				go func() {
					if conn, err := store.Accept(); err == nil {
						defer conn.Close()
						close(inWait)
						io.Copy(io.Discard, conn) // held open, unanswered, until the process ends
					}
				}()
			} else {
				port = testenv.FreePort(t)
				go func() {
					for !listening(port) {
						time.Sleep(20 * time.Millisecond)
					}
					close(inWait)
				}()
			}
			env := distributed.Env{Rank: tc.rank, WorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: port}
			c := exec.Command(os.Args[0], append(tc.args, small...)...)
			c.Env = append(append(os.Environ(), env.Vars()...), asMainEnv+"=1")
			stderr, err := c.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			lines := make(chan string, 16)
			go func() {
				defer close(lines)
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					lines <- sc.Text()
				}
			}()
			wait := fmt.Sprintf("micrograph: rank %d of 2, as the environment says (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT): once the data is open, waiting up to ", tc.rank)
			var seen []string
			for len(seen) == 0 || !strings.HasPrefix(seen[len(seen)-1], wait) {
				select {
				case l, ok := <-lines:
					if !ok {
						c.Wait()
						t.Fatalf("ended before saying what it waits for: %q", seen)
					}
					seen = append(seen, l)
				case <-hang:
					c.Process.Kill()
					c.Wait()
					t.Fatalf("said nothing of the wait: %q", seen)
				}
			}
			select {
			case <-inWait:
			case <-hang:
				c.Process.Kill()
				c.Wait()
				t.Fatalf("never reached the wait: %q", seen)
			}
			c.Process.Signal(tc.signal)
			ended := make(chan error, 1)
			go func() {
				for l := range lines {
					seen = append(seen, l)
				}
				ended <- c.Wait()
			}()
			select {
			case err = <-ended:
			case <-hang:
				c.Process.Kill()
				<-ended
				t.Fatalf("still waiting after the signal: %q", seen)
			}
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			}
			if code != tc.code || (tc.last != "" && seen[len(seen)-1] != tc.last) || (tc.last == "" && len(seen) != 1) {
				t.Errorf("status %d, stderr %q; want status %d ending with %q", code, seen, tc.code, tc.last)
			}
			if tc.args[0] == "pretrain" {
				if _, err := os.Stat(tc.args[2]); err == nil {
					t.Errorf("the stopped rank made %s", tc.args[2])
				}
			}
		})
	}
}

// listening tells whether a socket on this machine listens on TCP port
// (IPv4 or IPv6), from /proc/net's tables.
func listening(port int) bool {
	local := fmt.Sprintf(":%04X", port)
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, _ := os.ReadFile(table)
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) > 3 && strings.HasSuffix(f[1], local) && f[3] == "0A" {
				return true
			}
		}
	}
	return false
}
