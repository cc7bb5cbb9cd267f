package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fireonce/fireonce/shared/triggeronce/driver"
	"github.com/fireonce/fireonce/shared/triggeronce/redisstore"
	"github.com/fireonce/fireonce/shared/triggeronce/redisstore/redistest"
	"github.com/redis/go-redis/v9"
)

const (
	longLease = time.Minute
	retention = time.Hour
)

// newStore returns a store on the shared test server with keys of its own.
func newStore(t *testing.T) (*redisstore.Store, redis.UniversalClient) {
	t.Helper()
	c := redistest.Shared(t)
	return redisstore.New(c, &redisstore.Options{Prefix: redistest.Prefix(t)}), c
}

func token(t testing.TB) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func claimReq(key driver.Key, owner string, lease time.Duration) driver.ClaimRequest {
	return driver.ClaimRequest{
		Key:       key,
		Meta:      driver.Meta{EventType: "google.cloud.firestore.document.v1.created", Subject: "documents/users/u1/posts/p1"},
		Owner:     owner,
		Lease:     lease,
		Retention: retention,
	}
}

func claim(t *testing.T, s driver.Store, key driver.Key, owner string, lease time.Duration) driver.ClaimResult {
	t.Helper()
	res, err := s.Claim(context.Background(), claimReq(key, owner, lease))
	if err != nil {
		t.Fatalf("Claim(%s, %s): %v", key, owner, err)
	}
	return res
}

// marker reads a marker's hash fields and its remaining TTL.
func marker(t *testing.T, c redis.UniversalClient, s *redisstore.Store, key driver.Key) (map[string]string, time.Duration) {
	t.Helper()
	ctx := context.Background()
	fields, err := c.HGetAll(ctx, s.RedisKey(key)).Result()
	if err != nil {
		t.Fatalf("HGETALL %s: %v", s.RedisKey(key), err)
	}
	ttl, err := c.PTTL(ctx, s.RedisKey(key)).Result()
	if err != nil {
		t.Fatalf("PTTL %s: %v", s.RedisKey(key), err)
	}
	return fields, ttl
}

func redisNow(t *testing.T, c redis.UniversalClient) time.Time {
	t.Helper()
	now, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	return now
}

func TestKeyAndDefaults(t *testing.T) {
	key := driver.Key{EventID: "ev-1", Function: "sendPostNotification"}
	if got, want := redisstore.New(nil, nil).RedisKey(key), "fireonce:trigger:ev%2D1-sendPostNotification"; got != want {
		t.Errorf("RedisKey with default options = %q, want %q", got, want)
	}
	if got, want := redisstore.New(nil, &redisstore.Options{Prefix: "p:"}).RedisKey(key), "p:"+key.ID(); got != want {
		t.Errorf("RedisKey with prefix = %q, want %q", got, want)
	}
}

func TestClaimRecordsMarker(t *testing.T) {
	s, c := newStore(t)
	key := driver.Key{EventID: "ev1", Function: "sendPostNotification"}
	owner := token(t)
	before := redisNow(t, c).Truncate(time.Millisecond)
	res := claim(t, s, key, owner, longLease)
	after := redisNow(t, c)

	if res.Status != driver.Claimed || res.Attempts != 1 {
		t.Fatalf("Claim = %+v, want claimed with 1 attempt", res)
	}
	// The lease ends a lease after the claim, on Redis's clock.
	if res.LeaseExpires.Before(before.Add(longLease)) || res.LeaseExpires.After(after.Add(longLease)) {
		t.Errorf("LeaseExpires = %v, want between %v and %v", res.LeaseExpires, before.Add(longLease), after.Add(longLease))
	}
	fields, ttl := marker(t, c, s, key)
	want := map[string]string{
		"state": "processing", "owner": owner, "attempts": "1",
		"function": "sendPostNotification", "eventId": "ev1",
		"eventType": "google.cloud.firestore.document.v1.created", "subject": "documents/users/u1/posts/p1",
		"leaseUntil": fmt.Sprint(res.LeaseExpires.UnixMilli()),
	}
	for f, v := range want {
		if fields[f] != v {
			t.Errorf("marker field %s = %q, want %q", f, fields[f], v)
		}
	}
	// Kept for the retention after the lease ends.
	if ttl <= retention || ttl > longLease+retention {
		t.Errorf("PTTL = %v, want in (%v, %v]", ttl, retention, longLease+retention)
	}
}

