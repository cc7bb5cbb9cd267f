package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fireonce/fireonce/shared/triggeronce"
)

// stormCase delivers one event StormSize times at once to Guard.Run: the
// effect must run once per storm. A sample is a whole storm, from the moment
// every delivery is released until the last one has returned.
type stormCase struct {
	Result
	e       *env
	g       *triggeronce.Guard
	take    func() []string
	n       int
	samples []sample
	// executions counts effects run, outcomes the deliveries' outcomes.
	executions int
	outcomes   map[triggeronce.Outcome]int
}

func (e *env) stormCase(id, backend string, g *triggeronce.Guard, take func() []string) *stormCase {
	return &stormCase{
		Result: Result{ID: id, Backend: backend, Baseline: "1", Unit: fmt.Sprintf("storm of %d", e.cfg.StormSize),
			Name: fmt.Sprintf("duplicate storm: %d concurrent deliveries of one event to Guard.Run", e.cfg.StormSize)},
		e: e, g: g, take: take, outcomes: map[triggeronce.Outcome]int{},
	}
}

func (c *stormCase) res() *Result { return &c.Result }

func (c *stormCase) warm(ctx context.Context, n int) error {
	for range max(n/10, 1) {
		if _, _, _, err := c.storm(ctx); err != nil {
			return err
		}
	}
	return nil
}

// storm returns the sample, how often the effect ran, and the outcomes.
func (c *stormCase) storm(ctx context.Context) (sample, int, map[triggeronce.Outcome]int, error) {
	c.n++
	key, meta := c.e.key(c.ID, c.n, "sendPostNotification")
	var (
		executions atomic.Int32
		wg         sync.WaitGroup
		mu         sync.Mutex
		firstErr   error
	)
	outcomes := map[triggeronce.Outcome]int{}
	gate := make(chan struct{})
	for range c.e.cfg.StormSize {
		wg.Go(func() {
			<-gate
			o, err := c.g.Run(ctx, key, meta, func(context.Context) error {
				executions.Add(1)
				return nil
			})
			mu.Lock()
			defer mu.Unlock()
			outcomes[o]++
			if err != nil && !errors.Is(err, triggeronce.ErrInProgress) && firstErr == nil {
				firstErr = err
			}
		})
	}
	c.take()
	start := time.Now()
	close(gate)
	wg.Wait()
	s := sample{d: time.Since(start), calls: c.take()}
	return s, int(executions.Load()), outcomes, firstErr
}

func (c *stormCase) round(ctx context.Context, r int) error {
	for range share(c.e.cfg.Storms, c.e.cfg.Rounds, r) {
		s, executions, outcomes, err := c.storm(ctx)
		if err != nil {
			c.Errors++
			if c.FirstError == "" {
				c.FirstError = err.Error()
			}
		}
		c.samples = append(c.samples, s)
		c.executions += executions
		for o, k := range outcomes {
			c.outcomes[o] += k
		}
	}
	return nil
}

func (c *stormCase) finish(context.Context) *Result {
	fillLatency(&c.Result, c.samples)
	verdict := "ok"
	if c.executions != len(c.samples) {
		verdict = "FAIL"
	}
	c.Check = fmt.Sprintf("%s: effect ran %d times in %d storms; outcomes %d executed, %d in_progress, %d duplicate",
		verdict, c.executions, len(c.samples), c.outcomes[triggeronce.OutcomeExecuted],
		c.outcomes[triggeronce.OutcomeInProgress], c.outcomes[triggeronce.OutcomeDuplicate])
	return &c.Result
}
