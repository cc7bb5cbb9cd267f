// Command capture records real deliveries of the Firestore emulator, as it
// sends them to its --functions_emulator address, and saves them as the
// bridge's test fixtures. Run it with `go generate ./shared/bridge`; it needs
// java and the Google Cloud CLI's Firestore emulator.
//
// It starts an emulator of its own delivering to a local listener, registers
// a created and a deleted trigger on users/{userID}/posts/{postID}, creates
// users/u1/posts/p1 and deletes it through the emulator's REST API, and
// writes each delivery's method, path, headers and body (kept as received:
// the emulator sends the protobuf as base64 text) to
// <dir>/delivery_<trigger>.json.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fireonce/fireonce/shared/emulatorapi"
	"github.com/fireonce/fireonce/shared/firestoreemulator"
)

// Fixture is one delivery as the emulator sent it.
type Fixture struct {
	Comment  string      `json:"comment"`
	Captured string      `json:"captured"`
	Method   string      `json:"method"`
	Path     string      `json:"path"`
	Header   http.Header `json:"header"`
	Body     string      `json:"body"`
}

const project = "demo-capture"

func main() {
	dir := flag.String("dir", "testdata", "directory for the fixtures")
	flag.Parse()
	if err := run(*dir); err != nil {
		log.Fatal(err)
	}
}

func run(dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	got := make(chan Fixture, 8)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- Fixture{Method: r.Method, Path: r.URL.RequestURI(), Header: r.Header.Clone(), Body: string(body),
			Captured: time.Now().UTC().Format(time.RFC3339)}
	})}
	go srv.Serve(ln)
	defer srv.Close()

	emu, err := firestoreemulator.Start(ctx, &firestoreemulator.Options{
		ProjectID: project, FunctionsEmulator: ln.Addr().String(), Log: os.Stderr,
	})
	if err != nil {
		return err
	}
	defer emu.Stop()

	api := emulatorapi.New(emu.Host(), project)
	triggers := map[string]string{
		"sendPostNotification": "google.cloud.firestore.document.v1.created",
		"decrementPostCount":   "google.cloud.firestore.document.v1.deleted",
	}
	for id, typ := range triggers {
		if err := api.RegisterTrigger(ctx, id, emulatorapi.Trigger{
			EventType: typ, DocumentPattern: "users/{userID}/posts/{postID}",
		}); err != nil {
			return err
		}
	}
	admin := api.Admin()
	r, err := admin.Create(ctx, "users/u1/posts", "p1", map[string]any{
		"title": "Hello", "body": "First post",
		"createdAt": time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
	})
	if err != nil || !r.OK() {
		return fmt.Errorf("create: %v %v", err, r)
	}
	if err := save(ctx, dir, got, "sendPostNotification"); err != nil {
		return err
	}
	if r, err = admin.Delete(ctx, "users/u1/posts/p1"); err != nil || !r.OK() {
		return fmt.Errorf("delete: %v %v", err, r)
	}
	return save(ctx, dir, got, "decrementPostCount")
}

func save(ctx context.Context, dir string, got <-chan Fixture, trigger string) error {
	select {
	case <-ctx.Done():
		return fmt.Errorf("no delivery for %s: %w", trigger, ctx.Err())
	case f := <-got:
		if !strings.HasSuffix(f.Path, "/triggers/"+trigger) {
			return fmt.Errorf("delivery to %s, want trigger %s", f.Path, trigger)
		}
		f.Comment = "A real delivery of the Firestore emulator to its --functions_emulator address, " +
			"recorded by shared/bridge/internal/capture (go generate ./shared/bridge). " +
			"The body is kept as received: base64 text of a DocumentEventData protobuf."
		b, err := json.MarshalIndent(f, "", "  ")
		if err != nil {
			return err
		}
		name := filepath.Join(dir, "delivery_"+trigger+".json")
		log.Printf("capture: %s %s -> %s", f.Method, f.Path, name)
		return os.WriteFile(name, append(b, '\n'), 0o644)
	}
}