func TestConcurrentClaimsOneOwner(t *testing.T) {
	s, _ := newStore(t)
	key := driver.Key{EventID: "ev-concurrent", Function: "sendPostNotification"}
	const n = 50
	results := make([]driver.ClaimResult, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], errs[i] = s.Claim(context.Background(), claimReq(key, fmt.Sprintf("owner-%d", i), longLease))
		})
	}
	close(start)
	wg.Wait()

	owners := 0
	var lease time.Time
	for i, res := range results {
		if errs[i] != nil {
			t.Fatalf("claim %d: %v", i, errs[i])
		}
		switch res.Status {
		case driver.Claimed:
			owners++
			lease = res.LeaseExpires
		case driver.InProgress:
		default:
			t.Errorf("claim %d: status %v, want claimed or in_progress", i, res.Status)
		}
	}
	if owners != 1 {
		t.Fatalf("%d of %d concurrent claims own the key, want 1", owners, n)
	}
	for i, res := range results {
		if res.Status == driver.InProgress && !res.LeaseExpires.Equal(lease) {
			t.Errorf("claim %d: in progress until %v, want the owner's lease end %v", i, res.LeaseExpires, lease)
		}
	}
}

func TestSameEventDifferentFunctions(t *testing.T) {
	s, _ := newStore(t)
	const n = 50
	errs := make([]error, n)
	statuses := make([]driver.ClaimStatus, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			key := driver.Key{EventID: "ev-shared", Function: fmt.Sprintf("fn%d", i)}
			var res driver.ClaimResult
			res, errs[i] = s.Claim(context.Background(), claimReq(key, "o", longLease))
			statuses[i] = res.Status
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || statuses[i] != driver.Claimed {
			t.Errorf("function %d: status %v, err %v; want claimed", i, statuses[i], errs[i])
		}
	}
}

func TestComplete(t *testing.T) {
	s, c := newStore(t)
	ctx := context.Background()
	key := driver.Key{EventID: "ev", Function: "f"}
	owner := token(t)
	claim(t, s, key, owner, longLease)

	if err := s.Complete(ctx, key, "someone-else", retention); !errors.Is(err, driver.ErrNotOwner) {
		t.Fatalf("Complete by a non-owner = %v, want ErrNotOwner", err)
	}
	if fields, _ := marker(t, c, s, key); fields["state"] != "processing" || fields["owner"] != owner {
		t.Fatalf("after a refused Complete the marker is %v, want it unchanged", fields)
	}
	if err := s.Complete(ctx, key, owner, retention); err != nil {
		t.Fatalf("Complete by the owner: %v", err)
	}
	fields, ttl := marker(t, c, s, key)
	if fields["state"] != "done" || fields["doneAt"] == "" || fields["leaseUntil"] != "" {
		t.Errorf("done marker = %v, want state done with doneAt and no leaseUntil", fields)
	}
	if ttl <= 0 || ttl > retention {
		t.Errorf("done marker PTTL = %v, want in (0, %v]", ttl, retention)
	}
	// A Complete retried after a lost reply succeeds and changes nothing.
	if err := s.Complete(ctx, key, owner, retention); err != nil {
		t.Errorf("second Complete by the owner: %v", err)
	}
	for _, owner := range []string{owner, token(t)} {
		if res := claim(t, s, key, owner, longLease); res.Status != driver.Done || !res.LeaseExpires.IsZero() {
			t.Errorf("Claim after Complete = %+v, want done without a lease", res)
		}
	}
	if err := s.Release(ctx, key, owner); !errors.Is(err, driver.ErrNotOwner) {
		t.Errorf("Release of a done marker = %v, want ErrNotOwner", err)
	}
	if fields, _ := marker(t, c, s, key); fields["state"] != "done" {
		t.Errorf("after Release of a done marker it is %v, want still done", fields)
	}
}

