// Package runfolder is the format of a pre-training run's folder: its
// configuration (Config, saved as config.json and in every checkpoint), the
// loss log (log.jsonl), the checkpoints in libtorch's format (writing,
// listing, pruning, reading) and the lock of the process that works on it.
// trainer/pretrain writes it; trainer/diagnose, trainer/report and cmd read it.
package runfolder
