package functions

import (
	"context"

	"github.com/fireonce/fireonce/shared/firestoreevent"
)

// The event types the functions listen to (Eventarc's Firestore types).
const (
	EventCreated = "google.cloud.firestore.document.v1.created"
	EventDeleted = "google.cloud.firestore.document.v1.deleted"
)

// PostDocument is the document pattern every function listens on.
const PostDocument = "users/{userID}/posts/{postID}"

var postPattern = firestoreevent.MustParsePattern(PostDocument)

// Function is one row of the functions table: what gets registered with
// functions-framework, deployed by scripts/deploy.sh and triggered by the
// local dev loop.
type Function struct {
	Name      string `json:"name"`
	EventType string `json:"eventType"`
	Document  string `json:"document"`
}

// invocation is one decoded, validated delivery, handed to a handler.
type invocation struct {
	event  *firestoreevent.Event
	params map[string]string
	report *report
}

// handlerFunc runs one function's guarded effect. It returns the error the
// platform should see (nil when no retry is wanted).
type handlerFunc func(s *Service, ctx context.Context, d *Deps, inv *invocation) error

type row struct {
	Function
	pattern *firestoreevent.Pattern
	handle  handlerFunc
}

// table is the single source of truth: two functions on the same event of
// the same path is deliberate, each deduplicated under its own name.
var table = []row{
	{Function: Function{Name: "sendPostNotification", EventType: EventCreated, Document: PostDocument}, pattern: postPattern, handle: (*Service).sendPostNotification},
	{Function: Function{Name: "incrementPostCount", EventType: EventCreated, Document: PostDocument}, pattern: postPattern, handle: (*Service).incrementPostCount},
	{Function: Function{Name: "decrementPostCount", EventType: EventDeleted, Document: PostDocument}, pattern: postPattern, handle: (*Service).decrementPostCount},
}

// Table returns the functions table.
func Table() []Function {
	out := make([]Function, len(table))
	for i, r := range table {
		out[i] = r.Function
	}
	return out
}

func lookup(name string) (row, bool) {
	for _, r := range table {
		if r.Name == name {
			return r, true
		}
	}
	return row{}, false
}