func TestRelease(t *testing.T) {
	s, c := newStore(t)
	ctx := context.Background()
	key := driver.Key{EventID: "ev", Function: "f"}
	owner := token(t)
	claim(t, s, key, owner, longLease)

	if err := s.Release(ctx, key, "someone-else"); !errors.Is(err, driver.ErrNotOwner) {
		t.Fatalf("Release by a non-owner = %v, want ErrNotOwner", err)
	}
	if fields, _ := marker(t, c, s, key); fields["owner"] != owner {
		t.Fatalf("after a refused Release the marker is %v, want it unchanged", fields)
	}
	if err := s.Release(ctx, key, owner); err != nil {
		t.Fatalf("Release by the owner: %v", err)
	}
	if n := c.Exists(ctx, s.RedisKey(key)).Val(); n != 0 {
		t.Fatalf("marker still exists after Release")
	}
	if err := s.Release(ctx, key, owner); !errors.Is(err, driver.ErrNotOwner) {
		t.Errorf("second Release = %v, want ErrNotOwner", err)
	}
	if err := s.Complete(ctx, key, owner, retention); !errors.Is(err, driver.ErrNotOwner) {
		t.Errorf("Complete after Release = %v, want ErrNotOwner", err)
	}
	// The next delivery runs the effect again.
	if res := claim(t, s, key, token(t), longLease); res.Status != driver.Claimed || res.Attempts != 1 {
		t.Errorf("Claim after Release = %+v, want claimed", res)
	}
}

func TestLeaseTakeover(t *testing.T) {
	s, c := newStore(t)
	ctx := context.Background()
	key := driver.Key{EventID: "ev", Function: "f"}
	stale, fresh := token(t), token(t)
	const lease = 50 * time.Millisecond
	first := claim(t, s, key, stale, lease)
	if first.Status != driver.Claimed {
		t.Fatalf("first Claim = %+v, want claimed", first)
	}

	// The stale owner stops answering (a crashed instance). Poll until its
	// lease, measured by Redis, has ended and the fresh caller takes over.
	var res driver.ClaimResult
	for deadline := time.Now().Add(10 * time.Second); ; {
		res = claim(t, s, key, fresh, longLease)
		if res.Status != driver.InProgress {
			break
		}
		if !res.LeaseExpires.Equal(first.LeaseExpires) {
			t.Fatalf("in progress until %v, want the first lease end %v", res.LeaseExpires, first.LeaseExpires)
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease of %v not taken over within 10s", lease)
		}
		time.Sleep(2 * time.Millisecond) // poll interval
	}
	if res.Status != driver.TakenOver || res.Attempts != 2 {
		t.Fatalf("Claim after the lease = %+v, want taken_over with 2 attempts", res)
	}
	if now := redisNow(t, c); res.LeaseExpires.Before(now) {
		t.Errorf("new lease ends %v, before Redis's now %v", res.LeaseExpires, now)
	}

	// The stale owner comes back: it may neither complete nor release.
	if err := s.Complete(ctx, key, stale, retention); !errors.Is(err, driver.ErrNotOwner) {
		t.Errorf("Complete by the stale owner = %v, want ErrNotOwner", err)
	}
	if err := s.Release(ctx, key, stale); !errors.Is(err, driver.ErrNotOwner) {
		t.Errorf("Release by the stale owner = %v, want ErrNotOwner", err)
	}
	if fields, _ := marker(t, c, s, key); fields["state"] != "processing" || fields["owner"] != fresh || fields["attempts"] != "2" {
		t.Fatalf("after the stale owner's attempts the marker is %v, want the new owner's, intact", fields)
	}
	if err := s.Complete(ctx, key, fresh, retention); err != nil {
		t.Fatalf("Complete by the new owner: %v", err)
	}
	if res := claim(t, s, key, stale, longLease); res.Status != driver.Done {
		t.Errorf("Claim after the new owner's Complete = %v, want done", res.Status)
	}
}

