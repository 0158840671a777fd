package pretrain

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/micrograph/micrograph/trainer/metrics"

	"github.com/micrograph/micrograph/internal/atomicfile"
)

// LogRecord is one line of RUNDIR/log.jsonl: the losses of one optimiser
// step (docs/method.md §3), its epoch (from 1) and the throughput since the
// previous line.
type LogRecord struct {
	Step          int64         `json:"step"`
	Epoch         int           `json:"epoch"`
	Loss          metrics.Value `json:"loss"`
	NodeMot       metrics.Value `json:"node_mot"`
	MotSub        metrics.Value `json:"mot_sub"`
	Reg           metrics.Value `json:"reg"`
	Contra        metrics.Value `json:"contra"`
	Subgraphs     int64         `json:"subgraphs"`
	MoleculesPerS metrics.Value `json:"molecules_per_s"`
	LR            metrics.Value `json:"lr"`
	Skipped       bool          `json:"skipped,omitempty"` // a non-finite loss whose update was skipped
}

// LogPath is RUNDIR/log.jsonl.
func LogPath(run string) string { return filepath.Join(run, "log.jsonl") }

// ReadLog reads RUNDIR/log.jsonl. A torn last line (a crash mid-write) is
// left out; a malformed line elsewhere is an error.
func ReadLog(run string) ([]LogRecord, error) {
	b, err := os.ReadFile(LogPath(run))
	if err != nil {
		return nil, err
	}
	var out []LogRecord
	lines := bytes.Split(b, []byte("\n"))
	for i, line := range lines {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r LogRecord
		if err := json.Unmarshal(line, &r); err != nil {
			if i == len(lines)-1 {
				break // torn by a crash: it was never finished
			}
			return nil, fmt.Errorf("%s:%d: %w", LogPath(run), i+1, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// runLog appends records to RUNDIR/log.jsonl.
type runLog struct {
	f *os.File
	w *bufio.Writer
}

// openRunLog opens the log for appending after dropping every record past
// step upTo: a resumed run recomputes those steps and logs them again.
func openRunLog(run string, upTo int64) (*runLog, error) {
	path := LogPath(run)
	if old, err := ReadLog(run); err == nil {
		var buf bytes.Buffer
		for _, r := range old {
			if r.Step <= upTo {
				writeRecord(&buf, r)
			}
		}
		if err := atomicfile.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			return nil, err
		}
	} else if !os.IsNotExist(err) {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	return &runLog{f: f, w: bufio.NewWriter(f)}, nil
}

func writeRecord(w io.Writer, r LogRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// Write appends one record and hands it to the operating system, so that a
// killed process loses at most the line being written.
func (l *runLog) Write(r LogRecord) error {
	if err := writeRecord(l.w, r); err != nil {
		return err
	}
	return l.w.Flush()
}

// Close syncs and closes the log.
func (l *runLog) Close() error {
	if err := l.w.Flush(); err != nil {
		l.f.Close()
		return err
	}
	if err := l.f.Sync(); err != nil {
		l.f.Close()
		return err
	}
	return l.f.Close()
}
