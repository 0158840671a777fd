package runpool

// How an evaluation's runs (seeds, folds, encoders) spread over a CPU's
// cores unless the caller says: one process per core, each run on one
// libtorch thread, as many as the memory allows and no more than there are
// runs; the cores left over go to threads in each. Runs share nothing, so
// side by side they scale with the cores, where one run's threads mostly
// wait on each other (docs/speed.md).

// JobMemory is what the default reserves in memory for each process of an
// evaluation's runs beyond the first (the libtorch runtime, the dataset, a
// model with its optimiser), against /proc/meminfo's MemAvailable.
const JobMemory = 1 << 30

// Split is how an evaluation's runs use the cores: Jobs processes side by
// side (1: one after another in this process), each with Threads libtorch
// threads.
type Split struct{ Jobs, Threads int }

// SplitRequest is what SplitRuns decides from: the jobs and threads asked
// for (0: not asked), how many runs there are, the cores, the bytes of
// memory available (0: unknown), and whether the runs are on a GPU.
type SplitRequest struct {
	Jobs, Threads, Runs, Cores int
	Available                  int64
	GPU                        bool
}

// SplitRuns is the split of r's runs. A GPU runs one at a time unless Jobs
// says otherwise. The threads of each run depend only on what was asked,
// the cores and how many runs there are, never on how many are left to
// make, so that a suite started again makes its runs as the first call did.
func SplitRuns(r SplitRequest) Split {
	jobs, threads, runs, cores, available, gpu := r.Jobs, r.Threads, max(r.Runs, 1), r.Cores, r.Available, r.GPU
	switch {
	case jobs > 0 && threads > 0:
		return Split{jobs, threads}
	case jobs > 0:
		return Split{jobs, max(1, cores/min(jobs, runs))}
	case gpu && threads > 0:
		return Split{1, threads}
	case gpu:
		return Split{1, cores}
	}
	n := cores
	if threads > 0 {
		n = cores / threads
	}
	n = min(n, runs)
	if available > 0 {
		n = min(n, 1+int(available/JobMemory))
	}
	n = max(n, 1)
	if threads == 0 {
		threads = max(1, cores/n)
	}
	return Split{n, threads}
}
