package distributed

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// Local is a data-parallel job of this program started on this machine, as
// torchrun --nproc-per-node starts one: Ranks copies of the running
// executable with Args, each given the torchrun environment (Env.Vars,
// rank 0 serving the rendezvous on a free loopback port) and Vars.
type Local struct {
	Args  []string // every rank's arguments
	Ranks int
	Vars  []string // further environment variables (NAME=VALUE) of every rank
	// Grace is how long the ranks still running after one failed may take
	// before they are killed: their collectives fail within their timeout.
	Grace time.Duration
	// Stdout and Stderr receive rank 0's output, which speaks for the job;
	// the other ranks' lines go to Stderr, each after "[rank R] ".
	Stdout, Stderr io.Writer
}

// Run starts the ranks and waits for them. SIGINT and SIGTERM are passed on
// to every rank. The result is one: nil when every rank succeeded, else the
// first failure.
func (l Local) Run() error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("finding a port for the ranks' rendezvous: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()

	n := l.Ranks
	cmds := make([]*exec.Cmd, n)
	var copies sync.WaitGroup
	for r := range n {
		c := exec.Command(exe, l.Args...)
		e := Env{Rank: r, WorldSize: n, LocalRank: r, MasterAddr: "127.0.0.1", MasterPort: port}
		c.Env = append(append(os.Environ(), e.Vars()...), l.Vars...)
		// Their own process group: a terminal's Ctrl-C reaches the ranks once,
		// through the launcher, not twice (which would make them quit at once).
		// A launcher that dies takes its ranks with it, as a stop.
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
		c.Stdin = nil
		if r == 0 {
			c.Stdout, c.Stderr = l.Stdout, l.Stderr
		} else {
			pipe, err := c.StderrPipe()
			if err != nil {
				return err
			}
			c.Stdout = c.Stderr // the same prefixing pipe
			copies.Add(1)
			go func(r int, from io.Reader) {
				defer copies.Done()
				prefixLines(l.Stderr, from, fmt.Sprintf("[rank %d] ", r))
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
				kill = time.After(l.Grace)
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
