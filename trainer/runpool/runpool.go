// Package runpool runs independent jobs side by side, each process of a
// pool running one job at a time, and hands each job's result back as it
// finishes. Jobs and results are JSON; what a job does is a Kind's, which
// both sides name.
//
// The processes are this program started again with WorkerEnv set: every
// main function of a program that runs a pool (cmd/micrograph's, and the
// test binaries of the packages whose tests start one) first calls
// ServeIfWorker with the kinds it serves, which serves the jobs it is sent
// and exits. Each process runs where its runenv.Env says, the one the pool
// was given (the writers and the stop signal aside): its threads, device,
// collating goroutines and dataset cache. Killed with its parent (SIGKILL
// as the parent dies), a process never outlives the pool.
package runpool

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/micrograph/micrograph/internal/inputfile"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/runenv"
)

// WorkerEnv is the environment variable that makes a program a process of
// a pool (ServeIfWorker). The pool sets it to its own process id and a
// token of its own ("PID-TOKEN"): a process serves only when its parent is
// that process, and its hello carries the same token, so that the variable
// leaked into a user's environment never makes a command wait on its
// standard input.
const WorkerEnv = "MICROGRAPH_POOL_WORKER"

// workerValue is WorkerEnv's value for the processes of a pool whose hello
// carries token.
func workerValue(token string) string { return fmt.Sprintf("%d-%s", os.Getpid(), token) }

// poolToken is a pool's token: a new one for each pool (the time it
// starts, in nanoseconds), so that no value of WorkerEnv seen before passes
// for another pool's. It is no secret, and draws nothing at random: it
// only ties a process's hello to the variable its parent set.
func poolToken() string { return strconv.FormatInt(time.Now().UnixNano(), 36) }

// workerToken is the token of WorkerEnv's value, when this process's parent
// is the process the value names (a pool that started it); else an error
// that names the variable.
func workerToken(value string) (string, error) {
	pid, token, ok := strings.Cut(value, "-")
	parent, err := strconv.Atoi(pid)
	if !ok || err != nil || token == "" || parent != os.Getppid() {
		return "", fmt.Errorf("%s=%s is set in the environment, but this process was not started by a pool of runs "+
			"(the variable is the pool's own, for the processes it starts): unset it", WorkerEnv, inputfile.Quote(value))
	}
	return token, nil
}

// A Kind is a kind of job: its name, which a process checks against the
// pool's, and how a process makes the Worker that runs such jobs.
type Kind struct {
	Name string
	New  func(env runenv.Env) Worker
}

// A Worker runs jobs of its kind one at a time in one process, keeping what
// consecutive jobs share (an open dataset) until Close.
type Worker interface {
	// Do runs one job and returns its result.
	Do(job json.RawMessage) (json.RawMessage, error)
	// Close releases what the worker kept.
	Close()
}

// JobError is the failure of one job, by its index in Run's list.
type JobError struct {
	Job int
	Err error
}

func (e *JobError) Error() string { return e.Err.Error() }
func (e *JobError) Unwrap() error { return e.Err }

// Run runs jobs of kind on env.Jobs processes (never more than there are
// jobs; with one, or none asked for, in this process, one after another)
// and calls done with each job's index and result, in the calling
// goroutine, as each finishes. A job's failure, or the end of the process
// running it (both a *JobError), stops the pool: no job is started after
// it, and the jobs under way finish (their results handed on: a suite
// keeps them); Run returns the first failure. An error of done's kills the
// processes at once.
func Run(env runenv.Env, kind Kind, jobs []json.RawMessage, done func(job int, result json.RawMessage) error) error {
	if n := min(env.Jobs, len(jobs)); n > 1 {
		return runProcesses(env, kind, jobs, n, done)
	}
	w := kind.New(env)
	defer w.Close()
	for i, job := range jobs {
		result, err := do(w, job)
		if err != nil {
			return &JobError{Job: i, Err: err}
		}
		if err := done(i, result); err != nil {
			return err
		}
	}
	return nil
}

// do runs one job, a libtorch error raised as a panic included.
func do(w Worker, job json.RawMessage) (result json.RawMessage, err error) {
	if caught := torch.Catch(func() { result, err = w.Do(job) }); caught != nil {
		return nil, caught
	}
	return result, err
}

