package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fireonce/fireonce/shared/triggeronce"
	"github.com/fireonce/fireonce/shared/triggeronce/redisstore"
)

// redisCounter is a go-redis hook that records every command sent (a
// pipeline counts once: one round trip).
type redisCounter struct {
	mu    sync.Mutex
	calls []string
}

func (c *redisCounter) add(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, name)
}

// Take returns the commands sent since the last Take and forgets them.
func (c *redisCounter) Take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls := c.calls
	c.calls = nil
	return calls
}

func (c *redisCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *redisCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.add(cmd.Name())
		return next(ctx, cmd)
	}
}

func (c *redisCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.add(fmt.Sprintf("pipeline(%d)", len(cmds)))
		return next(ctx, cmds)
	}
}

var _ redis.Hook = (*redisCounter)(nil)

// redisCases are case 7: Guard.Run on the Redis store, the seed's Redis
// lock, and the storm on Redis. close closes their client.
func (e *env) redisCases(ctx context.Context) (cases []benchCase, close func(), err error) {
	opts := *e.cfg.Redis
	rdb := redis.NewClient(&opts)
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		return nil, nil, fmt.Errorf("bench: redis at %s: %w", opts.Addr, err)
	}
	calls := &redisCounter{}
	rdb.AddHook(calls)
	prefix := "fireonce:bench:" + e.run + ":"
	g := triggeronce.New(redisstore.New(rdb, &redisstore.Options{Prefix: prefix}), quiet)
	c := func(id, name string, op func(ctx context.Context, n int) error) *latencyCase {
		return &latencyCase{Result: Result{ID: id, Name: name, Backend: "redis", Baseline: "1", Unit: "delivery"},
			take: calls.Take, op: op, total: e.cfg.Samples, rounds: e.cfg.Rounds}
	}
	cases = []benchCase{
		c("7a", "Guard.Run around a no-op on the Redis store", func(ctx context.Context, n int) error {
			key, meta := e.key("7a", n, "sendPostNotification")
			return executed(g.Run(ctx, key, meta, func(context.Context) error { return nil }))
		}),
		c("7b", "seed Redis lock: SET NX EX 30, no-op, DEL", func(ctx context.Context, n int) error {
			// Keyed by document, as the seed was: one post per event here.
			lock := fmt.Sprintf("%slock:firestore:item:%s-%d", prefix, e.run, n)
			ok, err := rdb.SetNX(ctx, lock, "locked", 30*time.Second).Result()
			if err != nil {
				return err
			}
			if !ok {
				return errDuplicate
			}
			return rdb.Del(ctx, lock).Err()
		}),
		e.stormCase("7c", "redis", g, calls.Take),
	}
	return cases, func() { rdb.Close() }, nil
}
