package bridge

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"time"
)

// Stats counts what a Bridge did, for a summary.
type Stats struct {
	// Events is the number of deliveries accepted from the emulator.
	Events int
	// EventsByTrigger splits Events by trigger name.
	EventsByTrigger map[string]int
	// Rejected is the number of emulator requests answered 4xx or 503.
	Rejected int
	// Deliveries is the number of HTTP attempts to the functions server,
	// duplicates, redeliveries and retries included.
	Deliveries int
	// Delivered is the number of attempts the function answered 2xx.
	Delivered int
	// Failures is the number of attempts answered non-2xx or not answered.
	Failures int
	// Retries is the number of attempts that were retries.
	Retries int
	// GaveUp is the number of deliveries whose last attempt failed and that
	// will not be retried (Retry off, attempts exhausted, or closed).
	GaveUp int
	// ByStatus counts attempts by HTTP status; 0 counts unreachable.
	ByStatus map[int]int
}

// Stats returns a snapshot of the counters.
func (b *Bridge) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.stats
	s.EventsByTrigger = maps.Clone(b.stats.EventsByTrigger)
	s.ByStatus = maps.Clone(b.stats.ByStatus)
	return s
}

// Idle waits until no delivery is in flight and no redelivery or retry is
// pending, or ctx is done. Events the emulator has not sent yet are not
// counted: wait for Stats().Events to reach what you expect first.
func (b *Bridge) Idle(ctx context.Context) error {
	b.mu.Lock()
	ch := b.idle
	b.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops accepting events (the emulator gets 503), cancels pending
// redeliveries and retries, stops the server started by Start, and waits for
// the deliveries in flight. It is safe to call more than once.
func (b *Bridge) Close() error {
	b.mu.Lock()
	first := !b.closed
	b.closed = true
	for t := range b.timers {
		if t.Stop() {
			b.donePendingLocked()
		}
	}
	clear(b.timers)
	b.mu.Unlock()
	var err error
	if first && b.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = b.srv.Shutdown(ctx)
		cancel()
	}
	_ = b.Idle(context.Background())
	return err
}

func (b *Bridge) addPendingLocked() {
	if b.pending == 0 {
		b.idle = make(chan struct{})
	}
	b.pending++
}

func (b *Bridge) donePendingLocked() {
	b.pending--
	if b.pending == 0 {
		close(b.idle)
	}
}

func (b *Bridge) donePending() {
	b.mu.Lock()
	b.donePendingLocked()
	b.mu.Unlock()
}

// scheduleLocked starts the concurrent copies of ev and its late redelivery.
func (b *Bridge) scheduleLocked(ev *event) {
	b.stats.EventsByTrigger[ev.trigger.Name]++
	for c := 1; c <= b.opts.Duplicates; c++ {
		b.addPendingLocked()
		go func() {
			b.deliver(ev, c, 1)
			b.donePending()
		}()
	}
	if b.opts.RedeliverAfter > 0 {
		late := b.opts.Duplicates + 1
		b.afterLocked(b.opts.RedeliverAfter, func() { b.deliver(ev, late, 1) })
	}
}

// afterLocked runs fn after d unless Close comes first; the run counts as
// pending until fn returns.
func (b *Bridge) afterLocked(d time.Duration, fn func()) {
	b.addPendingLocked()
	var h struct{ t *time.Timer }
	// The callback takes the lock first, so it sees h.t set.
	h.t = time.AfterFunc(d, func() {
		b.mu.Lock()
		delete(b.timers, h.t)
		closed := b.closed
		b.mu.Unlock()
		if !closed {
			fn()
		}
		b.donePending()
	})
	b.timers[h.t] = struct{}{}
}

// deliver makes one attempt of copy c of ev and, when it fails and Retry
// allows, schedules the next attempt.
func (b *Bridge) deliver(ev *event, c, attempt int) {
	start := time.Now()
	status, err := b.post(ev)
	d := time.Since(start)
	ok := err == nil && status/100 == 2

	b.mu.Lock()
	b.stats.Deliveries++
	b.stats.ByStatus[status]++
	if attempt > 1 {
		b.stats.Retries++
	}
	var retryIn time.Duration
	switch {
	case ok:
		b.stats.Delivered++
	case b.opts.Retry && attempt < b.opts.MaxAttempts && !b.closed:
		b.stats.Failures++
		retryIn = b.backoff(attempt)
		b.afterLocked(retryIn, func() { b.deliver(ev, c, attempt+1) })
	default:
		b.stats.Failures++
		b.stats.GaveUp++
	}
	b.mu.Unlock()

	attrs := []any{
		"trigger", ev.trigger.Name, "event_id", ev.id, "document", ev.document,
		"copy", c, "attempt", attempt, "status", status, "duration", d,
	}
	switch {
	case ok:
		b.log.Info("bridge: delivered", attrs...)
	case retryIn > 0:
		b.log.Warn("bridge: delivery failed, will retry", append(attrs, errAttr(err), "retry_in", retryIn)...)
	default:
		b.log.Warn("bridge: delivery failed, giving up", append(attrs, errAttr(err))...)
	}
}

func errAttr(err error) slog.Attr {
	if err == nil {
		return slog.Attr{}
	}
	return slog.String("error", err.Error())
}

// backoff returns the delay before the attempt after attempt.
func (b *Bridge) backoff(attempt int) time.Duration {
	d := b.opts.RetryBackoff
	for i := 1; i < attempt && d < b.opts.MaxRetryBackoff; i++ {
		d *= 2
	}
	return min(d, b.opts.MaxRetryBackoff)
}

// post sends ev to its function and returns the HTTP status (0 when the
// function could not be reached).
func (b *Bridge) post(ev *event) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), b.opts.DeliveryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		b.functionsURL+"/"+ev.trigger.Name, bytes.NewReader(ev.body))
	if err != nil {
		return 0, err
	}
	req.Header = ev.header.Clone()
	resp, err := b.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	return resp.StatusCode, nil
}