// The messages between a pool and its processes, one JSON value a line: the
// pool writes hello and then one job at a time on the process's stdin; the
// process writes each job's answer on its descriptor 3, and its progress
// and any failure of its own on stderr.
type (
	hello struct {
		Kind     string     `json:"kind"`
		Env      runenv.Env `json:"env"`
		Progress bool       `json:"progress"` // env.Progress was not nil: write progress on stderr
		Parent   int        `json:"parent"`   // the pool's process id
		Token    string     `json:"token"`    // the token of the WorkerEnv the pool set
	}
	jobMessage struct {
		Job  int             `json:"job"`
		Spec json.RawMessage `json:"spec"`
	}
	answer struct {
		Job    int             `json:"job"`
		Result json.RawMessage `json:"result,omitempty"`
		Error  string          `json:"error,omitempty"`
	}
)

// ServeIfWorker returns at once unless WorkerEnv is set (not empty); then, started by a
// pool, it runs the jobs it is sent with the Worker of the pool's kind, one
// of kinds, and exits: 0 once its stdin ends, 2 when it cannot serve. Set
// in a process no pool started (leaked from a pool's process into a shell),
// the variable is refused before anything is read: one line naming it,
// status 2.
func ServeIfWorker(kinds ...Kind) {
	value := os.Getenv(WorkerEnv)
	if value == "" {
		return
	}
	token, err := workerToken(value)
	if err != nil {
		fmt.Fprintf(os.Stderr, "micrograph: %v\n", err)
		os.Exit(2)
	}
	if err := serve(kinds, token, os.Stdin, os.NewFile(3, "pool answers")); err != nil {
		fmt.Fprintf(os.Stderr, "micrograph: a process of a pool: %v\n", err)
		os.Exit(2)
	}
	os.Exit(0)
}

// serve is a pool's process of the pool whose token is token: hello, then
// jobs until in ends.
func serve(kinds []Kind, token string, in io.Reader, out io.Writer) error {
	dec := json.NewDecoder(bufio.NewReader(in))
	var h hello
	if err := dec.Decode(&h); err != nil {
		return fmt.Errorf("reading what to serve: %w", err)
	}
	if os.Getppid() != h.Parent {
		return errors.New("the pool that started this process has ended")
	}
	if h.Token != token {
		return fmt.Errorf("the pool's hello does not carry the token of %s", WorkerEnv)
	}
	var kind *Kind
	for i := range kinds {
		if kinds[i].Name == h.Kind {
			kind = &kinds[i]
		}
	}
	if kind == nil {
		return fmt.Errorf("this program does not serve jobs of kind %q", h.Kind)
	}
	env := h.Env
	env.Dataset.Report = nil // the pool's process opened every dataset first and reported its rows
	if h.Progress {
		env.Progress = os.Stderr
	}
	_, err := runenv.Run(env, nil, func() (struct{}, error) {
		w := kind.New(env)
		defer w.Close()
		enc := json.NewEncoder(out)
		for {
			var j jobMessage
			if err := dec.Decode(&j); errors.Is(err, io.EOF) {
				return struct{}{}, nil
			} else if err != nil {
				return struct{}{}, fmt.Errorf("reading a job: %w", err)
			}
			a := answer{Job: j.Job}
			result, err := do(w, j.Spec)
			if err != nil {
				a.Error = err.Error()
			} else {
				a.Result = result
			}
			if err := enc.Encode(a); err != nil {
				return struct{}{}, err
			}
		}
	})
	return err
}

// process is one process of a pool.
type process struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	enc   *json.Encoder
	job   int      // the job it runs; -1 when it has none
	tail  []string // its last lines on stderr, for a failure's message
}

// event is what a pool hears from its processes.
type event struct {
	process int
	answer  *answer // a job's answer
	line    *string // a line on stderr
	exit    *error  // the process ended (nil: with status 0)
}

// tailLines is how many of a process's last stderr lines a failure quotes.
const tailLines = 5

