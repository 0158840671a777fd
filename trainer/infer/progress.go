package infer

import (
	"fmt"
	"io"
	"time"

	"github.com/micrograph/micrograph/trainer/runenv"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// rowProgress shows how many input rows a pass has done: a counter with the
// rate on a terminal, otherwise a plain line every 30 seconds. The input is a
// stream whose length is not known in advance.
type rowProgress struct {
	w         io.Writer
	bar       *progressbar.ProgressBar
	what      string
	rows      int
	start     time.Time
	lastPrint time.Time
}

func newRowProgress(env runenv.Env, what string) *rowProgress {
	p := &rowProgress{w: io.Discard, what: what, start: time.Now(), lastPrint: time.Now()}
	if env.Progress == nil {
		return p
	}
	p.w = env.Progress
	if f := env.Terminal(); f != nil && term.IsTerminal(int(f.Fd())) {
		p.bar = progressbar.NewOptions64(-1,
			progressbar.OptionSetWriter(f),
			progressbar.OptionSetDescription(what),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("rows"),
			progressbar.OptionThrottle(200*time.Millisecond),
		)
	}
	return p
}

// add counts n more rows done.
func (p *rowProgress) add(n int) {
	p.rows += n
	if p.bar != nil {
		p.bar.Add(n)
		return
	}
	if time.Since(p.lastPrint) >= 30*time.Second {
		p.lastPrint = time.Now()
		fmt.Fprintf(p.w, "micrograph: %s %d rows (%.0f rows/s)\n", p.what, p.rows, float64(p.rows)/time.Since(p.start).Seconds())
	}
}

// finish ends the display.
func (p *rowProgress) finish() {
	if p.bar != nil {
		p.bar.Finish()
		fmt.Fprintln(p.w)
	}
}
