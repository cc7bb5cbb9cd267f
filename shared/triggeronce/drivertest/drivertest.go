// Package drivertest holds the conformance suite every triggeronce store must
// pass (the shape of gocloud.dev's docstore/drivertest).
//
// A store that passes it gives triggeronce.Guard what it relies on: exactly
// one of any number of concurrent claims of a key owns it; a done marker is
// final; a live lease is respected and an expired one is taken over; only the
// current owner may complete or release (fencing); and keys that differ never
// share a marker.
package drivertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fireonce/fireonce/shared/triggeronce/driver"
)

const (
	// longLease never expires during a test.
	longLease = 10 * time.Minute
	// shortLease is the lease of a holder a test lets expire. The suite
	// polls for its expiry with a deadline; it never sleeps for an outcome.
	shortLease = time.Second
	// expiryDeadline bounds the wait for a short lease to expire.
	expiryDeadline = 20 * time.Second
	pollInterval   = 100 * time.Millisecond
	retention      = time.Hour
	concurrency    = 50
)

// RunConformanceTests runs the suite against stores made by newStore.
//
// newStore is called once per subtest, from parallel subtests, with that
// subtest's t; register cleanup with t.Cleanup. Stores may share a backend
// (one database, one Redis): every subtest uses keys no other subtest uses.
// Lease expiry is measured on the store's clock, so the suite needs a store
// that honours leases of one second.
func RunConformanceTests(t *testing.T, newStore func(t *testing.T) driver.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s driver.Store)
	}{
		{"ClaimFresh", testClaimFresh},
		{"InProgressUnderLiveLease", testInProgressUnderLiveLease},
		{"CompleteThenDuplicate", testCompleteThenDuplicate},
		{"DoneIsFinal", testDoneIsFinal},
		{"ReleaseThenReclaim", testReleaseThenReclaim},
		{"NonOwnerUnderLiveLease", testNonOwnerUnderLiveLease},
		{"MissingKey", testMissingKey},
		{"TakeoverAfterExpiredLease", testTakeoverAfterExpiredLease},
		{"TakeoverThenRelease", testTakeoverThenRelease},
		{"ConcurrentClaims", testConcurrentClaims},
		{"FunctionsAreIndependent", testFunctionsAreIndependent},
		{"KeysThatLookAlike", testKeysThatLookAlike},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
	t.Run("KeyID", func(t *testing.T) { t.Parallel(); testKeyID(t) })
}

// newKey returns a key no other test uses.
func newKey(t *testing.T) driver.Key {
	return driver.Key{EventID: "evt-" + randomHex(t, 8), Function: "fn"}
}

// newOwner returns an owner token unique to one attempt, as the Guard does.
func newOwner(t *testing.T) string { return "owner-" + randomHex(t, 8) }

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("random: %v", err)
	}
	return hex.EncodeToString(b)
}

