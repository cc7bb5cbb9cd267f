// Package firestoreevent turns the CloudEvent that Eventarc delivers for a
// Firestore document change into a typed, validated change: which document,
// what kind of change, the document before and after, and the path
// parameters of a pattern such as "users/{userID}/posts/{postID}".
//
// Guarantees:
//
//   - Decode never panics, whatever the event holds. Every input it rejects
//     yields an error that wraps [ErrMalformed] and names what was wrong, so
//     a caller can drop a malformed event before it costs any write (a retry
//     can never make it well-formed).
//   - An event Decode accepts is consistent: its type is one of the eight
//     Firestore document types, its subject is "documents/<path>" with an
//     even number of non-empty segments, the "document" extension and the
//     names of the documents agree with that path, a created event has an
//     After document, a deleted event a Before document, an updated event
//     both, and every field value is well-formed (timestamps in range,
//     references naming a document). [Document.Data] therefore cannot fail.
//   - Before and After are nil exactly when the event carries no old or new
//     document.
//   - [Document.DataTo] follows cloud.google.com/go/firestore's
//     DocumentSnapshot.DataTo: `firestore:"name"` tags, `firestore:"-"`,
//     case-insensitive names when no exact one matches, nested structs,
//     pointers, slices, maps, time.Time and exact int/float conversions.
//     Its errors wrap [ErrDataTo] and name the field.
//   - [Pattern.Match] reports a mismatch with an error wrapping [ErrNoMatch]
//     that names the pattern and the path.
//
// The package reads the data as Eventarc sends it, "application/protobuf"
// (google.events.cloud.firestore.v1.DocumentEventData), or as protojson
// ("application/json"); a missing content type is read as protobuf.
package firestoreevent
