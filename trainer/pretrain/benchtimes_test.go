package pretrain

import (
	"math"
	"testing"
)

// bench's figures of time from measured seconds, hand-computed: the job's
// time is its slowest rank's, whichever rank that is (not rank 0's, not the
// mean), a step's time is that over the steps (not over steps × ranks), the
// molecules are the global batch's, an epoch is its steps at that time
// unless a whole epoch was timed, and the data wait is this rank's share of
// the job's time. No clock is read: the seconds are given.
func TestBenchTimes(t *testing.T) {
	for _, tc := range []struct {
		name                                  string
		steps, batch, perEpoch, processes     int
		seconds                               []float64
		wait                                  float64
		epoch                                 bool
		sPerStep, molPerS, sPerEpoch, waitFra float64
	}{
		// 2.5 s / 5 steps; 5·32 molecules / 2.5 s; 8 steps per epoch; 0.5 / 2.5.
		{"alone", 5, 32, 8, 1, []float64{2.5}, 0.5, false, 0.5, 64, 4, 0.2},
		// Rank 1 the slowest: 3 s / 4 steps; 4·48 / 3; 10 · 0.75; 0.75 / 3.
		{"two ranks, rank 1 slowest", 4, 48, 10, 2, []float64{1.5, 3}, 0.75, false, 0.75, 64, 7.5, 0.25},
		// Rank 0 the slowest: 2 s / 4 steps; 4·48 / 2; 10 · 0.5; 0.5 / 2.
		{"two ranks, rank 0 slowest", 4, 48, 10, 2, []float64{2, 1.25}, 0.5, false, 0.5, 96, 5, 0.25},
		// A whole epoch of 12 steps on three ranks, rank 1 the slowest: 6 s / 12;
		// 12·10 / 6; the epoch 6 s as timed; 1.5 / 6.
		{"epoch, three ranks", 12, 10, 12, 3, []float64{4, 6, 5}, 1.5, true, 0.5, 20, 6, 0.25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := &BenchResult{Steps: tc.steps, BatchSize: tc.batch, StepsPerEpoch: tc.perEpoch, Processes: tc.processes}
			benchTimes(res, tc.seconds, tc.wait, tc.epoch)
			for _, f := range []struct {
				name      string
				got, want float64
			}{
				{"s_per_step", res.SPerStep, tc.sPerStep},
				{"molecules_per_s", res.MoleculesPerS, tc.molPerS},
				{"s_per_epoch", res.SPerEpoch, tc.sPerEpoch},
				{"data_wait_fraction", res.DataWaitFraction, tc.waitFra},
			} {
				if math.Abs(f.got-f.want) > 1e-12*f.want {
					t.Errorf("%s %v, want %v", f.name, f.got, f.want)
				}
			}
		})
	}
}
