package bench

import (
	"context"
	"fmt"
	"time"
)

// latencyCase measures one delivery at a time: its time and the calls it
// made (take returns the calls since its last call; every latency case runs
// alone, so the calls are this delivery's).
type latencyCase struct {
	Result
	take    func() []string
	op      func(ctx context.Context, n int) error
	n       int // deliveries so far, warm-up included: each gets a new event
	samples []sample
	total   int // samples over all rounds
	rounds  int
}

func (c *latencyCase) res() *Result { return &c.Result }

func (c *latencyCase) warm(ctx context.Context, n int) error {
	for range n {
		if _, err := c.once(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (c *latencyCase) once(ctx context.Context) (sample, error) {
	c.n++
	c.take()
	start := time.Now()
	err := c.op(ctx, c.n)
	s := sample{d: time.Since(start), calls: c.take()}
	return s, err
}

func (c *latencyCase) round(ctx context.Context, r int) error {
	for range share(c.total, c.rounds, r) {
		c.step(ctx)
	}
	return nil
}

// step measures one delivery; a failed one is counted, not sampled.
func (c *latencyCase) step(ctx context.Context) {
	s, err := c.once(ctx)
	if err != nil {
		c.Errors++
		if c.FirstError == "" {
			c.FirstError = err.Error()
		}
		return
	}
	c.samples = append(c.samples, s)
}

func (c *latencyCase) finish(context.Context) *Result {
	fillLatency(&c.Result, c.samples)
	if c.Check == "" {
		c.Check = fmt.Sprintf("%d/%d executed once", len(c.samples), len(c.samples)+c.Errors)
	}
	return &c.Result
}