// runProcesses is Run on n processes.
func runProcesses(env runenv.Env, kind Kind, jobs []json.RawMessage, n int, done func(int, json.RawMessage) error) error {
	if os.Getenv(WorkerEnv) != "" {
		return errors.New("a process of a pool cannot start a pool")
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	token := poolToken()
	events := make(chan event)
	procs := make([]*process, 0, n)
	next := 0 // the next job to hand out
	var first error
	killed := false
	// fail keeps the first error; kill ends the processes at once, else
	// the jobs under way finish and their results are handed on.
	fail := func(err error, kill bool) {
		if first == nil {
			first = err
		}
		if kill && !killed {
			killed = true
			for _, p := range procs {
				p.cmd.Process.Kill()
			}
		}
	}
	// give hands p the next job, or, when none is left or the pool is
	// failing, closes its stdin, which ends it.
	give := func(p *process) {
		if next >= len(jobs) || first != nil {
			p.job = -1
			p.stdin.Close()
			return
		}
		p.job = next
		next++
		if err := p.enc.Encode(jobMessage{Job: p.job, Spec: jobs[p.job]}); err != nil {
			fail(fmt.Errorf("handing job %d to process %d: %w", p.job, p.cmd.Process.Pid, err), true)
		}
	}
	h := hello{Kind: kind.Name, Env: env, Progress: env.Progress != nil, Parent: os.Getpid(), Token: token}
	for i := range n {
		p, err := startProcess(exe, workerValue(token), i, events)
		if err != nil {
			fail(err, true)
			break
		}
		procs = append(procs, p)
		if err := p.enc.Encode(h); err != nil {
			fail(fmt.Errorf("starting process %d: %w", p.cmd.Process.Pid, err), true)
			break
		}
		give(p)
	}
	for left := len(procs); left > 0; {
		e := <-events
		p := procs[e.process]
		switch {
		case e.line != nil:
			if env.Progress != nil {
				fmt.Fprintln(env.Progress, *e.line)
			}
			p.tail = append(p.tail, *e.line)
			if len(p.tail) > tailLines {
				p.tail = p.tail[1:]
			}
		case e.answer != nil && !killed:
			switch a := e.answer; {
			case a.Job != p.job:
				fail(fmt.Errorf("process %d answered job %d, not its job %d", p.cmd.Process.Pid, a.Job, p.job), true)
			case a.Error != "":
				fail(&JobError{Job: a.Job, Err: errors.New(a.Error)}, false)
				give(p)
			default:
				if err := done(a.Job, a.Result); err != nil {
					fail(err, true)
				} else {
					give(p)
				}
			}
		case e.exit != nil:
			left--
			if !killed && (*e.exit != nil || p.job >= 0) {
				why := "ended"
				if *e.exit != nil {
					why = (*e.exit).Error()
				}
				err := fmt.Errorf("process %d of the pool (%s) %s during job %d%s", p.cmd.Process.Pid, kind.Name, why, p.job, quoteTail(p.tail))
				if p.job >= 0 {
					err = &JobError{Job: p.job, Err: err}
				}
				fail(err, p.job < 0)
			}
		}
	}
	return first
}

// startProcess starts the pool's process i, this program with WorkerEnv
// set to worker, whose answers, stderr lines and end come to events.
func startProcess(exe, worker string, i int, events chan<- event) (*process, error) {
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), WorkerEnv+"="+worker)
	// Its own process group, so that a terminal's Ctrl-C reaches the pool,
	// which ends; SIGKILL as the pool's process dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	answers, answersW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.ExtraFiles = []*os.File{answersW} // its descriptor 3
	if err := cmd.Start(); err != nil {
		answers.Close()
		answersW.Close()
		return nil, fmt.Errorf("starting a process of the pool: %w", err)
	}
	answersW.Close()
	p := &process{cmd: cmd, stdin: stdin, enc: json.NewEncoder(stdin), job: -1}
	read := make(chan struct{}, 2)
	go func() {
		defer func() { read <- struct{}{} }()
		s := bufio.NewScanner(stderr)
		s.Buffer(make([]byte, 64<<10), 1<<20)
		for s.Scan() {
			line := s.Text()
			events <- event{process: i, line: &line}
		}
		io.Copy(io.Discard, stderr)
	}()
	go func() {
		defer func() { read <- struct{}{} }()
		defer answers.Close()
		dec := json.NewDecoder(bufio.NewReader(answers))
		for {
			var a answer
			if err := dec.Decode(&a); err != nil {
				return
			}
			events <- event{process: i, answer: &a}
		}
	}()
	go func() {
		<-read
		<-read // both pipes read to their end before Wait closes them
		err := cmd.Wait()
		events <- event{process: i, exit: &err}
	}()
	return p, nil
}

// quoteTail is a process's last stderr lines for a message, or nothing.
func quoteTail(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return ": " + strings.Join(lines, "; ")
}
