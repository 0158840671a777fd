package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/internal/testenv"
	"github.com/micrograph/micrograph/trainer/evaluate/suite"
)

// micrograph starts this test binary as micrograph with args.
func micrograph(args ...string) (*exec.Cmd, *bytes.Buffer) {
	c := exec.Command(os.Args[0], args...)
	c.Env = append(os.Environ(), asMainEnv+"=1")
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	return c, &out
}

// childrenOf are the processes whose parent is pid.
func childrenOf(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			child, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			out = append(out, child)
		}
	}
	return out
}

// Acceptance: a suite killed part-way (SIGKILL of its process, after some
// runs finished, while its two processes of runs work) takes its processes
// with it; the same command run again takes the runs it kept, untouched,
// makes only the missing ones, and ends with the uninterrupted suite's
// results: suite.md the same, suite.json the same but for its timings.
func TestSuiteKilledAndStartedAgain(t *testing.T) {
	dir := t.TempDir()
	bace := filepath.Join(dir, "ogbg_molbace") // a benchmark's name
	if _, err := synthetic.Write(bace, synthetic.Options{Molecules: 160, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	encoder := writeTinyEncoder(t)
	args := func(out string) []string {
		return []string{"suite", "--encoder", encoder, "--datasets", bace, "--out", out, "--evaluations", "finetune,linear",
			"--protocols", "scaffold", "--seeds", "4", "--epochs", "8", "--linear-steps", "40", "--jobs", "2", "--threads", "1",
			"--device", "cpu", "--cache", filepath.Join(dir, "cache")}
	}
	whole, stopped := filepath.Join(dir, "whole"), filepath.Join(dir, "stopped")
	if c, out := micrograph(args(whole)...); c.Run() != nil {
		t.Fatalf("the uninterrupted suite:\n%s", out)
	}

	c, out := micrograph(args(stopped)...)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	runs := filepath.Join(stopped, "runs")
	workers := map[int]bool{}
	hang := testenv.HangReport(t) // the waits below are for events; this only reports a hang
	for ; ; time.Sleep(50 * time.Millisecond) {
		if len(workers) < 2 {
			for _, pid := range childrenOf(c.Process.Pid) {
				workers[pid] = true
			}
		}
		if kept, _ := filepath.Glob(filepath.Join(runs, "*.json")); len(kept) >= 3 {
			break
		}
		select {
		case <-hang:
			c.Process.Kill()
			t.Fatalf("no 3 runs finished:\n%s", out)
		default:
		}
	}
	c.Process.Signal(syscall.SIGKILL)
	if err := c.Wait(); !killedBySIGKILL(err) {
		t.Fatalf("the suite was not killed (%v); it finished too soon:\n%s", err, out)
	}
	if len(workers) == 0 {
		t.Errorf("the suite started no process of runs")
	}
	for pid := range workers {
	wait:
		for syscall.Kill(pid, 0) == nil {
			select {
			case <-hang:
				syscall.Kill(pid, syscall.SIGKILL)
				t.Errorf("process %d of the killed suite is still running", pid)
				break wait
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	kept, _ := filepath.Glob(filepath.Join(runs, "*.json"))
	before := map[string]os.FileInfo{}
	for _, path := range kept {
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		before[path] = info
	}
	if len(kept) >= 16 {
		t.Fatalf("%d runs of 16 were kept: the suite was killed after its last", len(kept))
	}

	again, out := micrograph(args(stopped)...)
	if err := again.Run(); err != nil {
		t.Fatalf("started again: %v\n%s", err, out)
	}
	if want := fmt.Sprintf("suite: %d of 16 runs taken from %s, %d to make", len(kept), runs, 16-len(kept)); !strings.Contains(out.String(), want) {
		t.Errorf("started again, it does not say %q:\n%s", want, out)
	}
	for path, was := range before {
		if now, err := os.Stat(path); err != nil || !os.SameFile(was, now) || !now.ModTime().Equal(was.ModTime()) {
			t.Errorf("%s was made again (%v)", path, err)
		}
	}
	if all, _ := filepath.Glob(filepath.Join(runs, "*.json")); len(all) != 16 {
		t.Errorf("%d run files, want 16", len(all))
	}
	for _, name := range []string{"suite.md", "suite-partial.md", "suite-partial.json"} {
		a, errA := os.ReadFile(filepath.Join(whole, name))
		b, errB := os.ReadFile(filepath.Join(stopped, name))
		if !bytes.Equal(a, b) || (errA == nil) != (errB == nil) || (name == "suite.md" && errA != nil) {
			t.Errorf("%s differs (%v, %v):\n%s\nuninterrupted:\n%s", name, errB, errA, b, a)
		}
	}
	a, errA := suite.ReadResult(whole)
	b, errB := suite.ReadResult(stopped)
	if err := errors.Join(errA, errB); err != nil {
		t.Fatal(err)
	}
	if testenv.Untimed(t, a) != testenv.Untimed(t, b) {
		t.Errorf("suite.json differs beyond its timings:\n%s\nuninterrupted:\n%s", testenv.Untimed(t, b), testenv.Untimed(t, a))
	}
}
