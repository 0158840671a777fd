package runenv

import (
	"os"
	"os/signal"
	"syscall"
)

// SignalWatch turns the first SIGINT or SIGTERM into closing its Stop,
// after first (if set) is called, and a second into ending the process at
// once (status 130), until Close: the one way a job stops on a signal, the
// same while it opens its data as while it trains.
type SignalWatch struct {
	stop    chan struct{}
	signals chan os.Signal
	done    chan struct{}
}

// WatchSignals starts a SignalWatch; first, if not nil, is called at the
// first signal, before Stop closes.
func WatchSignals(first func()) *SignalWatch {
	w := &SignalWatch{stop: make(chan struct{}), signals: make(chan os.Signal, 2), done: make(chan struct{})}
	signal.Notify(w.signals, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case <-w.signals:
		case <-w.done:
			return
		}
		if first != nil {
			first()
		}
		close(w.stop)
		select {
		case <-w.signals:
			os.Exit(130)
		case <-w.done:
		}
	}()
	return w
}

// Stop is closed at the first signal: an Env's Stop.
func (w *SignalWatch) Stop() <-chan struct{} { return w.stop }

// Close ends the watch.
func (w *SignalWatch) Close() {
	signal.Stop(w.signals)
	close(w.done)
}
