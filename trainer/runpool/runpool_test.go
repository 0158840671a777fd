package runpool_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/micrograph/micrograph/internal/testenv"
	"github.com/micrograph/micrograph/trainer/runenv"
	"github.com/micrograph/micrograph/trainer/runpool"
)

// job is a test job: square N, after writing Say on the progress and
// sleeping Sleep; fail it, or end the process, when asked.
type job struct {
	N     int           `json:"n"`
	Say   string        `json:"say,omitempty"`
	Sleep time.Duration `json:"sleep,omitempty"`
	Fail  bool          `json:"fail,omitempty"`
	Exit  bool          `json:"exit,omitempty"`
	// ExitOK ends the process with status 0 before the job answers.
	ExitOK bool `json:"exit_ok,omitempty"`
	// PIDFile, when set, receives the process's id before the job fails or
	// ends it; AwaitGone makes the job wait, before anything else, until
	// the process whose id that file holds is gone (reaped by the pool,
	// which ends a process once it has seen its job fail).
	PIDFile   string `json:"pid_file,omitempty"`
	AwaitGone string `json:"await_gone,omitempty"`
}

// result is a test job's: N², the process that made it, how many jobs that
// process's worker had made before, and the threads it was told.
type result struct {
	Square, PID, Before, Threads int
}

type squarer struct {
	env  runenv.Env
	done int
}

func (w *squarer) Do(spec json.RawMessage) (json.RawMessage, error) {
	var j job
	if err := json.Unmarshal(spec, &j); err != nil {
		return nil, err
	}
	for j.AwaitGone != "" {
		b, _ := os.ReadFile(j.AwaitGone)
		if pid, err := strconv.Atoi(string(b)); err == nil {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if j.PIDFile != "" {
		os.WriteFile(j.PIDFile+".tmp", []byte(strconv.Itoa(os.Getpid())), 0o644)
		os.Rename(j.PIDFile+".tmp", j.PIDFile)
	}
	if j.Say != "" && w.env.Progress != nil {
		fmt.Fprintln(w.env.Progress, j.Say)
	}
	time.Sleep(j.Sleep)
	switch {
	case j.Fail:
		return nil, fmt.Errorf("job %d fails", j.N)
	case j.Exit:
		os.Exit(3)
	case j.ExitOK:
		os.Exit(0)
	}
	w.done++
	return json.Marshal(result{Square: j.N * j.N, PID: os.Getpid(), Before: w.done - 1, Threads: w.env.Threads})
}

func (w *squarer) Close() {}

var squares = runpool.Kind{Name: "test.square", New: func(env runenv.Env) runpool.Worker { return &squarer{env: env} }}

func TestMain(m *testing.M) {
	runpool.ServeIfWorker(squares)
	os.Exit(m.Run())
}

// run runs jobs on a pool of env, and returns the results by job and the
// order in which they came.
func run(t *testing.T, env runenv.Env, jobs []job) (map[int]result, []int, error) {
	t.Helper()
	specs := make([]json.RawMessage, len(jobs))
	for i, j := range jobs {
		specs[i], _ = json.Marshal(j)
	}
	results := map[int]result{}
	var order []int
	err := runpool.Run(env, squares, specs, func(i int, b json.RawMessage) error {
		var r result
		if err := json.Unmarshal(b, &r); err != nil {
			return err
		}
		if _, twice := results[i]; twice {
			t.Errorf("job %d finished twice", i)
		}
		results[i], order = r, append(order, i)
		return nil
	})
	return results, order, err
}

// Jobs run in Jobs processes of this program, not this one, each keeping
// its worker from job to job and running where the pool's env says (its
// threads); each result comes back once, with its job's index. With one
// job, or Jobs 1, they run in this process.
func TestPoolRunsJobsInProcesses(t *testing.T) {
	var progress strings.Builder
	env := runenv.Default()
	env.Jobs, env.Threads, env.Progress = 2, 3, &progress
	var jobs []job
	for n := range 7 {
		jobs = append(jobs, job{N: n, Say: fmt.Sprintf("job %d says hello", n)})
	}
	results, order, err := run(t, env, jobs)
	if err != nil {
		t.Fatal(err)
	}
	pids := map[int]int{} // jobs by process
	for n := range 7 {
		r, ok := results[n]
		if !ok || r.Square != n*n || r.PID == os.Getpid() || r.Threads != 3 {
			t.Errorf("job %d: %+v (found %v), want %d from another process with 3 threads", n, r, ok, n*n)
		}
		if r.Before != pids[r.PID] {
			t.Errorf("job %d: its process's worker had made %d jobs, not %d", n, r.Before, pids[r.PID])
		}
		pids[r.PID]++
		if !strings.Contains(progress.String(), fmt.Sprintf("job %d says hello\n", n)) {
			t.Errorf("job %d's progress line is missing:\n%s", n, progress.String())
		}
	}
	if len(pids) != 2 || len(order) != 7 {
		t.Errorf("%d processes made the jobs (%v), %d results; want 2 and 7", len(pids), pids, len(order))
	}

	for _, jobs := range []int{1, 0} {
		env.Jobs = jobs
		results, _, err := run(t, env, []job{{N: 4}, {N: 5}})
		if err != nil || results[0].PID != os.Getpid() || results[1].Square != 25 || results[1].Before != 1 {
			t.Errorf("Jobs %d: %v, %+v; want both in this process, one worker", jobs, err, results)
		}
	}
	env.Jobs = 4
	if results, _, err := run(t, env, []job{{N: 3}}); err != nil || results[0].PID != os.Getpid() {
		t.Errorf("one job: %v, %+v; want it in this process", err, results)
	}
}

// A job that fails, or whose process ends, is a *JobError naming the job;
// no job is handed out after it, and the job under way finishes and is
// handed on. Job 0 waits until the process of job 1 is gone, which the
// pool ends once it has seen job 1 fail (or which job 1 ends), so the
// failure is seen first whatever the machine's load: jobs 2–5 are never
// started.
func TestPoolStopsAtAFailure(t *testing.T) {
	env := runenv.Default()
	env.Jobs = 2
	for _, tc := range []struct {
		name string
		bad  job
		says string
	}{
		{"failing job", job{N: 1, Fail: true}, "job 1 fails"},
		{"process ending", job{N: 1, Exit: true}, "exit status 3 during job 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "pid")
			bad := tc.bad
			bad.PIDFile = pidFile
			jobs := []job{{N: 0, AwaitGone: pidFile}, bad, {N: 2}, {N: 3}, {N: 4}, {N: 5}}
			results, _, err := run(t, env, jobs)
			var je *runpool.JobError
			if !errors.As(err, &je) || je.Job != 1 || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("%v, want job 1's error saying %q", err, tc.says)
			}
			if r, ok := results[0]; !ok || r.Square != 0 || len(results) != 1 {
				t.Errorf("results %v: want job 0's, under way when job 1 failed, and no other", results)
			}
		})
	}
}

