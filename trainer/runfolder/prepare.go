package runfolder

import (
	"errors"
	"fmt"
	"os"
)

// Prepare locks the run folder (making it for a new run) and, when
// resuming, loads the newest readable checkpoint (nil if the run has none
// yet) and checks that cfg may continue it. It writes config.json. release
// gives the lock back once the run ends; given the run's error, it first
// removes what this call made for a new run that failed before its first
// checkpoint, so that a corrected command can start it again.
func Prepare(run string, cfg *Config, resume bool) (ck *Checkpoint, release func(*error), err error) {
	if err := CheckRunFolder(run, resume); err != nil {
		return nil, nil, err
	}
	_, statErr := os.Stat(run)
	if resume && statErr != nil {
		return nil, nil, fmt.Errorf("resume: %s holds no run: %w", run, statErr)
	}
	made := statErr != nil // a new run's folder, made here
	if made {
		if err := os.MkdirAll(run, 0o755); err != nil {
			return nil, nil, err
		}
	}
	lock, err := TakeLock(run)
	if err != nil {
		if made {
			os.Remove(run) // empty unless another process took it meanwhile
		}
		return nil, nil, err
	}
	newRun := !resume
	unlock := func(runErr *error) {
		if newRun && *runErr != nil {
			if paths, _ := ListCheckpoints(run); len(paths) == 0 {
				removeNewRun(run, made)
			}
		}
		lock.Release()
	}
	defer func() {
		if err != nil {
			unlock(&err)
		}
	}()

	saved, err := ReadConfig(run)
	exists := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, err
	}
	if !resume {
		if exists {
			newRun = false // not ours to remove
			return nil, nil, fmt.Errorf("folder %s already holds a run: resume it, or choose another folder", run)
		}
		if err := WriteConfig(run, *cfg); err != nil {
			return nil, nil, err
		}
		return nil, unlock, nil
	}
	if !exists {
		return nil, nil, fmt.Errorf("resume: %s holds no run (no config.json)", run)
	}
	// A checkpoint folder that cannot be read must stop the resume: going on
	// from step 0 would truncate the log and prune the real checkpoints.
	paths, err := ListCheckpoints(run)
	if err != nil {
		return nil, nil, fmt.Errorf("resume: %w", err)
	}
	var latest *Checkpoint // ck once returned; freed here on any refusal
	defer func() {
		if err != nil && latest != nil {
			latest.Free()
		}
	}()
	if len(paths) > 0 {
		var skipped []string
		if latest, skipped, err = LatestCheckpoint(run); err != nil {
			return nil, nil, err
		}
		for _, s := range skipped {
			fmt.Fprintf(os.Stderr, "micrograph: skipping an unreadable checkpoint: %s\n", s)
		}
		if d := ShapeOf(latest.Config).differences(ShapeOf(saved), "there", "in "+ConfigPath(run)); d != "" {
			return nil, nil, fmt.Errorf("resume: %s holds a model of another shape than the run's (%s): %s was edited (put it back), or the checkpoint is not this run's (move it out of %s to resume from the one before)",
				latest.Path, d, ConfigPath(run), CheckpointDir(run))
		}
		if k, was, is, differ := firstDifference(latest.Config, saved); differ {
			return nil, nil, fmt.Errorf("resume: %s says %s is %v, but the run's newest checkpoint %s was made with %v: that file was edited (put it back), or the checkpoint is not this run's (move it out of %s)",
				ConfigPath(run), k, is, latest.Path, was, CheckpointDir(run))
		}
		saved = latest.Config
	}
	switch {
	case saved.DataKey == "":
		cfg.DataKey = "" // a run from before data keys resumes as it did
	case saved.DataKey != cfg.DataKey:
		return nil, nil, fmt.Errorf("resume: the data %s has changed since the run began (content %.20s…, the run's %.20s…): resume with the run's data, or start a new run", cfg.Data, cfg.DataKey, saved.DataKey)
	}
	if err := CheckResume(saved, *cfg); err != nil {
		return nil, nil, fmt.Errorf("resume: %w", err)
	}
	if err := WriteConfig(run, *cfg); err != nil {
		return nil, nil, err
	}
	return latest, unlock, nil
}

// removeNewRun removes what a failed new run wrote: the whole folder when
// it made it, else only the run's own files, leaving the user's folder.
func removeNewRun(run string, made bool) {
	if made {
		os.RemoveAll(run)
		return
	}
	for _, p := range []string{ConfigPath(run), LogPath(run), CheckpointDir(run), LockPath(run)} {
		os.RemoveAll(p)
	}
}
