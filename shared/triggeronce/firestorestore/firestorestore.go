// Package firestorestore is the Firestore store of triggeronce: it keeps one
// marker document per key at {collection}/{Key.ID()} (default collection
// "triggerEvents") and passes drivertest.RunConformanceTests.
//
// Users normally reach it through triggeronce.NewFirestore. It also offers
// what only Firestore can: RunTx and RunBatch commit the marker together with
// the effect's own writes, and HasAlreadyTriggered, the seed primitive.
//
// # Marker fields
//
//	function, eventID, eventType, subject   what the marker is about
//	state        "processing" or "done"
//	owner        the token of the attempt that claimed (or completed) it
//	attempts     how many claims owned it (a takeover adds one)
//	createdAt    server time of the first claim
//	updatedAt    server time of the last write by this store
//	leaseMillis  the lease of the current processing claim
//	leaseExpiresAt  updatedAt + leaseMillis as the claiming instance estimated
//	             it, for people reading the marker (absent once done)
//	expireAt     when the TTL policy may delete the marker (now + retention)
//
// # Server time, not instance clocks
//
// A claim writes updatedAt as firestore.ServerTimestamp, so it is the
// claim's commit time. Whether a lease is live is decided by comparing a
// snapshot's ReadTime (the server's "now") with updatedAt + leaseMillis:
// both are server times. leaseExpiresAt is informational only, since a
// single atomic create cannot compute server time plus a duration.
//
// # Round trips
//
// A first Claim is one Commit (a create with the exists=false precondition).
// A duplicate costs that failed Commit plus one plain read; only a missing
// or expired marker needs a transaction. Complete and Release are one Commit
// each, fenced by a LastUpdateTime precondition naming the claim's own write:
// any takeover or release in between changes or removes the document, so the
// precondition fails and the stale owner changes nothing. A Store remembers
// that update time in memory between Claim and Complete; when it does not
// (another Store instance, or the precondition failed for a reason other
// than a new owner) it decides in a transaction that reads the owner.
//
// The marker belongs to this store: do not write to it. Keep other progress
// (for example which devices a push reached) in documents of your own.
package firestorestore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fireonce/fireonce/shared/triggeronce/driver"
)

// DefaultCollection is where markers live unless Options.Collection says
// otherwise. firestore.indexes.json declares the TTL policy on its expireAt.
const DefaultCollection = "triggerEvents"

// Options configure a Store. A nil *Options means the defaults.
type Options struct {
	// Collection holds the markers. Default DefaultCollection.
	Collection string
}

// Store keeps markers in Firestore. It is safe for concurrent use; create one
// per client and share it.
type Store struct {
	client *firestore.Client
	coll   *firestore.CollectionRef

	mu      sync.Mutex
	claimed map[string]claimWrite // by owner token
}

// claimWrite is what a Store remembers between a Claim and the owner's
// Complete or Release: the update time of the marker it wrote.
type claimWrite struct {
	id         string
	updateTime time.Time
	leaseEnd   time.Time // on the server's clock; only used to prune
}

// New returns a Store on client.
func New(client *firestore.Client, opts *Options) *Store {
	coll := DefaultCollection
	if opts != nil && opts.Collection != "" {
		coll = opts.Collection
	}
	return &Store{client: client, coll: client.Collection(coll), claimed: map[string]claimWrite{}}
}

// Client returns the client the Store writes with.
func (s *Store) Client() *firestore.Client { return s.client }

// Doc returns the marker document of key.
func (s *Store) Doc(key driver.Key) *firestore.DocumentRef { return s.coll.Doc(key.ID()) }

var _ driver.Store = (*Store)(nil)

// marker is a marker document as read.
type marker struct {
	State       driver.State `firestore:"state"`
	Owner       string       `firestore:"owner"`
	Attempts    int          `firestore:"attempts"`
	UpdatedAt   time.Time    `firestore:"updatedAt"`
	LeaseMillis int64        `firestore:"leaseMillis"`
}

func (m *marker) leaseEnd() time.Time {
	return m.UpdatedAt.Add(time.Duration(m.LeaseMillis) * time.Millisecond)
}

func decode(snap *firestore.DocumentSnapshot) (*marker, error) {
	var m marker
	if err := snap.DataTo(&m); err != nil {
		return nil, fmt.Errorf("firestorestore: decode marker %s: %w", snap.Ref.ID, err)
	}
	return &m, nil
}