// A failure names its own job wherever the job stands, the first one
// included: in this process (Jobs 1) a job that fails, and in the pool's
// processes (Jobs 2) a job that fails or whose process ends during it, with
// a failing status or with status 0 (a process that ends without answering
// has failed its job however it exits). The jobs that finished are handed
// on, each at its own index. As in TestPoolStopsAtAFailure, the job beside
// the bad one waits until the bad one's process is gone, so the failure is
// seen first whatever the machine's load.
func TestPoolNamesTheFailingJob(t *testing.T) {
	for _, tc := range []struct {
		name      string
		jobs, bad int
		how       job
		says      string
	}{
		{"this process, job 0 fails", 1, 0, job{Fail: true}, "job 0 fails"},
		{"this process, job 2 fails", 1, 2, job{Fail: true}, "job 2 fails"},
		{"processes, job 0 fails", 2, 0, job{Fail: true}, "job 0 fails"},
		{"processes, job 0's process ends with status 3", 2, 0, job{Exit: true}, "exit status 3 during job 0"},
		{"processes, job 0's process ends with status 0", 2, 0, job{ExitOK: true}, "(test.square) ended during job 0"},
		{"processes, job 1's process ends with status 0", 2, 1, job{ExitOK: true}, "(test.square) ended during job 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := runenv.Default()
			env.Jobs = tc.jobs
			pidFile := filepath.Join(t.TempDir(), "pid")
			jobs := make([]job, 6)
			for n := range jobs {
				jobs[n].N = n
			}
			bad := tc.how
			bad.N = tc.bad
			want := map[int]int{} // the results handed on: squares by job
			if tc.jobs == 1 {
				for n := range tc.bad {
					want[n] = n * n
				}
			} else {
				bad.PIDFile = pidFile
				beside := 1 - tc.bad // the other process's job, under way when the bad one fails
				jobs[beside].AwaitGone = pidFile
				want[beside] = beside * beside
			}
			jobs[tc.bad] = bad
			results, _, err := run(t, env, jobs)
			var je *runpool.JobError
			if !errors.As(err, &je) || je.Job != tc.bad || !strings.Contains(err.Error(), tc.says) {
				named := -1
				if je != nil {
					named = je.Job
				}
				t.Fatalf("%v (job %d's, -1: no job's); want job %d's error saying %q", err, named, tc.bad, tc.says)
			}
			got := map[int]int{}
			for n, r := range results {
				got[n] = r.Square
			}
			if !maps.Equal(got, want) {
				t.Errorf("results (squares by job) %v, want %v", got, want)
			}
		})
	}
}

// An error of done's kills the processes and is Run's error.
func TestPoolStopsAtDonesError(t *testing.T) {
	env := runenv.Default()
	env.Jobs = 2
	specs := make([]json.RawMessage, 6)
	for i := range specs {
		specs[i], _ = json.Marshal(job{N: i})
	}
	var seen []int
	stop := errors.New("the disk is full")
	err := runpool.Run(env, squares, specs, func(i int, _ json.RawMessage) error {
		seen = append(seen, i)
		return stop
	})
	if !errors.Is(err, stop) || len(seen) != 1 {
		t.Errorf("%v after jobs %v, want done's error after one job", err, seen)
	}
	if slices.Contains(seen, 5) {
		t.Errorf("job 5 ran after done failed")
	}
}

// WorkerEnv leaked into the environment of a process no pool started (any
// value, the pool's own format included) is refused before anything is
// read: the process, its stdin an open pipe nobody writes to, ends with
// status 2 and one line naming the variable, rather than waiting for ever.
func TestLeakedWorkerVariableIsNamedNotServed(t *testing.T) {
	for _, value := range []string{"1", fmt.Sprintf("%d-token", os.Getpid()+1), "1-token"} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), runpool.WorkerEnv+"="+value)
		stdin, err := cmd.StdinPipe() // held open: a worker that reads it waits
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case err = <-exited:
		case <-testenv.HangReport(t):
			cmd.Process.Kill()
			<-exited
			t.Fatalf("%s=%q: the process still waits on its stdin", runpool.WorkerEnv, value)
		}
		stdin.Close()
		var exit *exec.ExitError
		want := runpool.WorkerEnv + "=" + fmt.Sprintf("%q", value) + " is set in the environment, but this process was not started by a pool of runs"
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(stderr.String(), want) || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%s=%q: %v, stderr %q; want status 2 and one line %q", runpool.WorkerEnv, value, err, stderr.String(), want)
		}
	}
}
