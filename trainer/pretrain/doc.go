// Package pretrain runs MICRO-Graph pre-training (docs/method.md §3): the
// training loop read top to bottom in Run, the data-parallel job, the
// progress line, and Bench, which times the same steps without a run folder.
// The run folder it writes (config, log, checkpoints, lock) is
// trainer/runfolder's.
package pretrain
