// Package functions is fireonce's deployable Cloud Functions: three
// CloudEvent functions on users/{userID}/posts/{postID}, each guarding its
// effect under its own name so that Eventarc's at-least-once delivery never
// turns into a duplicate push or a wrong counter, and a failed effect is
// retried rather than lost.
//
//   - sendPostNotification (created): a push to every device of every
//     follower, under triggeronce.Guard.Run: a duplicate sends nothing; a
//     transient FCM failure releases the claim and returns an error so a
//     retry runs it, and the retry skips the devices the failed attempt
//     reached (receipts under the marker).
//   - incrementPostCount (created) and decrementPostCount (deleted):
//     users/{userID}.postCount changes by one in the same atomic commit as
//     the done marker (Guard.RunBatch, Guard.RunTx): exactly once, never
//     below zero, and right whatever order a post's events arrive in (a
//     ledger per post, see counters.go).
//
// The functions table (Table) is the single source of truth for names, event
// types and document patterns: init registers every row with
// functions-framework-go, scripts/deploy.sh and the local dev loop read it
// through ./functions/cmd/functable.
//
// Every delivery is decoded and validated before anything is written: a
// malformed event, an unexpected type or a document outside the pattern is
// logged at ERROR and dropped (nil: no retry could fix it). Each invocation
// logs one JSON line with severity, message, function, eventID, document,
// outcome (executed, duplicate, in_progress, taken_over, released, failed,
// rejected), sent, pruned and durationMs.
//
// Configuration (read on the first delivery, not at start-up): see Config.
package functions

import (
	ff "github.com/GoogleCloudPlatform/functions-framework-go/functions"
)

// init registers every function of the table, as functions-framework-go
// requires; clients are created on the first delivery.
func init() {
	s := newEnvService()
	for _, f := range table {
		ff.CloudEvent(f.Name, s.Handler(f.Name))
	}
}
