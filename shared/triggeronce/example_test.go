package triggeronce_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"cloud.google.com/go/firestore"
	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/fireonce/fireonce/shared/firestoretest"
	"github.com/fireonce/fireonce/shared/triggeronce"
)

// exampleClient returns a client on a fresh emulator project and a function
// that clears and closes it. Examples run on the emulator, like the tests.
func exampleClient() (*firestore.Client, func()) {
	project := "demo-example-" + strings.ToLower(rand.Text()[:10])
	client, err := firestore.NewClient(context.Background(), project)
	if err != nil {
		panic(err)
	}
	return client, func() {
		client.Close()
		_ = firestoretest.ClearProject(context.Background(), os.Getenv(firestoretest.EnvHost), project)
	}
}

var quiet = &triggeronce.Options{Logger: slog.New(slog.DiscardHandler)}

func ExampleGuard_Run() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()
	g := triggeronce.NewFirestore(client, quiet)

	key := triggeronce.Key{EventID: "event-1", Function: "sendPostNotification"}
	push := func(ctx context.Context) error {
		fmt.Println("push sent")
		return nil
	}
	for range 2 { // the platform delivers the event twice
		outcome, err := g.Run(ctx, key, triggeronce.Meta{}, push)
		fmt.Println(outcome, err)
	}
	// Output:
	// push sent
	// executed <nil>
	// duplicate <nil>
}

func ExampleGuard_RunBatch() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()
	g := triggeronce.NewFirestore(client, quiet)

	user := client.Doc("users/u1")
	key := triggeronce.Key{EventID: "event-1", Function: "incrementPostCount"}
	for range 3 {
		outcome, err := g.RunBatch(ctx, key, triggeronce.Meta{}, func(b *firestore.WriteBatch) error {
			b.Set(user, map[string]any{"postCount": firestore.Increment(1)}, firestore.MergeAll)
			return nil
		})
		fmt.Println(outcome, err)
	}
	snap, _ := user.Get(ctx)
	fmt.Println("postCount:", snap.Data()["postCount"])
	// Output:
	// executed <nil>
	// duplicate <nil>
	// duplicate <nil>
	// postCount: 1
}

func ExampleGuard_RunTx() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()
	g := triggeronce.NewFirestore(client, quiet)

	user := client.Doc("users/u1")
	user.Set(ctx, map[string]any{"postCount": 1})
	decrement := func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(user) // reads first, then writes
		if err != nil {
			return err
		}
		if n, _ := snap.DataAt("postCount"); n.(int64) <= 0 {
			return nil // never below zero
		}
		return tx.Update(user, []firestore.Update{{Path: "postCount", Value: firestore.Increment(-1)}})
	}
	for _, id := range []string{"delete-1", "delete-1", "delete-2"} {
		outcome, err := g.RunTx(ctx, triggeronce.Key{EventID: id, Function: "decrementPostCount"}, triggeronce.Meta{}, decrement)
		fmt.Println(id, outcome, err)
	}
	snap, _ := user.Get(ctx)
	fmt.Println("postCount:", snap.Data()["postCount"])
	// Output:
	// delete-1 executed <nil>
	// delete-1 duplicate <nil>
	// delete-2 executed <nil>
	// postCount: 0
}

func ExampleHasAlreadyTriggered() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()

	for _, function := range []string{"incrementPostCount", "incrementPostCount", "sendPostNotification"} {
		seen, err := triggeronce.HasAlreadyTriggered(ctx, client, "event-1", function)
		fmt.Println(function, seen, err)
	}
	// Output:
	// incrementPostCount false <nil>
	// incrementPostCount true <nil>
	// sendPostNotification false <nil>
}

func ExampleCloudEvent() {
	client, done := exampleClient()
	defer done()
	g := triggeronce.NewFirestore(client, quiet)

	handler := triggeronce.CloudEvent(g, "sendPostNotification", func(ctx context.Context, e event.Event) error {
		fmt.Println("notify followers of", e.Subject())
		return nil
	})
	// In a function: functions.CloudEvent("sendPostNotification", handler)

	e := event.New()
	e.SetID("event-1")
	e.SetType("google.cloud.firestore.document.v1.created")
	e.SetSource("//firestore.googleapis.com/projects/demo/databases/(default)")
	e.SetSubject("documents/users/u1/posts/p1")
	fmt.Println(handler(context.Background(), e))
	fmt.Println(handler(context.Background(), e)) // a redelivery
	// Output:
	// notify followers of documents/users/u1/posts/p1
	// <nil>
	// <nil>
}
