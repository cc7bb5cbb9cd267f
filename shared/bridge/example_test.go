package bridge_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/fireonce/fireonce/shared/bridge"
	"github.com/fireonce/fireonce/shared/firestoreemulator"
)

// The dev loop's wiring: the bridge listens first, the emulator delivers to
// it, then the bridge registers the table's triggers. Not run: it needs java
// and a functions server on :8080.
func Example() {
	ctx := context.Background()
	triggers := []bridge.Trigger{{
		Name:            "incrementPostCount",
		EventType:       "google.cloud.firestore.document.v1.created",
		DocumentPattern: "users/{userID}/posts/{postID}",
	}}
	b, err := bridge.New("demo-fireonce", "http://127.0.0.1:8080", triggers, &bridge.Options{
		Duplicates:     2,
		RedeliverAfter: 5 * time.Second,
		Retry:          true,
		Logger:         slog.New(slog.NewJSONHandler(os.Stderr, nil)),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := b.Start("127.0.0.1:9299"); err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	emu, err := firestoreemulator.Start(ctx, &firestoreemulator.Options{
		Port: 8180, WebsocketPort: 8181, ProjectID: "demo-fireonce",
		RulesFile: "firestore.rules", FunctionsEmulator: b.Addr(),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer emu.Stop()
	if err := b.Register(ctx, emu.Host()); err != nil {
		log.Fatal(err)
	}
	// ... write documents, then wait for the events and their deliveries:
	_ = b.Idle(ctx)
	s := b.Stats()
	fmt.Printf("events %d, deliveries %d, failures %d\n", s.Events, s.Deliveries, s.Failures)
}
