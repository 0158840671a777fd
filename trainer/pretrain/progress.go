package pretrain

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/micrograph/micrograph/trainer/runfolder"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress shows how a run advances, a Sink: a progress bar (epoch, batch,
// molecules/s, ETA, loss parts) when the output is a terminal, otherwise a
// plain line every 30 seconds and at the end of each epoch.
type progress struct {
	w                io.Writer
	bar              *progressbar.ProgressBar
	first, total     int64 // steps done at the start; steps in all
	perEpoch         int64
	start, lastPrint time.Time
}

func newProgress(f *os.File, first, total, perEpoch int64) *progress {
	p := &progress{w: io.Discard, first: first, total: total, perEpoch: perEpoch, start: time.Now(), lastPrint: time.Now()}
	if f == nil {
		return p
	}
	p.w = f
	if term.IsTerminal(int(f.Fd())) {
		p.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(f),
			progressbar.OptionSetWidth(24),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionShowDescriptionAtLineEnd(),
		)
		p.bar.Set64(first)
	}
	return p
}

// printf writes a message line, keeping the bar below it.
func (p *progress) printf(format string, args ...any) {
	if p.bar != nil {
		p.bar.Clear()
	}
	fmt.Fprintf(p.w, format+"\n", args...)
}

// Write shows a logged step.
func (p *progress) Write(r runfolder.LogRecord) error {
	desc := fmt.Sprintf("epoch %d batch %d | %.0f mol/s | loss %.4f",
		r.Epoch, (r.Step-1)%p.perEpoch+1, float64(r.MoleculesPerS), float64(r.Loss))
	for _, part := range r.Parts {
		desc += fmt.Sprintf(" %s %.3f", part.Name, float64(part.Value))
	}
	if p.bar != nil {
		p.bar.Describe(desc)
		p.bar.Set64(r.Step)
		return nil
	}
	endOfEpoch := r.Step%p.perEpoch == 0
	if time.Since(p.lastPrint) < 30*time.Second && !endOfEpoch && r.Step != p.total {
		return nil
	}
	p.lastPrint = time.Now()
	eta := "?"
	if done := r.Step - p.first; done > 0 {
		left := time.Duration(float64(time.Since(p.start)) / float64(done) * float64(p.total-r.Step))
		eta = left.Round(time.Second).String()
	}
	fmt.Fprintf(p.w, "step %d/%d %s | eta %s\n", r.Step, p.total, desc, eta)
	return nil
}

// Close finishes the bar, leaving it on its line.
func (p *progress) Close() error {
	if p.bar != nil {
		p.bar.Finish()
		fmt.Fprintln(p.w)
	}
	return nil
}
