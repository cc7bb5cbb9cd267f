package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fireonce/fireonce/shared/triggeronce/driver"
	"github.com/fireonce/fireonce/shared/triggeronce/redisstore"
	"github.com/fireonce/fireonce/shared/triggeronce/redisstore/redistest"
	"github.com/redis/go-redis/v9"
)

// deliver is what the Guard does with one delivery, retried the way the
// platform retries a failed one: claim; on a store error or a live lease
// retry; on done stop; when owned run the effect, then complete (retrying
// while Redis is unreachable, which the effect's lease allows). It returns
// once the key is done, or fails t at the deadline.
func deliver(t *testing.T, s driver.Store, key driver.Key, lease time.Duration, effect func(), storeErrors *atomic.Int64) {
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	retry := func(what string, err error) bool {
		if time.Now().After(deadline) {
			t.Errorf("%s: %s: still failing after a minute: %v", key, what, err)
			return false
		}
		time.Sleep(5 * time.Millisecond) // the platform's backoff, shortened
		return true
	}
	for {
		owner := token(t)
		res, err := s.Claim(ctx, claimReq(key, owner, lease))
		if err != nil {
			storeErrors.Add(1)
			if retry("claim", err) {
				continue
			}
			return
		}
		switch res.Status {
		case driver.Done:
			return
		case driver.InProgress:
			if retry("in progress", nil) {
				continue
			}
			return
		}
		effect()
		for {
			err := s.Complete(ctx, key, owner, retention)
			if err == nil {
				return
			}
			if errors.Is(err, driver.ErrNotOwner) {
				t.Errorf("%s: the lease was lost during the effect: %v", key, err)
				return
			}
			storeErrors.Add(1)
			if !retry("complete", err) {
				return
			}
		}
	}
}

// TestRedisRestartMidLease kills Redis (SIGKILL, AOF with appendfsync
// always) while effects are running under their leases, and restarts it.
// While it is down every claim and completion fails (nothing runs that
// could not be recorded); once it is back the leases are still there,
// every in-flight effect completes, and over all keys no effect ran twice
// and none was lost.
func TestRedisRestartMidLease(t *testing.T) {
	srv := redistest.Start(t, &redistest.Options{AppendOnly: true})
	c := srv.Client(t, &redis.Options{MaxRetries: -1, DialTimeout: time.Second})
	s := redisstore.New(c, nil)
	ctx := context.Background()

	const (
		keys    = 20
		held    = 5 // effects of keys 0..held-1 block until Redis is back
		dups    = 3 // deliveries of each key, concurrent
		leaseOK = time.Minute
	)
	var (
		effects     [keys]atomic.Int64
		storeErrors atomic.Int64
		midEffect   sync.WaitGroup
		restarted   = make(chan struct{})
		wg          sync.WaitGroup
	)
	midEffect.Add(held)
	keyOf := func(i int) driver.Key {
		return driver.Key{EventID: fmt.Sprintf("ev%d", i), Function: "sendPostNotification"}
	}
	for i := range keys {
		for range dups {
			wg.Go(func() {
				deliver(t, s, keyOf(i), leaseOK, func() {
					if effects[i].Add(1) == 1 && i < held {
						midEffect.Done()
						<-restarted
					}
				}, &storeErrors)
			})
		}
	}

	// A crashed instance's claim whose short lease ends while Redis is down:
	// after the restart a delivery takes it over.
	crashed := driver.Key{EventID: "ev-crashed", Function: "sendPostNotification"}
	if res := claim(t, s, crashed, token(t), 200*time.Millisecond); res.Status != driver.Claimed {
		t.Fatalf("claim of %s = %v", crashed, res.Status)
	}

	midEffect.Wait()
	leases := map[driver.Key]time.Time{}
	for i := range held {
		res := claim(t, s, keyOf(i), token(t), leaseOK)
		if res.Status != driver.InProgress {
			t.Fatalf("before the restart, claim of %s = %v, want in_progress", keyOf(i), res.Status)
		}
		leases[keyOf(i)] = res.LeaseExpires
	}

	srv.Kill(t)
	probe := driver.Key{EventID: "ev-probe", Function: "sendPostNotification"}
	if res, err := s.Claim(ctx, claimReq(probe, token(t), leaseOK)); err == nil {
		t.Errorf("Claim with Redis down = %+v, want an error (fail closed)", res)
	}
	if err := s.Complete(ctx, keyOf(0), "anyone", retention); err == nil || errors.Is(err, driver.ErrNotOwner) {
		t.Errorf("Complete with Redis down = %v, want a store error", err)
	}
	srv.Restart(t)
	// go-redis stops dialing for a while after repeated dial errors; wait
	// until this client reaches the server again.
	for deadline := time.Now().Add(30 * time.Second); c.Ping(ctx).Err() != nil; {
		if time.Now().After(deadline) {
			t.Fatalf("the client does not reach the restarted server: %v", c.Ping(ctx).Err())
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}

	// The leases survived the restart unchanged, the probe left nothing.
	for k, lease := range leases {
		res := claim(t, s, k, token(t), leaseOK)
		if res.Status != driver.InProgress || !res.LeaseExpires.Equal(lease) {
			t.Errorf("after the restart, claim of %s = %v until %v; want in_progress until %v", k, res.Status, res.LeaseExpires, lease)
		}
		if err := s.Release(ctx, k, "someone-else"); !errors.Is(err, driver.ErrNotOwner) {
			t.Errorf("after the restart, Release of %s by a non-owner = %v, want ErrNotOwner", k, err)
		}
	}
	if n := c.Exists(ctx, s.RedisKey(probe)).Val(); n != 0 {
		t.Errorf("a claim made while Redis was down left a marker")
	}
	close(restarted)

	var crashedEffects atomic.Int64
	deliver(t, s, crashed, leaseOK, func() { crashedEffects.Add(1) }, &storeErrors)
	wg.Wait()

	for i := range keys {
		if n := effects[i].Load(); n != 1 {
			t.Errorf("effect of %s ran %d times, want once", keyOf(i), n)
		}
		if res := claim(t, s, keyOf(i), token(t), leaseOK); res.Status != driver.Done {
			t.Errorf("after the run, claim of %s = %v, want done", keyOf(i), res.Status)
		}
	}
	if n := crashedEffects.Load(); n != 1 {
		t.Errorf("the crashed claim's effect ran %d times after the restart, want once", n)
	}
	if fields, _ := marker(t, c, s, crashed); fields["state"] != "done" || fields["attempts"] != "2" {
		t.Errorf("crashed key's marker = %v, want done after 2 attempts", fields)
	}
	t.Logf("%d deliveries of %d keys; %d claims or completions failed while Redis was down and were retried",
		keys*dups+1, keys+1, storeErrors.Load())
}
