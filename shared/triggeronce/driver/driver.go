// Package driver defines the interface that a triggeronce store implements.
//
// Users do not call a Store directly: they use triggeronce.Guard, which wraps
// one (the shape of gocloud.dev's docstore and docstore/driver). A Store keeps
// one marker per Key and must make every operation below atomic with respect
// to every other caller, on any number of instances. Every store must pass
// drivertest.RunConformanceTests.
package driver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"time"
)

// ErrNotOwner is returned by Complete and Release when the caller no longer
// owns the marker: its lease was taken over by another caller, the marker was
// released, or it does not exist. The caller must not assume its claim holds.
var ErrNotOwner = errors.New("triggeronce: not the owner of the marker")

// State is the state a marker is in.
type State string

const (
	// StateProcessing: a caller has claimed the key and runs the effect
	// under a lease.
	StateProcessing State = "processing"
	// StateDone: the effect ran to completion; every later delivery is a
	// duplicate.
	StateDone State = "done"
)

// Key identifies one (event, function) pair: the unit of deduplication. Two
// functions receiving the same event ID each run once.
type Key struct {
	EventID  string
	Function string
}

// maxIDBytes keeps an ID well below Firestore's 1,500-byte document ID limit
// and short enough for a readable Redis key.
const maxIDBytes = 512

// ID returns a string that names k in a store: "{eventID}-{function}" with
// '%', '/' and '-' in either part percent-escaped, so the one bare '-' is
// the separator and different keys never map to the same ID. A leading '_'
// of the event ID is escaped too ("%5F"), so no ID matches Firestore's
// reserved "__.*__". It contains no '/', so it is a valid Firestore document
// ID. An ID that would exceed 512 bytes is replaced by "sha256~" and the hex
// SHA-256 of the escaped form.
func (k Key) ID() string {
	event := escape(k.EventID)
	if strings.HasPrefix(event, "_") {
		event = "%5F" + event[1:]
	}
	id := event + "-" + escape(k.Function)
	if len(id) > maxIDBytes {
		sum := sha256.Sum256([]byte(id))
		return "sha256~" + hex.EncodeToString(sum[:])
	}
	return id
}

// String returns k for people: "function {Function} event {EventID}".
// Unlike ID it is not escaped (escapes such as %2D read as printf verbs
// where an error message is used as a format, as functions-framework does).
func (k Key) String() string { return "function " + k.Function + " event " + k.EventID }

var escaper = strings.NewReplacer("%", "%25", "/", "%2F", "-", "%2D")

func escape(s string) string { return escaper.Replace(s) }

// Meta is descriptive data recorded on a marker for people reading it.
type Meta struct {
	EventType string
	Subject   string
}

// ClaimRequest asks a store to claim Key for Owner.
type ClaimRequest struct {
	Key  Key
	Meta Meta
	// Owner is a random token unique to this attempt; only the owner may
	// complete or release the claim.
	Owner string
	// Lease is how long the claim holds before another caller may take it
	// over. Stores measure it on the server's clock, never the caller's.
	Lease time.Duration
	// Retention is how long a marker is kept (its expireAt) for the TTL.
	Retention time.Duration
}

// ClaimStatus is what a Claim found and did.
type ClaimStatus int

const (
	// Claimed: no marker existed; the caller now owns a processing marker.
	Claimed ClaimStatus = iota + 1
	// TakenOver: a processing marker's lease had expired; the caller now
	// owns it (the previous owner is fenced out).
	TakenOver
	// Done: the marker is done; the delivery is a duplicate.
	Done
	// InProgress: another caller holds a live lease; the caller owns nothing.
	InProgress
)

func (s ClaimStatus) String() string {
	switch s {
	case Claimed:
		return "claimed"
	case TakenOver:
		return "taken_over"
	case Done:
		return "done"
	case InProgress:
		return "in_progress"
	}
	return "unknown"
}

// Owns reports whether the caller owns the marker after a claim with s.
func (s ClaimStatus) Owns() bool { return s == Claimed || s == TakenOver }

// ClaimResult is the answer to a Claim.
type ClaimResult struct {
	Status ClaimStatus
	// Attempts counts the claims of this key that owned it, this one
	// included (1 on a first claim; 0 when the caller owns nothing).
	Attempts int
	// LeaseExpires is when the lease of the current holder ends, on the
	// store's clock (zero when the marker is done).
	LeaseExpires time.Time
}

// Store keeps markers. All methods are safe for concurrent use.
type Store interface {
	// Claim atomically creates a processing marker for req.Key owned by
	// req.Owner, or takes over one whose lease has expired, or reports a
	// done marker or a live lease held by someone else.
	Claim(ctx context.Context, req ClaimRequest) (ClaimResult, error)
	// Complete marks the key done (kept for retention) only if owner still
	// owns it; otherwise it returns ErrNotOwner and changes nothing.
	Complete(ctx context.Context, key Key, owner string, retention time.Duration) error
	// Release deletes the marker only if owner still owns it, so the next
	// delivery runs the effect again; otherwise it returns ErrNotOwner and
	// changes nothing.
	Release(ctx context.Context, key Key, owner string) error
}
