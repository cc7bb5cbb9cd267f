// Package redisstore is a triggeronce store in Redis, for teams that already
// run one (Memorystore for Redis or Valkey, a self-hosted server or cluster).
// It has the semantics of the Firestore store and passes the same
// conformance suite (drivertest.RunConformanceTests).
//
// # Guarantees
//
// A marker is one Redis hash at "{Prefix}{Key.ID()}", one per (event ID,
// function name). Every operation is one Lua script on that one key (EVALSHA,
// with EVAL when the script cache is empty), so each is atomic with respect
// to every other caller, and costs one round trip:
//
//   - Claim creates a processing marker owned by a random token with a lease;
//     of any number of concurrent callers exactly one owns the key. A done
//     marker means a duplicate (Done); a live lease held by someone else means
//     a concurrent duplicate (InProgress, with the lease's end). A processing
//     marker whose lease has ended (a crashed instance) is taken over
//     (TakenOver, the attempts count goes on).
//   - Complete turns the marker into a done marker kept for the retention, and
//     Release deletes it, each only if the caller's token still owns it:
//     otherwise driver.ErrNotOwner and nothing changes. A holder whose lease
//     was taken over cannot mark done or delete the new owner's marker.
//   - Leases are measured on Redis's clock (TIME inside the scripts), never on
//     an instance's clock. A processing marker is kept for the retention after
//     its lease ends, so a takeover still sees how often the key was claimed
//     and a crashed claim stays readable; a done marker is kept for the
//     retention from its completion. Redis deletes both afterwards (no sweeper).
//   - A Claim or Complete retried with the same owner after a lost reply finds
//     its own marker and succeeds again instead of locking its caller out.
//   - When Redis cannot be reached, every method returns an error naming the
//     operation and the key, so the Guard fails closed: nothing runs, the
//     platform retries the delivery.
//
// Why a hash with the lease inside rather than SET key NX PX lease: a key
// that expires with its lease disappears with its attempts count, so a
// takeover would look like a first claim (Claimed, 1 attempt) and could not
// be reported or logged as one; the conformance suite requires TakenOver.
// The claim script does what SET NX does (create only if absent) and, in the
// same atomic step, takes over a processing marker whose lease has ended.
//
// # What it fixes in the usual Redis lock
//
// The lock this project grew from, SET lock:firestore:item:{docId} locked NX
// EX 30 deleted after processing, has four faults, each fixed here:
//
//   - It is keyed by document; two functions on one document, or two events
//     on it, block each other. Markers here are keyed by event ID and function.
//   - Once the lock is deleted, a later duplicate delivery (redeliveries come
//     for up to 24 hours) runs the effect again. Here success leaves a done
//     marker for the retention (7 days by default in the Guard).
//   - A plain DEL removes a lock that another instance may now hold. Here
//     Complete and Release compare the owner token inside the script.
//   - 30 s is shorter than a function may run (up to 540 s), so a second
//     instance starts while the first still works. The Guard's lease defaults
//     to at least the maximum function timeout.
//
// # Durability: what Redis must be configured for
//
// The guarantees hold only while Redis keeps what it acknowledged. Redis keeps
// data in memory; a restart without persistence, a failover to a replica that
// had not yet received the last writes (replication is asynchronous), or an
// eviction loses markers. A lost done marker lets a later duplicate delivery
// run the effect again; a lost processing marker lets a concurrent duplicate
// run it while the owner still works. No effect is lost that way, but one may
// run twice. To avoid it:
//
//   - Turn on AOF persistence (appendonly yes). appendfsync always keeps every
//     acknowledged marker across a crash; everysec (the usual default) may
//     lose about the last second of them; RDB snapshots alone lose everything
//     since the last snapshot. Memorystore for Redis Cluster and Memorystore
//     for Valkey offer AOF persistence; Memorystore for Redis offers RDB only.
//   - Use maxmemory-policy noeviction and size memory for the markers of the
//     retention period (about 0.5 KB each). Memorystore for Redis
//     defaults to volatile-lru, which evicts keys that have a TTL: every
//     marker has one.
//   - A failover in a replicated setup (Memorystore Standard tier, Sentinel,
//     Cluster) may still drop the last writes: this store does not wait for
//     replicas (WAIT). Choose the Firestore store where that matters.
//
// # Memorystore and Redis Cluster
//
// Each operation touches a single key, so the store works with a Redis
// Cluster client (redis.NewClusterClient, Memorystore for Redis Cluster) as
// with a single node: pass any redis.UniversalClient. It needs Lua scripting
// and Redis 4.0 or newer (multi-field HSET) or Valkey; it is tested on Redis
// 7.0.
package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/fireonce/fireonce/shared/triggeronce/driver"
	"github.com/redis/go-redis/v9"
)

// DefaultPrefix is the key prefix when Options.Prefix is empty.
const DefaultPrefix = "fireonce:trigger:"