func TestClaimRetriedBySameOwner(t *testing.T) {
	s, _ := newStore(t)
	key := driver.Key{EventID: "ev", Function: "f"}
	owner := token(t)
	first := claim(t, s, key, owner, longLease)
	again := claim(t, s, key, owner, longLease)
	if again.Status != driver.Claimed || again.Attempts != 1 || !again.LeaseExpires.Equal(first.LeaseExpires) {
		t.Errorf("Claim retried by its owner = %+v, want %+v", again, first)
	}
}

func TestInvalidRequests(t *testing.T) {
	s, c := newStore(t)
	ctx := context.Background()
	key := driver.Key{EventID: "ev", Function: "f"}
	tests := []struct {
		name string
		req  driver.ClaimRequest
	}{
		{"empty owner", claimReq(key, "", longLease)},
		{"negative lease", claimReq(key, "o", -time.Second)},
		{"empty event ID", claimReq(driver.Key{Function: "f"}, "o", longLease)},
		{"empty function", claimReq(driver.Key{EventID: "ev"}, "o", longLease)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.Claim(ctx, tt.req); err == nil || !strings.HasPrefix(err.Error(), "redisstore: claim") {
				t.Errorf("Claim = %v, want a redisstore: claim error", err)
			}
			if n := c.Exists(ctx, s.RedisKey(tt.req.Key)).Val(); n != 0 {
				t.Errorf("an invalid claim wrote a marker")
			}
		})
	}
	if err := s.Complete(ctx, key, "", retention); !errors.Is(err, driver.ErrNotOwner) {
		t.Errorf("Complete with an empty owner = %v, want ErrNotOwner", err)
	}
}

// A key that holds something else, such as the old lock's string value,
// is an error, never silently overwritten.
func TestForeignValueIsAnError(t *testing.T) {
	s, c := newStore(t)
	ctx := context.Background()
	key := driver.Key{EventID: "ev", Function: "f"}
	c.Set(ctx, s.RedisKey(key), "locked", time.Minute)
	if _, err := s.Claim(ctx, claimReq(key, "o", longLease)); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("Claim over a string value = %v, want a WRONGTYPE error", err)
	}
	c.Del(ctx, s.RedisKey(key))
	c.HSet(ctx, s.RedisKey(key), "state", "bogus")
	if _, err := s.Claim(ctx, claimReq(key, "o", longLease)); err == nil || !strings.Contains(err.Error(), "malformed marker") {
		t.Errorf("Claim over a malformed marker = %v, want a malformed marker error", err)
	}
}

// With an empty script cache (a restarted or flushed server) the scripts
// are sent again.
func TestScriptCacheFlushed(t *testing.T) {
	s, c := newStore(t)
	ctx := context.Background()
	key := driver.Key{EventID: "ev", Function: "f"}
	claim(t, s, key, "o", longLease)
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, key, "o", retention); err != nil {
		t.Fatalf("Complete after SCRIPT FLUSH: %v", err)
	}
}

// Redis down at claim time is an error naming the operation (the Guard
// fails closed), never a status that lets the effect run or skips it.
func TestRedisDown(t *testing.T) {
	srv := redistest.Start(t, nil)
	c := srv.Client(t, &redis.Options{MaxRetries: -1, DialTimeout: time.Second})
	s := redisstore.New(c, nil)
	srv.Kill(t)
	ctx := context.Background()
	key := driver.Key{EventID: "ev", Function: "f"}
	if res, err := s.Claim(ctx, claimReq(key, "o", longLease)); err == nil || !strings.HasPrefix(err.Error(), "redisstore: claim ") {
		t.Errorf("Claim with Redis down = %+v, %v; want a redisstore: claim error", res, err)
	}
	for op, err := range map[string]error{
		"complete": s.Complete(ctx, key, "o", retention),
		"release":  s.Release(ctx, key, "o"),
	} {
		if err == nil || errors.Is(err, driver.ErrNotOwner) || !strings.HasPrefix(err.Error(), "redisstore: "+op+" ") {
			t.Errorf("%s with Redis down = %v, want a redisstore: %s error that is not ErrNotOwner", op, err, op)
		}
	}
}
