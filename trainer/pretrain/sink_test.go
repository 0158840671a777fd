package pretrain_test

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/micrograph/micrograph/trainer/pretrain"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// recorder is a test-only log sink: it keeps what it is given, and
// refuses anything after Close.
type recorder struct {
	records []runfolder.LogRecord
	closed  bool
	fail    error // Write's error, when set
}

func (r *recorder) Write(rec runfolder.LogRecord) error {
	if r.closed {
		return errors.New("written after Close")
	}
	if r.fail != nil {
		return r.fail
	}
	r.records = append(r.records, rec)
	return nil
}

func (r *recorder) Close() error {
	r.closed = true
	return nil
}

// A log sink of the test's own plugs into a run through pretrain.Sink
// alone: it receives exactly the records log.jsonl holds, in order (every
// LogEvery steps; a resumed run's from where it continues), and stays open
// for its maker to close; one whose Write fails ends the run with its
// error.
func TestTestOnlySinkPlugsIn(t *testing.T) {
	cfg := smallConfig(t)
	cfg.LogEvery, cfg.MaxSteps, cfg.CheckpointEvery = 2, 7, 4
	run := filepath.Join(t.TempDir(), "run")
	first, resumed := &recorder{}, &recorder{}
	if _, err := pretrain.Run(run, cfg, testEnv(t), pretrain.Options{Sinks: []pretrain.Sink{first}}); err != nil {
		t.Fatal(err)
	}
	cfg.MaxSteps = 12
	if _, err := pretrain.Run(run, cfg, testEnv(t), pretrain.Options{Resume: true, Sinks: []pretrain.Sink{resumed}}); err != nil {
		t.Fatal(err)
	}
	if first.closed || resumed.closed {
		t.Error("the run closed a sink it was given")
	}
	logged, err := runfolder.ReadLog(run)
	if err != nil {
		t.Fatal(err)
	}
	// The first run logs steps 2, 4 and 6 and checkpoints step 7; the
	// resumed one continues there and logs 8, 10 and 12.
	got := append(slices.Clip(first.records), resumed.records...)
	if !slices.Equal(stepsOf(first.records), []int64{2, 4, 6}) || !slices.Equal(stepsOf(resumed.records), []int64{8, 10, 12}) || len(got) != len(logged) {
		t.Fatalf("the sinks got steps %v then %v, want 2, 4, 6 then 8, 10, 12; log.jsonl holds %v", stepsOf(first.records), stepsOf(resumed.records), stepsOf(logged))
	}
	for i := range logged {
		want, _ := json.Marshal(logged[i])
		have, _ := json.Marshal(got[i])
		if string(have) != string(want) {
			t.Errorf("record %d: the sink got %s, log.jsonl holds %s", i, have, want)
		}
	}

	failing := &recorder{fail: errors.New("the sink is full")}
	cfg.MaxSteps = 4
	_, err = pretrain.Run(filepath.Join(t.TempDir(), "run"), cfg, testEnv(t), pretrain.Options{Sinks: []pretrain.Sink{failing}})
	if !errors.Is(err, failing.fail) {
		t.Errorf("a failing sink ended the run with %v, want its error", err)
	}
}

// stepsOf lists the steps of records.
func stepsOf(records []runfolder.LogRecord) []int64 {
	var steps []int64
	for _, r := range records {
		steps = append(steps, r.Step)
	}
	return steps
}

// Bench takes the steps a run takes: a bench of a run's settings logs to a
// sink, step for step, the losses the run logs, bit for bit, under both
// objectives (the released one initialising its motif table from the first
// batches and clipping its two groups apart), so that what it times is
// pretrain's step.
func TestBenchTakesTheRunsSteps(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  runfolder.Config
	}{{"paper", smallConfig(t)}, {"released", releasedStepConfig(t)}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.MaxSteps = 5
			run := filepath.Join(t.TempDir(), "run")
			if _, err := pretrain.Run(run, cfg, testEnv(t), pretrain.Options{}); err != nil {
				t.Fatal(err)
			}
			logged, err := runfolder.ReadLog(run)
			if err != nil {
				t.Fatal(err)
			}
			rec := &recorder{}
			if _, err := pretrain.Bench(pretrain.BenchConfig{Pretrain: cfg, Warmup: 2, Steps: 3}, testEnv(t), pretrain.Options{Sinks: []pretrain.Sink{rec}}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(stepsOf(rec.records), stepsOf(logged)) {
				t.Fatalf("bench logged steps %v, the run %v", stepsOf(rec.records), stepsOf(logged))
			}
			for i := range logged {
				rec.records[i].MoleculesPerS, logged[i].MoleculesPerS = 0, 0
				have, _ := json.Marshal(rec.records[i])
				want, _ := json.Marshal(logged[i])
				if string(have) != string(want) {
					t.Errorf("step %d: bench %s, the run %s", logged[i].Step, have, want)
				}
			}
		})
	}
}
