// Package pretrain runs MICRO-Graph pre-training (docs/method.md §3): the
// training loop read top to bottom in Run, the run folder it owns
// (config.json, log.jsonl, checkpoints in libtorch's format, the lock), the
// progress line, and Bench, which times the same steps without a run folder.
package pretrain
