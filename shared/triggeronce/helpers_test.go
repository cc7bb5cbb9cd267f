package triggeronce_test

import (
	"context"
	"crypto/rand"
	"log/slog"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/fireonce/fireonce/shared/firestoretest"
	"github.com/fireonce/fireonce/shared/grpccount"
	"github.com/fireonce/fireonce/shared/logtest"
	"github.com/fireonce/fireonce/shared/triggeronce"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func newEventID() string { return "evt-" + rand.Text() }

// newGuard returns a Guard on a fresh emulator project, logging to the
// returned buffer.
func newGuard(t *testing.T, opts *triggeronce.Options) (*triggeronce.Guard, *firestoretest.Env, *logtest.Buffer) {
	t.Helper()
	env := firestoretest.New(t)
	g, logs := guardOn(env.Client, opts)
	return g, env, logs
}

// guardOn returns a Guard on client, logging to the returned buffer.
func guardOn(client *firestore.Client, opts *triggeronce.Options) (*triggeronce.Guard, *logtest.Buffer) {
	logs := &logtest.Buffer{}
	o := triggeronce.Options{}
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return triggeronce.NewFirestore(client, &o), logs
}

// countingClient returns a client on env's project whose RPCs are counted
// (see grpccount.EmulatorClient for why it dials its own connection).
func countingClient(t *testing.T, env *firestoretest.Env) (*firestore.Client, *grpccount.Counter) {
	t.Helper()
	counter := &grpccount.Counter{}
	client, err := grpccount.EmulatorClient(context.Background(), env.Host, env.ProjectID, counter)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return client, counter
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, deadline time.Duration, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s", deadline, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