func request(key driver.Key, owner string, lease time.Duration) driver.ClaimRequest {
	return driver.ClaimRequest{
		Key:       key,
		Meta:      driver.Meta{EventType: "test.event.v1", Subject: "documents/test/" + key.EventID},
		Owner:     owner,
		Lease:     lease,
		Retention: retention,
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// claim claims key for owner and checks the status is want.
func claim(t *testing.T, s driver.Store, key driver.Key, owner string, lease time.Duration, want driver.ClaimStatus) driver.ClaimResult {
	t.Helper()
	res, err := s.Claim(ctx(t), request(key, owner, lease))
	if err != nil {
		t.Fatalf("Claim(%s, %s): %v", key, owner, err)
	}
	if res.Status != want {
		t.Fatalf("Claim(%s, %s) = %v, want %v", key, owner, res.Status, want)
	}
	checkResult(t, res)
	return res
}

// checkResult checks the fields of a ClaimResult agree with its status.
func checkResult(t *testing.T, res driver.ClaimResult) {
	t.Helper()
	switch res.Status {
	case driver.Claimed, driver.TakenOver:
		if res.Attempts < 1 {
			t.Errorf("%v: Attempts = %d, want >= 1", res.Status, res.Attempts)
		}
		if res.LeaseExpires.IsZero() {
			t.Errorf("%v: LeaseExpires is zero", res.Status)
		}
	case driver.InProgress:
		if res.Attempts != 0 {
			t.Errorf("in_progress: Attempts = %d, want 0 (the caller owns nothing)", res.Attempts)
		}
		if res.LeaseExpires.IsZero() {
			t.Errorf("in_progress: LeaseExpires of the holder is zero")
		}
	case driver.Done:
		if res.Attempts != 0 {
			t.Errorf("done: Attempts = %d, want 0 (the caller owns nothing)", res.Attempts)
		}
		if !res.LeaseExpires.IsZero() {
			t.Errorf("done: LeaseExpires = %v, want zero", res.LeaseExpires)
		}
	default:
		t.Errorf("unknown status %d", res.Status)
	}
	if res.Status.Owns() != (res.Status == driver.Claimed || res.Status == driver.TakenOver) {
		t.Errorf("%v.Owns() = %v", res.Status, res.Status.Owns())
	}
}

func complete(t *testing.T, s driver.Store, key driver.Key, owner string) error {
	t.Helper()
	return s.Complete(ctx(t), key, owner, retention)
}

func release(t *testing.T, s driver.Store, key driver.Key, owner string) error {
	t.Helper()
	return s.Release(ctx(t), key, owner)
}

func mustSucceed(t *testing.T, op string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v, want nil", op, err)
	}
}

func mustBeNotOwner(t *testing.T, op string, err error) {
	t.Helper()
	if !errors.Is(err, driver.ErrNotOwner) {
		t.Fatalf("%s: %v, want driver.ErrNotOwner", op, err)
	}
}

func testClaimFresh(t *testing.T, s driver.Store) {
	key := newKey(t)
	before := time.Now()
	res := claim(t, s, key, newOwner(t), longLease, driver.Claimed)
	if res.Attempts != 1 {
		t.Errorf("Attempts = %d, want 1", res.Attempts)
	}
	// The lease is measured on the store's clock; allow generous skew.
	const skew = 5 * time.Minute
	if lo, hi := before.Add(longLease-skew), time.Now().Add(longLease+skew); res.LeaseExpires.Before(lo) || res.LeaseExpires.After(hi) {
		t.Errorf("LeaseExpires = %v, want about now + %v", res.LeaseExpires, longLease)
	}
}

func testInProgressUnderLiveLease(t *testing.T, s driver.Store) {
	key := newKey(t)
	a := newOwner(t)
	held := claim(t, s, key, a, longLease, driver.Claimed)
	for range 3 {
		got := claim(t, s, key, newOwner(t), longLease, driver.InProgress)
		if d := got.LeaseExpires.Sub(held.LeaseExpires); d < -time.Second || d > time.Second {
			t.Errorf("in_progress LeaseExpires = %v, want the holder's %v", got.LeaseExpires, held.LeaseExpires)
		}
	}
	// The holder's own claim does not renew or steal anything either.
	claim(t, s, key, newOwner(t), shortLease, driver.InProgress)
	mustSucceed(t, "Complete by the holder", complete(t, s, key, a))
}

func testCompleteThenDuplicate(t *testing.T, s driver.Store) {
	key := newKey(t)
	a := newOwner(t)
	claim(t, s, key, a, longLease, driver.Claimed)
	mustSucceed(t, "Complete by the owner", complete(t, s, key, a))
	claim(t, s, key, newOwner(t), longLease, driver.Done)
	claim(t, s, key, a, longLease, driver.Done)
	claim(t, s, key, newOwner(t), shortLease, driver.Done)
}

func testDoneIsFinal(t *testing.T, s driver.Store) {
	key := newKey(t)
	a := newOwner(t)
	claim(t, s, key, a, longLease, driver.Claimed)
	mustSucceed(t, "Complete by the owner", complete(t, s, key, a))
	b := newOwner(t)
	mustBeNotOwner(t, "Complete of a done marker by a non-owner", complete(t, s, key, b))
	mustBeNotOwner(t, "Release of a done marker by a non-owner", release(t, s, key, b))
	mustBeNotOwner(t, "Release of a done marker by its completer", release(t, s, key, a))
	claim(t, s, key, newOwner(t), longLease, driver.Done)
}

func testReleaseThenReclaim(t *testing.T, s driver.Store) {
	key := newKey(t)
	a := newOwner(t)
	claim(t, s, key, a, longLease, driver.Claimed)
	mustSucceed(t, "Release by the owner", release(t, s, key, a))
	mustBeNotOwner(t, "Release twice", release(t, s, key, a))
	mustBeNotOwner(t, "Complete after Release", complete(t, s, key, a))

	b := newOwner(t)
	res := claim(t, s, key, b, longLease, driver.Claimed)
	if !res.Status.Owns() {
		t.Fatalf("re-claim after release does not own the key")
	}
	mustBeNotOwner(t, "Complete by the released owner", complete(t, s, key, a))
	mustBeNotOwner(t, "Release by the released owner", release(t, s, key, a))
	claim(t, s, key, newOwner(t), longLease, driver.InProgress)
	mustSucceed(t, "Complete by the new owner", complete(t, s, key, b))
	claim(t, s, key, newOwner(t), longLease, driver.Done)
}

func testNonOwnerUnderLiveLease(t *testing.T, s driver.Store) {
	key := newKey(t)
	a, b := newOwner(t), newOwner(t)
	claim(t, s, key, a, longLease, driver.Claimed)
	mustBeNotOwner(t, "Complete by a non-owner", complete(t, s, key, b))
	mustBeNotOwner(t, "Release by a non-owner", release(t, s, key, b))
	claim(t, s, key, newOwner(t), longLease, driver.InProgress)
	mustSucceed(t, "Complete by the owner", complete(t, s, key, a))
	claim(t, s, key, newOwner(t), longLease, driver.Done)
}

func testMissingKey(t *testing.T, s driver.Store) {
	key := newKey(t)
	a := newOwner(t)
	mustBeNotOwner(t, "Complete of a missing key", complete(t, s, key, a))
	mustBeNotOwner(t, "Release of a missing key", release(t, s, key, a))
	// Neither call left a marker behind.
	res := claim(t, s, key, a, longLease, driver.Claimed)
	if res.Attempts != 1 {
		t.Errorf("Attempts = %d, want 1", res.Attempts)
	}
}

// waitTakeover claims key for owner until the holder's short lease expires,
// failing t if it does not within expiryDeadline. Before the expiry every
// claim must see the holder's live lease.
func waitTakeover(t *testing.T, s driver.Store, key driver.Key, owner string) driver.ClaimResult {
	t.Helper()
	deadline := time.Now().Add(expiryDeadline)
	for {
		res, err := s.Claim(ctx(t), request(key, owner, longLease))
		if err != nil {
			t.Fatalf("Claim while waiting for takeover: %v", err)
		}
		checkResult(t, res)
		switch res.Status {
		case driver.TakenOver:
			return res
		case driver.InProgress:
		default:
			t.Fatalf("Claim of a key under an expiring lease = %v, want in_progress then taken_over", res.Status)
		}
		if time.Now().After(deadline) {
			t.Fatalf("a lease of %v was not taken over within %v", shortLease, expiryDeadline)
		}
		time.Sleep(pollInterval)
	}
}

func testTakeoverAfterExpiredLease(t *testing.T, s driver.Store) {
	key := newKey(t)
	a := newOwner(t)
	claim(t, s, key, a, shortLease, driver.Claimed)
	b := newOwner(t)
	res := waitTakeover(t, s, key, b)
	if res.Attempts != 2 {
		t.Errorf("Attempts after takeover = %d, want 2", res.Attempts)
	}

	// Fencing: the stale owner can neither complete nor release, and the
	// new owner's marker is intact (still held under its live lease).
	mustBeNotOwner(t, "Complete by the stale owner", complete(t, s, key, a))
	mustBeNotOwner(t, "Release by the stale owner", release(t, s, key, a))
	claim(t, s, key, newOwner(t), longLease, driver.InProgress)

	mustSucceed(t, "Complete by the new owner", complete(t, s, key, b))
	mustBeNotOwner(t, "Release by the stale owner after completion", release(t, s, key, a))
	mustBeNotOwner(t, "Complete by the stale owner after completion", complete(t, s, key, a))
	claim(t, s, key, newOwner(t), longLease, driver.Done)
}

func testTakeoverThenRelease(t *testing.T, s driver.Store) {
	key := newKey(t)
	a := newOwner(t)
	claim(t, s, key, a, shortLease, driver.Claimed)
	b := newOwner(t)
	waitTakeover(t, s, key, b)
	mustBeNotOwner(t, "Release by the stale owner", release(t, s, key, a))
	mustSucceed(t, "Release by the new owner", release(t, s, key, b))
	mustBeNotOwner(t, "Complete by the stale owner after release", complete(t, s, key, a))
	c := newOwner(t)
	claim(t, s, key, c, longLease, driver.Claimed)
	mustSucceed(t, "Complete after re-claim", complete(t, s, key, c))
	claim(t, s, key, newOwner(t), longLease, driver.Done)
}

func testConcurrentClaims(t *testing.T, s driver.Store) {
	key := newKey(t)
	type result struct {
		owner string
		res   driver.ClaimResult
		err   error
	}
	claimAll := func(n int) []result {
		results := make([]result, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range results {
			results[i].owner = newOwner(t)
			wg.Go(func() {
				<-start
				results[i].res, results[i].err = s.Claim(ctx(t), request(key, results[i].owner, longLease))
			})
		}
		close(start)
		wg.Wait()
		return results
	}

	var winner string
	for _, r := range claimAll(concurrency) {
		if r.err != nil {
			t.Fatalf("concurrent Claim: %v", r.err)
		}
		checkResult(t, r.res)
		switch r.res.Status {
		case driver.Claimed:
			if winner != "" {
				t.Fatalf("two concurrent claims own %s: %s and %s", key, winner, r.owner)
			}
			winner = r.owner
		case driver.InProgress:
		default:
			t.Errorf("concurrent Claim = %v, want claimed or in_progress", r.res.Status)
		}
	}
	if winner == "" {
		t.Fatalf("none of %d concurrent claims owns %s", concurrency, key)
	}
	mustSucceed(t, "Complete by the winner", complete(t, s, key, winner))
	for _, r := range claimAll(concurrency / 5) {
		if r.err != nil || r.res.Status != driver.Done {
			t.Fatalf("concurrent Claim after completion = %v, %v; want done", r.res.Status, r.err)
		}
	}
}

func testFunctionsAreIndependent(t *testing.T, s driver.Store) {
	event := newKey(t).EventID
	k1 := driver.Key{EventID: event, Function: "sendPostNotification"}
	k2 := driver.Key{EventID: event, Function: "incrementPostCount"}
	a, b := newOwner(t), newOwner(t)
	claim(t, s, k1, a, longLease, driver.Claimed)
	claim(t, s, k2, b, longLease, driver.Claimed)
	mustBeNotOwner(t, "Complete of k2 by k1's owner", complete(t, s, k2, a))
	mustSucceed(t, "Complete k1", complete(t, s, k1, a))
	claim(t, s, k1, newOwner(t), longLease, driver.Done)
	claim(t, s, k2, newOwner(t), longLease, driver.InProgress)
	mustSucceed(t, "Release k2", release(t, s, k2, b))
	claim(t, s, k1, newOwner(t), longLease, driver.Done)
	c := newOwner(t)
	claim(t, s, k2, c, longLease, driver.Claimed)
	mustSucceed(t, "Complete k2", complete(t, s, k2, c))
}

// lookAlikeKeys returns keys that differ but would share an ID under a
// naive "{eventID}-{function}" join or a lossy escape.
func lookAlikeKeys(base string) []driver.Key {
	long := strings.Repeat("x", 600)
	return []driver.Key{
		{EventID: base + "-a", Function: "b"},
		{EventID: base, Function: "a-b"},
		{EventID: base + "/a", Function: "b"},
		{EventID: base + "%2Fa", Function: "b"},
		{EventID: base + "%2Da", Function: "b"},
		{EventID: base + "a", Function: "-b"},
		{EventID: "__" + base, Function: "b__"},
		{EventID: base + long + "1", Function: "b"},
		{EventID: base + long + "2", Function: "b"},
		{EventID: base, Function: long},
	}
}

func testKeysThatLookAlike(t *testing.T, s driver.Store) {
	keys := lookAlikeKeys(newKey(t).EventID)
	owners := make([]string, len(keys))
	for i, k := range keys {
		owners[i] = newOwner(t)
		claim(t, s, k, owners[i], longLease, driver.Claimed)
	}
	for i, k := range keys {
		mustSucceed(t, "Complete "+k.ID(), complete(t, s, k, owners[i]))
		claim(t, s, k, newOwner(t), longLease, driver.Done)
	}
}

func testKeyID(t *testing.T) {
	keys := append(lookAlikeKeys("e"),
		driver.Key{EventID: "e", Function: "f"},
		driver.Key{EventID: "e-f", Function: ""},
		driver.Key{EventID: "", Function: "e-f"},
		driver.Key{EventID: "e%", Function: "f"},
		driver.Key{EventID: "e", Function: "%f"},
		driver.Key{EventID: ".", Function: "."},
		driver.Key{EventID: "_", Function: "_"},
		driver.Key{EventID: "__", Function: "__"},
		driver.Key{EventID: "_e", Function: "f"},
		driver.Key{EventID: "%5Fe", Function: "f"},
		driver.Key{EventID: "e/f", Function: "g"},
		driver.Key{EventID: "e", Function: "f/g"},
		driver.Key{EventID: "ünï", Function: "cödé"},
	)
	seen := map[string]driver.Key{}
	for _, k := range keys {
		id := k.ID()
		if prev, ok := seen[id]; ok {
			t.Errorf("keys %+v and %+v share the ID %q", prev, k, id)
		}
		seen[id] = k
		if id != k.ID() {
			t.Errorf("ID of %+v is not stable", k)
		}
		if strings.Contains(id, "/") {
			t.Errorf("ID %q of %+v contains '/'", id, k)
		}
		if len(id) > 1500 || id == "" || id == "." || id == ".." {
			t.Errorf("ID %q of %+v is not a valid Firestore document ID", id, k)
		}
		if len(id) >= 4 && strings.HasPrefix(id, "__") && strings.HasSuffix(id, "__") {
			t.Errorf("ID %q of %+v matches Firestore's reserved __.*__", id, k)
		}
		if s := k.String(); !strings.Contains(s, k.EventID) || !strings.Contains(s, k.Function) {
			t.Errorf("String() = %q does not name event %q and function %q", s, k.EventID, k.Function)
		}
	}
}
