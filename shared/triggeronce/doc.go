// Package triggeronce runs the effects of Firestore-triggered functions once
// per (event ID, function name), although events are delivered at least once.
//
// A Guard wraps a store of markers (the shape of gocloud.dev's docstore: a
// concrete type over the small driver.Store interface). NewFirestore keeps
// them in Firestore (package firestorestore, collection "triggerEvents");
// other stores, such as redisstore, plug in with New and pass the same
// conformance suite (drivertest). The key is the event ID and the function
// name, so two functions receiving one event each run once.
//
// # Guarantees
//
// Effects inside Firestore (a counter): Guard.RunTx and Guard.RunBatch commit
// the effect's writes and the done marker in one atomic commit. Exactly once:
// there is no moment at which one is committed and the other is not.
//
// Effects outside Firestore (a push): Guard.Run claims the key (a
// "processing" marker with a random owner token and a lease measured on the
// store's clock), runs the effect, then marks it "done". The effect runs at
// most once while the handler finishes within its lease, and it is never
// lost across failures and retries:
//   - a failing (or panicking) effect releases its claim and returns the
//     error, so the platform's retry runs it again;
//   - a concurrent duplicate finds the live lease and, by default, returns
//     ErrInProgress so that it too is retried: if the holder crashed, its
//     own retries keep failing this way until the lease expires and one of
//     them takes the claim over (InProgressSkip is quieter but loses the
//     effect of a crashed holder, see InProgressPolicy);
//   - only the owner may complete or release: a holder whose lease was
//     taken over is refused (driver.ErrNotOwner) and changes nothing.
//
// One window remains, as with any lease: if the effect has happened and the
// instance dies (or stalls past its lease) before the marker is marked done,
// a delivery after the lease expires runs the effect again. What shortens
// it: a lease just above the function's timeout rather than far above (the
// default, 10 min, covers the 540 s maximum); handlers that honour the
// context Run gives them, which ends with the lease; and effects that are
// idempotent on the provider's side, or that record their own progress
// (which devices a push reached) so a repeat does less.
//
// HasAlreadyTriggered is the seed approach's primitive, kept for
// compatibility. It marks an event before the effect runs, so an effect that
// fails afterwards is lost. Prefer Guard.
//
// # Cost
//
// Round trips to Firestore, counted by a gRPC interceptor in TestRoundTrips
// (calls, not timings), for a first delivery and for a later duplicate:
//
//	                      first                          duplicate
//	unguarded increment   1 (Commit)                     1
//	HasAlreadyTriggered   1 (Commit)                     1 (Commit fails: AlreadyExists)
//	Run                   2 (Commit claim, Commit done)  2 (Commit fails, read)
//	RunTx                 2 (BeginTransaction, Commit)   4 (Begin, Commit fails, Rollback, read)
//	                      + fn's reads
//	RunBatch              1 (Commit)                     2 (Commit fails, read)
//
// A claim is a create with the exists=false precondition, one atomic Commit;
// only a missing or expired marker ever needs a transaction. Complete and
// Release are one Commit each, fenced by a LastUpdateTime precondition on the
// claim's own write. RunTx does not read the marker inside its transaction:
// the create precondition at commit decides, and no marker lock is taken, so
// concurrent duplicates do not wait on each other. The client always sends
// BeginTransaction, so a transaction with only writes costs two round trips;
// RunBatch is one, which is why a blind counter increment should use it.
//
// # Markers
//
// Markers live at {collection}/{Key.ID()} with the fields function, eventID,
// eventType, subject, state, owner, attempts, createdAt, updatedAt,
// leaseMillis and leaseExpiresAt (while processing) and expireAt, on which
// the TTL policy in firestore.indexes.json deletes them (default retention 7
// days: 24 h of redeliveries plus up to 24 h of TTL lag, with room).
package triggeronce