// judge tells what an existing marker means to a new claimant, on the
// server's clock (snap.ReadTime). expired is true when the caller may take
// it over.
func judge(snap *firestore.DocumentSnapshot, m *marker) (res driver.ClaimResult, expired bool) {
	if m.State == driver.StateDone {
		return driver.ClaimResult{Status: driver.Done}, false
	}
	end := m.leaseEnd()
	if snap.ReadTime.Before(end) {
		return driver.ClaimResult{Status: driver.InProgress, LeaseExpires: end}, false
	}
	return driver.ClaimResult{}, true
}

// fields returns the marker fields every write sets.
func fields(key driver.Key, meta driver.Meta, state driver.State, owner string, attempts int, retention time.Duration) map[string]any {
	return map[string]any{
		"function":  key.Function,
		"eventID":   key.EventID,
		"eventType": meta.EventType,
		"subject":   meta.Subject,
		"state":     string(state),
		"owner":     owner,
		"attempts":  attempts,
		"updatedAt": firestore.ServerTimestamp,
		"expireAt":  time.Now().Add(retention),
	}
}

// processing returns a new processing marker for req.
func processing(req driver.ClaimRequest, attempts int) map[string]any {
	m := fields(req.Key, req.Meta, driver.StateProcessing, req.Owner, attempts, req.Retention)
	m["leaseMillis"] = req.Lease.Milliseconds()
	m["leaseExpiresAt"] = time.Now().Add(req.Lease)
	return m
}

// asUpdates turns marker fields into updates that keep createdAt and drop
// the lease fields unless m sets them.
func asUpdates(m map[string]any) []firestore.Update {
	ups := []firestore.Update{
		{Path: "leaseMillis", Value: firestore.Delete},
		{Path: "leaseExpiresAt", Value: firestore.Delete},
	}
	for i := range ups {
		if v, ok := m[ups[i].Path]; ok {
			ups[i].Value = v
		}
	}
	for k, v := range m {
		if k != "leaseMillis" && k != "leaseExpiresAt" {
			ups = append(ups, firestore.Update{Path: k, Value: v})
		}
	}
	return ups
}

// created returns a new marker: m plus its createdAt.
func created(m map[string]any) map[string]any {
	m["createdAt"] = firestore.ServerTimestamp
	return m
}

// Claim implements driver.Store.
func (s *Store) Claim(ctx context.Context, req driver.ClaimRequest) (driver.ClaimResult, error) {
	if req.Lease < time.Millisecond || req.Owner == "" {
		return driver.ClaimResult{}, fmt.Errorf("firestorestore: claim %s: needs an owner and a lease of at least 1ms", req.Key)
	}
	ref := s.Doc(req.Key)
	wr, err := ref.Create(ctx, created(processing(req, 1)))
	if err == nil {
		return s.owned(req, driver.Claimed, 1, wr.UpdateTime), nil
	}
	if status.Code(err) != codes.AlreadyExists {
		return driver.ClaimResult{}, fmt.Errorf("firestorestore: claim %s: %w", req.Key, err)
	}
	// A done marker or a live lease needs no transaction: answering it
	// changes nothing, so a plain read is enough (and takes no lock).
	snap, err := ref.Get(ctx)
	switch {
	case status.Code(err) == codes.NotFound:
		// Released since our create failed: claim in the transaction.
	case err != nil:
		return driver.ClaimResult{}, fmt.Errorf("firestorestore: claim %s: read marker: %w", req.Key, err)
	default:
		m, err := decode(snap)
		if err != nil {
			return driver.ClaimResult{}, err
		}
		if res, expired := judge(snap, m); !expired {
			return res, nil
		}
	}
	return s.claimTx(ctx, req)
}

// claimTx claims a key whose marker is missing or expired, deciding again
// inside a transaction so that exactly one claimant takes it.
func (s *Store) claimTx(ctx context.Context, req driver.ClaimRequest) (driver.ClaimResult, error) {
	ref := s.Doc(req.Key)
	var res driver.ClaimResult
	var cr firestore.CommitResponse
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(ref)
		if status.Code(err) == codes.NotFound {
			res = driver.ClaimResult{Status: driver.Claimed, Attempts: 1}
			return tx.Create(ref, created(processing(req, 1)))
		}
		if err != nil {
			return err
		}
		m, err := decode(snap)
		if err != nil {
			return err
		}
		var expired bool
		if res, expired = judge(snap, m); !expired {
			return nil
		}
		res = driver.ClaimResult{Status: driver.TakenOver, Attempts: m.Attempts + 1}
		return tx.Update(ref, asUpdates(processing(req, res.Attempts)))
	}, firestore.WithCommitResponseTo(&cr))
	if err != nil {
		return driver.ClaimResult{}, fmt.Errorf("firestorestore: claim %s: %w", req.Key, err)
	}
	if !res.Status.Owns() {
		return res, nil
	}
	// The write's update time is the commit time.
	return s.owned(req, res.Status, res.Attempts, cr.CommitTime()), nil
}

