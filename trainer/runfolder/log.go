package runfolder

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/micrograph/micrograph/trainer/metrics"

	"github.com/micrograph/micrograph/internal/atomicfile"
	"github.com/micrograph/micrograph/internal/inputfile"
)

// LogRecord is one line of RUNDIR/log.jsonl: the loss of one optimiser step
// and its unweighted parts under the objective's names (docs/method.md §3.2,
// §12), its epoch (from 1) and the throughput since the previous line. A
// line holds, in order: step, epoch, loss, each part, subgraphs,
// molecules_per_s, lr and, for a skipped update, skipped.
type LogRecord struct {
	Step          int64
	Epoch         int
	Loss          metrics.Value
	Parts         []LossPart // in the objective's PartNames order
	Subgraphs     int64
	MoleculesPerS metrics.Value
	LR            metrics.Value
	Skipped       bool // a non-finite loss whose update was skipped
}

// LossPart is one named part of a step's loss.
type LossPart struct {
	Name  string
	Value metrics.Value
}

// Part is the value of the part named name, NaN when the record has none.
func (r LogRecord) Part(name string) metrics.Value {
	for _, p := range r.Parts {
		if p.Name == name {
			return p.Value
		}
	}
	return metrics.Value(math.NaN())
}

// MarshalJSON writes the record's fields in their documented order.
func (r LogRecord) MarshalJSON() ([]byte, error) {
	type field struct {
		name  string
		value any
	}
	fields := []field{{"step", r.Step}, {"epoch", r.Epoch}, {"loss", r.Loss}}
	for _, p := range r.Parts {
		fields = append(fields, field{p.Name, p.Value})
	}
	fields = append(fields, field{"subgraphs", r.Subgraphs}, field{"molecules_per_s", r.MoleculesPerS}, field{"lr", r.LR})
	if r.Skipped {
		fields = append(fields, field{"skipped", true})
	}
	var b bytes.Buffer
	sep := byte('{')
	for _, f := range fields {
		b.WriteByte(sep)
		sep = ','
		name, _ := json.Marshal(f.name)
		value, err := json.Marshal(f.value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
		b.Write(name)
		b.WriteByte(':')
		b.Write(value)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads a line; every key other than the fixed ones is a loss
// part, kept in the line's order.
func (r *LogRecord) UnmarshalJSON(b []byte) error {
	*r = LogRecord{}
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("a log line must be a JSON object")
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := t.(string)
		var dst any
		switch key {
		case "step":
			dst = &r.Step
		case "epoch":
			dst = &r.Epoch
		case "loss":
			dst = &r.Loss
		case "subgraphs":
			dst = &r.Subgraphs
		case "molecules_per_s":
			dst = &r.MoleculesPerS
		case "lr":
			dst = &r.LR
		case "skipped":
			dst = &r.Skipped
		default:
			r.Parts = append(r.Parts, LossPart{Name: key})
			dst = &r.Parts[len(r.Parts)-1].Value
		}
		if err := dec.Decode(dst); err != nil {
			return fmt.Errorf("%s: %w", inputfile.Quote(key), inputfile.Explain(err))
		}
	}
	if _, err := dec.Token(); err != nil {
		return err
	}
	return nil
}

// LogPath is RUNDIR/log.jsonl.
func LogPath(run string) string { return filepath.Join(run, "log.jsonl") }

// MaxLogLine bounds a line of log.jsonl: a record is a few hundred bytes.
const MaxLogLine = 64 << 10

// ReadLog reads RUNDIR/log.jsonl. A torn last line (a crash mid-write, so
// without its line break) is left out; a malformed line elsewhere, or one
// longer than MaxLogLine, is an error naming the line.
func ReadLog(run string) ([]LogRecord, error) {
	path := LogPath(run)
	f, err := inputfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, MaxLogLine+1)
	var out []LogRecord
	for n := 1; ; n++ {
		line, err := br.ReadSlice('\n')
		switch {
		case err == bufio.ErrBufferFull:
			return nil, fmt.Errorf("%s:%d: a line longer than %d bytes: not a log of micrograph pretrain", path, n, MaxLogLine)
		case err == io.EOF && len(bytes.TrimSpace(line)) == 0:
			return out, nil
		case err != nil && err != io.EOF:
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r LogRecord
		if uerr := json.Unmarshal(line, &r); uerr != nil {
			if err == io.EOF {
				return out, nil // torn by a crash: it was never finished
			}
			return nil, fmt.Errorf("%s:%d: %w", path, n, inputfile.Explain(uerr))
		}
		out = append(out, r)
		if err == io.EOF {
			return out, nil
		}
	}
}

// Log appends records to RUNDIR/log.jsonl.
type Log struct {
	f *os.File
	w *bufio.Writer
}

// OpenLog opens the log for appending after dropping every record past
// step upTo: a resumed run recomputes those steps and logs them again.
func OpenLog(run string, upTo int64) (*Log, error) {
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
	return &Log{f: f, w: bufio.NewWriter(f)}, nil
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
func (l *Log) Write(r LogRecord) error {
	if err := writeRecord(l.w, r); err != nil {
		return err
	}
	return l.w.Flush()
}

// Close syncs and closes the log.
func (l *Log) Close() error {
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