// DefaultRetention is used when a caller passes no retention (zero or less):
// redeliveries come for up to 24 hours, so 7 days leaves ample margin.
const DefaultRetention = 7 * 24 * time.Hour

// Options configure a Store. The zero value (or nil) gives the defaults.
type Options struct {
	// Prefix is prepended to Key.ID() to form a marker's Redis key.
	// Default DefaultPrefix.
	Prefix string
}

// Store is a driver.Store in Redis. It is safe for concurrent use.
type Store struct {
	client redis.UniversalClient
	prefix string
}

var _ driver.Store = (*Store)(nil)

// New returns a Store that keeps markers through client. opts may be nil.
// The Store does not close the client.
func New(client redis.UniversalClient, opts *Options) *Store {
	s := &Store{client: client, prefix: DefaultPrefix}
	if opts != nil && opts.Prefix != "" {
		s.prefix = opts.Prefix
	}
	return s
}

// RedisKey returns the Redis key of key's marker, for inspecting it (it is a
// hash: state, owner, attempts, function, eventId, eventType, subject,
// claimedAt, leaseUntil or doneAt, times in Unix milliseconds of Redis's
// clock).
func (s *Store) RedisKey(key driver.Key) string { return s.prefix + key.ID() }

var (
	//go:embed claim.lua
	claimSrc    string
	claimScript = redis.NewScript(claimSrc)

	//go:embed complete.lua
	completeSrc    string
	completeScript = redis.NewScript(completeSrc)

	//go:embed release.lua
	releaseSrc    string
	releaseScript = redis.NewScript(releaseSrc)
)

// The status codes claim.lua returns.
var claimStatuses = map[int64]driver.ClaimStatus{
	1: driver.Claimed,
	2: driver.TakenOver,
	3: driver.Done,
	4: driver.InProgress,
}

// Claim implements driver.Store.
func (s *Store) Claim(ctx context.Context, req driver.ClaimRequest) (driver.ClaimResult, error) {
	switch {
	case req.Key.EventID == "" || req.Key.Function == "":
		return driver.ClaimResult{}, fmt.Errorf("redisstore: claim %s: empty event ID or function name", req.Key)
	case req.Owner == "":
		return driver.ClaimResult{}, fmt.Errorf("redisstore: claim %s: empty owner", req.Key)
	case req.Lease < 0:
		return driver.ClaimResult{}, fmt.Errorf("redisstore: claim %s: negative lease %v", req.Key, req.Lease)
	}
	vals, err := claimScript.Run(ctx, s.client, []string{s.RedisKey(req.Key)},
		req.Owner, millis(req.Lease), millis(retention(req.Retention)),
		req.Key.Function, req.Key.EventID, req.Meta.EventType, req.Meta.Subject,
	).Int64Slice()
	if err != nil {
		return driver.ClaimResult{}, fmt.Errorf("redisstore: claim %s: %w", req.Key, err)
	}
	if len(vals) != 3 || claimStatuses[vals[0]] == 0 {
		return driver.ClaimResult{}, fmt.Errorf("redisstore: claim %s: unexpected script reply %v", req.Key, vals)
	}
	res := driver.ClaimResult{Status: claimStatuses[vals[0]], Attempts: int(vals[1])}
	if res.Status != driver.Done {
		res.LeaseExpires = time.UnixMilli(vals[2])
	}
	return res, nil
}

// Complete implements driver.Store. Completing a marker the same owner
// already completed (a retry after a lost reply) succeeds and changes
// nothing.
func (s *Store) Complete(ctx context.Context, key driver.Key, owner string, retentionTime time.Duration) error {
	return s.ownerScript(ctx, "complete", completeScript, key, owner, millis(retention(retentionTime)))
}

// Release implements driver.Store. It never deletes a done marker.
func (s *Store) Release(ctx context.Context, key driver.Key, owner string) error {
	return s.ownerScript(ctx, "release", releaseScript, key, owner)
}

// ownerScript runs a script that answers 1 when owner owns key and it acted,
// and 0 when it changed nothing.
func (s *Store) ownerScript(ctx context.Context, op string, script *redis.Script, key driver.Key, owner string, args ...any) error {
	if owner == "" {
		return fmt.Errorf("redisstore: %s %s: %w", op, key, driver.ErrNotOwner)
	}
	n, err := script.Run(ctx, s.client, []string{s.RedisKey(key)}, append([]any{owner}, args...)...).Int64()
	switch {
	case err != nil:
		return fmt.Errorf("redisstore: %s %s: %w", op, key, err)
	case n != 1:
		return fmt.Errorf("redisstore: %s %s: %w", op, key, driver.ErrNotOwner)
	}
	return nil
}

func retention(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultRetention
	}
	return d
}

// millis rounds d up to whole milliseconds, Redis's resolution, so a lease
// never ends earlier than asked.
func millis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
