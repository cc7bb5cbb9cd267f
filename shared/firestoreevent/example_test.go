package firestoreevent_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	fd "github.com/googleapis/google-cloudevents-go/cloud/firestoredata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fireonce/fireonce/shared/firestoreevent"
)

// postPattern is the document pattern the function is deployed with.
var postPattern = firestoreevent.MustParsePattern("users/{userID}/posts/{postID}")

// Post is the stored form of users/{userID}/posts/{postID}.
type Post struct {
	Title     string    `firestore:"title"`
	Body      string    `firestore:"body"`
	CreatedAt time.Time `firestore:"createdAt"`
}

func ExampleDecode() {
	// The event Eventarc delivers when users/u1/posts/p1 is created.
	created := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	body, _ := proto.Marshal(&fd.DocumentEventData{Value: &fd.Document{
		Name: "projects/demo-x/databases/(default)/documents/users/u1/posts/p1",
		Fields: map[string]*fd.Value{
			"title":     {ValueType: &fd.Value_StringValue{StringValue: "Hello"}},
			"body":      {ValueType: &fd.Value_StringValue{StringValue: "First post"}},
			"createdAt": {ValueType: &fd.Value_TimestampValue{TimestampValue: timestamppb.New(created)}},
		},
	}})
	ce := event.New()
	ce.SetID("1234")
	ce.SetType("google.cloud.firestore.document.v1.created")
	ce.SetSource("//firestore.googleapis.com/projects/demo-x/databases/(default)")
	ce.SetSubject("documents/users/u1/posts/p1")
	ce.SetData("application/protobuf", body)

	ev, err := firestoreevent.Decode(ce)
	if errors.Is(err, firestoreevent.ErrMalformed) {
		fmt.Println("drop:", err) // a retry cannot help
		return
	}
	params, err := ev.Params(postPattern)
	if err != nil {
		fmt.Println("drop:", err)
		return
	}
	var p Post
	if err := ev.After.DataTo(&p); err != nil {
		fmt.Println("drop:", err)
		return
	}
	fmt.Println(ev.Kind, ev.Project, ev.Database, ev.Document)
	fmt.Println("user", params["userID"], "post", params["postID"], "before", ev.Before)
	fmt.Printf("%q at %s\n", p.Title, p.CreatedAt.Format(time.RFC3339))

	// A malformed event is rejected before any side effect.
	ce.SetSubject("documents/users/u1/posts")
	_, err = firestoreevent.Decode(ce)
	fmt.Println(err)
	// Output:
	// created demo-x (default) users/u1/posts/p1
	// user u1 post p1 before <nil>
	// "Hello" at 2025-03-01T10:00:00Z
	// firestoreevent: malformed event: subject "documents/users/u1/posts": odd number of segments (3): names a collection, not a document
}

func ExamplePattern_Match() {
	p := firestoreevent.MustParsePattern("users/{userID}/{rest=**}")
	params, _ := p.Match("users/u1/posts/p1")
	fmt.Println(params["userID"], params["rest"])

	_, err := firestoreevent.MustParsePattern("users/{userID}").Match("groups/g1")
	fmt.Println(err)
	// Output:
	// u1 posts/p1
	// firestoreevent: document does not match pattern: pattern "users/{userID}", path "groups/g1": segment 1 is "groups", want "users"
}
