package triggeronce_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/fireonce/fireonce/shared/firestoretest"
	"github.com/fireonce/fireonce/shared/triggeronce"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func newEventID() string { return "evt-" + rand.Text() }

// logBuffer collects JSON log records for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// records returns the logged records as maps.
func (b *logBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(b.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// newGuard returns a Guard on a fresh emulator project, logging to the
// returned buffer.
func newGuard(t *testing.T, opts *triggeronce.Options) (*triggeronce.Guard, *firestoretest.Env, *logBuffer) {
	t.Helper()
	env := firestoretest.New(t)
	g, logs := guardOn(env.Client, opts)
	return g, env, logs
}

// guardOn returns a Guard on client, logging to the returned buffer.
func guardOn(client *firestore.Client, opts *triggeronce.Options) (*triggeronce.Guard, *logBuffer) {
	logs := &logBuffer{}
	o := triggeronce.Options{}
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return triggeronce.NewFirestore(client, &o), logs
}

// rpcCounter counts the RPCs a client makes: every unary call and every
// stream opened (BatchGetDocuments, which Get uses, is a server stream).
type rpcCounter struct {
	mu    sync.Mutex
	calls []string
}

func (c *rpcCounter) add(method string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, path.Base(method))
}

// take returns the calls counted since the last take and resets.
func (c *rpcCounter) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls := c.calls
	c.calls = nil
	return calls
}

type ownerCreds struct{}

func (ownerCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer owner"}, nil
}
func (ownerCreds) RequireTransportSecurity() bool { return false }

// countingClient returns a client on env's project whose RPCs are counted.
//
// Under FIRESTORE_EMULATOR_HOST the firestore client dials the emulator
// itself and passes the connection as option.WithGRPCConn, so interceptors
// given with option.WithGRPCDialOption never see a call. We dial our own
// connection (with the emulator's "Bearer owner" credentials) and pass it
// last, which wins.
func countingClient(t *testing.T, env *firestoretest.Env) (*firestore.Client, *rpcCounter) {
	t.Helper()
	counter := &rpcCounter{}
	conn, err := grpc.NewClient("passthrough:///"+env.Host,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(ownerCreds{}),
		grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			counter.add(method)
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			counter.add(method)
			return streamer(ctx, desc, cc, method, opts...)
		}),
	)
	if err != nil {
		t.Fatalf("dial emulator: %v", err)
	}
	client, err := firestore.NewClient(context.Background(), env.ProjectID, option.WithGRPCConn(conn))
	if err != nil {
		t.Fatalf("firestore.NewClient: %v", err)
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
