package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/micrograph/micrograph/torch/distributed"
)

// launchRanks runs `micrograph command args` as n local ranks of a
// data-parallel run, as torchrun --nproc-per-node n would: each a re-exec of
// this binary with the torchrun environment (rank 0 serving the rendezvous on
// a free loopback port). Rank 0's output passes through; the others' lines
// come prefixed with their rank. SIGINT and SIGTERM are passed on to every
// rank. The result is one exit status: nil when every rank succeeded, else
// the first failure; ranks still running grace after one failed (their
// collectives fail within the timeout) are killed.
func launchRanks(command string, n int, args []string, grace time.Duration) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("finding a port for the ranks' rendezvous: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()

	cmds := make([]*exec.Cmd, n)
	var copies sync.WaitGroup
	for r := range n {
		c := exec.Command(exe, append([]string{command}, args...)...)
		e := distributed.Env{Rank: r, WorldSize: n, LocalRank: r, MasterAddr: "127.0.0.1", MasterPort: port}
		c.Env = append(os.Environ(), append(e.Vars(), launchedEnv+"=1")...)
		// Their own process group: a terminal's Ctrl-C reaches the ranks once,
		// through the launcher, not twice (which would make them quit at once).
		// A launcher that dies takes its ranks with it, as a stop.
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
		c.Stdin = nil
		if r == 0 {
			c.Stdout, c.Stderr = stdout, os.Stderr // rank 0 reports for the job
		} else {
			pipe, err := c.StderrPipe()
			if err != nil {
				return err
			}
			c.Stdout = c.Stderr // the same prefixing pipe
			copies.Add(1)
			go func(r int, from io.Reader) {
				defer copies.Done()
				prefixLines(os.Stderr, from, fmt.Sprintf("[rank %d] ", r))
			}(r, pipe)
		}
		if err := c.Start(); err != nil {
			for _, s := range cmds[:r] {
				s.Process.Kill()
			}
			return fmt.Errorf("starting rank %d: %w", r, err)
		}
		cmds[r] = c
	}

	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(signals)
	type exit struct {
		rank int
		err  error
	}
	exits := make(chan exit, n)
	for r, c := range cmds {
		go func() {
			if r > 0 {
				copies.Wait() // the pipe must be read to its end before Wait closes it
			}
			exits <- exit{r, c.Wait()}
		}()
	}
	var first *exit
	var kill <-chan time.Time
	for left := n; left > 0; {
		select {
		case s := <-signals:
			for _, c := range cmds {
				c.Process.Signal(s)
			}
		case e := <-exits:
			left--
			if e.err != nil && first == nil {
				first = &e
				kill = time.After(grace)
			}
		case <-kill:
			for _, c := range cmds {
				c.Process.Kill()
			}
		}
	}
	if first != nil {
		return fmt.Errorf("rank %d of %d: %v", first.rank, n, first.err)
	}
	return nil
}

// prefixLines copies r to w line by line, each line after prefix.
func prefixLines(w io.Writer, r io.Reader, prefix string) {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		fmt.Fprintf(w, "%s%s\n", prefix, s.Text())
	}
	io.Copy(io.Discard, r)
}

// withoutFlag is args without flag (--name VALUE or --name=VALUE).
func withoutFlag(args []string, name string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--"+name {
			i++ // its value
			continue
		}
		if strings.HasPrefix(a, "--"+name+"=") {
			continue
		}
		out = append(out, a)
	}
	return out
}

// launchedEnv marks the ranks launchRanks starts: the launcher said what
// it started, so they do not say what they wait for.
const launchedEnv = "MICROGRAPH_LAUNCHED_RANK"

// sayJobWait tells at once, on stderr, what a process that its environment
// made one rank of a job (torchrun's variables, or ones left in a shell)
// will wait for, and how long: otherwise it would wait silently for the
// whole timeout.
func sayJobWait(job *distributed.Env, timeout time.Duration) {
	if job == nil || os.Getenv(launchedEnv) != "" {
		return
	}
	at := fmt.Sprintf("at %s:%d", job.MasterAddr, job.MasterPort)
	if job.Rank == 0 {
		at = fmt.Sprintf("serving the job's store on port %d", job.MasterPort)
	}
	logf("rank %d of %d, as the environment says (%s, %s, %s, %s): once the data is open, waiting up to %v for the other processes, %s; unset those variables to run alone, SIGINT or SIGTERM stops the wait",
		job.Rank, job.WorldSize, distributed.EnvRank, distributed.EnvWorldSize, distributed.EnvMasterAddr, distributed.EnvMasterPort, timeout, at)
}

// distributedJob is the data-parallel job this process was started in by
// its environment, or nil when it runs alone. A malformed environment is a
// usage error: the environment is part of how the command was started.
func distributedJob() (*distributed.Env, error) {
	env, inJob, err := distributed.FromEnv()
	if err != nil {
		return nil, usageError{err}
	}
	if !inJob {
		return nil, nil
	}
	return &env, nil
}
