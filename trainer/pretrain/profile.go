package pretrain

import (
	"time"

	"github.com/micrograph/micrograph/torch"
)

// RankProfile is one process's part of a data-parallel bench's timed steps:
// what its part of each batch held, and where its time went: computing,
// waiting for batches, or in each kind of collective (issuing it and
// waiting for it to end: for the slowest process to reach it, and for the
// transfer). The faster process of a pair waits in a collective for as
// long as the slower one computes past it.
type RankProfile struct {
	Rank             int     `json:"rank"`
	AtomsPerStep     float64 `json:"atoms_per_step"`
	MoleculesPerStep float64 `json:"molecules_per_step"`
	SPerStep         float64 `json:"s_per_step"` // this process's own time per timed step
	ComputeSPerStep  float64 `json:"compute_s_per_step"`
	DataWaitSPerStep float64 `json:"data_wait_s_per_step"`
	// CollectivesSPerStep is the time in every collective, Collectives by
	// kind (torch.Collective's names; kinds not run are left out).
	CollectivesSPerStep float64                      `json:"collectives_s_per_step"`
	Collectives         map[string]CollectiveProfile `json:"collectives"`
}

// CollectiveProfile is a kind of collective's share of a process's step.
type CollectiveProfile struct {
	CallsPerStep float64 `json:"calls_per_step"`
	SPerStep     float64 `json:"s_per_step"`
}

// rankTally is what a process counts over a bench's timed steps.
type rankTally struct {
	steps            int
	atoms, molecules int
	elapsed, wait    time.Duration
	before, after    []torch.CollectiveTime // the group's profile around the steps
}

// rankProfiles gathers every process's tally into their profiles, in rank
// order; alone, nil.
func rankProfiles(procs processes, t rankTally) ([]RankProfile, error) {
	if procs.Size() == 1 {
		return nil, nil
	}
	kinds := torch.Collectives()
	// steps, atoms, molecules, elapsed, wait, then calls and seconds per kind
	mine := []float64{float64(t.steps), float64(t.atoms), float64(t.molecules), t.elapsed.Seconds(), t.wait.Seconds()}
	for i := range kinds {
		mine = append(mine, float64(t.after[i].Calls-t.before[i].Calls), (t.after[i].Time - t.before[i].Time).Seconds())
	}
	all, err := procs.gather(mine)
	if err != nil {
		return nil, err
	}
	out := make([]RankProfile, len(all))
	for r, v := range all {
		steps := v[0]
		p := RankProfile{Rank: r, AtomsPerStep: v[1] / steps, MoleculesPerStep: v[2] / steps, SPerStep: v[3] / steps,
			DataWaitSPerStep: v[4] / steps, Collectives: map[string]CollectiveProfile{}}
		for i, k := range kinds {
			calls, s := v[5+2*i], v[6+2*i]
			if calls == 0 {
				continue
			}
			p.Collectives[k.String()] = CollectiveProfile{CallsPerStep: calls / steps, SPerStep: s / steps}
			p.CollectivesSPerStep += s / steps
		}
		p.ComputeSPerStep = p.SPerStep - p.CollectivesSPerStep - p.DataWaitSPerStep
		out[r] = p
	}
	return out, nil
}
