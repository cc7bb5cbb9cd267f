// Package firestoretest gives tests an isolated Firestore on the emulator.
//
// Each call to New uses a fresh project ID, so tests (and test packages run
// in parallel by go test) never see each other's documents. The emulator is
// found through FIRESTORE_EMULATOR_HOST, which ./scripts/test.sh sets after
// starting it. When the variable is unset or the emulator does not answer,
// New fails the test with a message saying how to run it: tests that need the
// emulator never skip silently.
package firestoretest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
)

// EnvHost is the variable the Firestore client reads to reach the emulator.
const EnvHost = "FIRESTORE_EMULATOR_HOST"

// Env describes one isolated Firestore on the emulator.
type Env struct {
	// Host is the emulator's host:port.
	Host string
	// ProjectID is unique to this Env.
	ProjectID string
	// Client talks to ProjectID on the emulator with admin rights (the Go
	// client sends "Bearer owner", which bypasses security rules).
	Client *firestore.Client
}

// Host returns the emulator's host:port, failing t with instructions when it
// is not configured or not answering.
func Host(t testing.TB) string {
	t.Helper()
	host := os.Getenv(EnvHost)
	if host == "" {
		t.Fatalf("firestoretest: %s is not set; this test needs the Firestore emulator. "+
			"Run ./scripts/test.sh, which starts it, or start one with "+
			"`gcloud emulators firestore start --host-port=127.0.0.1:8180` and export %s=127.0.0.1:8180",
			EnvHost, EnvHost)
	}
	conn, err := net.DialTimeout("tcp", host, 3*time.Second)
	if err != nil {
		t.Fatalf("firestoretest: the Firestore emulator at %s=%s does not answer: %v. "+
			"Run ./scripts/test.sh, which starts it.", EnvHost, host, err)
	}
	conn.Close()
	return host
}

// NewProjectID returns a project ID no other test uses. Emulator project IDs
// starting with "demo-" never reach production by mistake.
func NewProjectID(t testing.TB) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("firestoretest: random project ID: %v", err)
	}
	name := strings.ToLower(t.Name())
	name = strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			return r
		}
		return '-'
	}, name)
	if len(name) > 12 {
		name = name[:12]
	}
	return "demo-" + strings.Trim(name, "-") + "-" + hex.EncodeToString(b[:])
}

// New returns an Env with its own project ID and a client closed when the
// test ends. Its data is deleted at the end of the test.
func New(t testing.TB) *Env {
	t.Helper()
	host := Host(t)
	project := NewProjectID(t)
	client, err := firestore.NewClient(context.Background(), project)
	if err != nil {
		t.Fatalf("firestoretest: firestore.NewClient(%q): %v", project, err)
	}
	env := &Env{Host: host, ProjectID: project, Client: client}
	t.Cleanup(func() {
		client.Close()
		_ = ClearProject(context.Background(), host, project)
	})
	return env
}

// ClearProject deletes every document of project on the emulator at host.
func ClearProject(ctx context.Context, host, project string) error {
	url := fmt.Sprintf("http://%s/emulator/v1/projects/%s/databases/(default)/documents", host, project)
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("firestoretest: clear %s: %w", project, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("firestoretest: clear %s: %s", project, resp.Status)
	}
	return nil
}