// owned records a successful claim written at updateTime.
func (s *Store) owned(req driver.ClaimRequest, st driver.ClaimStatus, attempts int, updateTime time.Time) driver.ClaimResult {
	end := updateTime.Add(req.Lease)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.claimed) >= 4096 {
		// Entries of abandoned claims: forgetting one only costs its owner
		// a transaction, never correctness.
		for owner, w := range s.claimed {
			if w.leaseEnd.Before(updateTime) {
				delete(s.claimed, owner)
			}
		}
	}
	s.claimed[req.Owner] = claimWrite{id: req.Key.ID(), updateTime: updateTime, leaseEnd: end}
	return driver.ClaimResult{Status: st, Attempts: attempts, LeaseExpires: end}
}

// take returns and forgets what this Store remembers of owner's claim of key.
func (s *Store) take(key driver.Key, owner string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.claimed[owner]
	if !ok || w.id != key.ID() {
		return time.Time{}, false
	}
	delete(s.claimed, owner)
	return w.updateTime, true
}

// fenced reports whether err is a failed LastUpdateTime precondition: the
// marker changed or vanished since the claim.
func fenced(err error) bool {
	c := status.Code(err)
	return c == codes.FailedPrecondition || c == codes.NotFound
}

// Complete implements driver.Store.
func (s *Store) Complete(ctx context.Context, key driver.Key, owner string, retention time.Duration) error {
	done := []firestore.Update{
		{Path: "state", Value: string(driver.StateDone)},
		{Path: "updatedAt", Value: firestore.ServerTimestamp},
		{Path: "expireAt", Value: time.Now().Add(retention)},
		{Path: "leaseMillis", Value: firestore.Delete},
		{Path: "leaseExpiresAt", Value: firestore.Delete},
	}
	ref := s.Doc(key)
	if at, ok := s.take(key, owner); ok {
		_, err := ref.Update(ctx, done, firestore.LastUpdateTime(at))
		if err == nil {
			return nil
		}
		if !fenced(err) {
			return fmt.Errorf("firestorestore: complete %s: %w", key, err)
		}
	}
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		m, err := s.getOwned(tx, ref, owner)
		if err != nil {
			return err
		}
		if m.State == driver.StateDone {
			return nil // completed already (a retried Commit)
		}
		return tx.Update(ref, done)
	})
	if err != nil {
		return fmt.Errorf("firestorestore: complete %s: %w", key, err)
	}
	return nil
}

// Release implements driver.Store.
func (s *Store) Release(ctx context.Context, key driver.Key, owner string) error {
	ref := s.Doc(key)
	if at, ok := s.take(key, owner); ok {
		_, err := ref.Delete(ctx, firestore.LastUpdateTime(at))
		if err == nil {
			return nil
		}
		if !fenced(err) {
			return fmt.Errorf("firestorestore: release %s: %w", key, err)
		}
	}
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		m, err := s.getOwned(tx, ref, owner)
		if err != nil {
			return err
		}
		if m.State != driver.StateProcessing {
			return driver.ErrNotOwner
		}
		return tx.Delete(ref)
	})
	if err != nil {
		return fmt.Errorf("firestorestore: release %s: %w", key, err)
	}
	return nil
}

// getOwned reads the marker in tx and returns driver.ErrNotOwner unless
// owner holds it.
func (s *Store) getOwned(tx *firestore.Transaction, ref *firestore.DocumentRef, owner string) (*marker, error) {
	snap, err := tx.Get(ref)
	if status.Code(err) == codes.NotFound {
		return nil, driver.ErrNotOwner
	}
	if err != nil {
		return nil, err
	}
	m, err := decode(snap)
	if err != nil {
		return nil, err
	}
	if m.Owner != owner {
		return nil, driver.ErrNotOwner
	}
	return m, nil
}
