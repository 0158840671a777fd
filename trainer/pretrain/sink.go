package pretrain

import "github.com/micrograph/micrograph/trainer/runfolder"

// Sink receives the records of a run's logged steps: every LogEvery steps
// and any step whose loss is not finite, each once, in order (rank 0's in a
// data-parallel job). The run folder's log.jsonl (runfolder.Log) and the
// progress display are the run's own; Options.Sinks adds others. A new
// sink is a type implementing this, in a file of its own.
type Sink interface {
	// Write takes one step's record; an error ends the run with it.
	Write(r runfolder.LogRecord) error
	// Close ends the records; whoever made the sink closes it (the run
	// closes its own when it ends).
	Close() error
}
