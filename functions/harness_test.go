package functions

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"firebase.google.com/go/v4/messaging"
	"github.com/cloudevents/sdk-go/v2/event"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fireonce/fireonce/shared/cloudlog"
	"github.com/fireonce/fireonce/shared/fcmemulator"
	"github.com/fireonce/fireonce/shared/firestoreevent/firestoreeventtest"
	"github.com/fireonce/fireonce/shared/firestoretest"
	"github.com/fireonce/fireonce/shared/logtest"
	"github.com/fireonce/fireonce/shared/triggeronce"
)

// harness is one isolated world for handler tests: a project of its own on
// the Firestore emulator, an FCM stand-in reached by the real
// firebase-admin-go client through FCM_ENDPOINT's code path (depsFromConfig),
// and a Service logging to a buffer.
type harness struct {
	t          *testing.T
	env        *firestoretest.Env
	fcm        *fcmemulator.Server
	fcmURL     string
	deps       *Deps
	multicasts *recordingMessenger
	logs       *logtest.Buffer
	svc        *Service
}

type harnessOptions struct {
	// wrapFCM, when set, wraps the FCM stand-in's handler (to answer what
	// the stand-in cannot, such as a gateway error).
	wrapFCM func(http.Handler) http.Handler
	// redisURL, when set, puts sendPostNotification's guard on Redis
	// (FIREONCE_STORE=redis).
	redisURL string
}

func newHarness(t *testing.T, opts *harnessOptions) *harness {
	t.Helper()
	env := firestoretest.New(t)
	fcm := fcmemulator.New(nil)
	var handler http.Handler = fcm.Handler()
	if opts != nil && opts.wrapFCM != nil {
		handler = opts.wrapFCM(handler)
	}
	ts := httptest.NewServer(handler)
	t.Cleanup(ts.Close)

	cfg := Config{ProjectID: env.ProjectID, FCMEndpoint: ts.URL + "/v1", Store: "firestore"}
	if opts != nil && opts.redisURL != "" {
		cfg.Store, cfg.RedisURL = "redis", opts.redisURL
	}
	d, err := depsFromConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("depsFromConfig: %v", err)
	}
	t.Cleanup(func() { d.Firestore.Close() })
	rec := &recordingMessenger{next: d.Messaging}
	d.Messaging = rec
	logs := &logtest.Buffer{}
	return &harness{
		t: t, env: env, fcm: fcm, fcmURL: ts.URL, deps: d, multicasts: rec, logs: logs,
		svc: NewService(d, cloudlog.New(logs, slog.LevelDebug)),
	}
}

// recordingMessenger records the size of every multicast before handing it
// to the real client.
type recordingMessenger struct {
	next Messenger

	mu    sync.Mutex
	sizes []int
}

func (r *recordingMessenger) SendEachForMulticast(ctx context.Context, m *messaging.MulticastMessage) (*messaging.BatchResponse, error) {
	r.mu.Lock()
	r.sizes = append(r.sizes, len(m.Tokens))
	r.mu.Unlock()
	return r.next.SendEachForMulticast(ctx, m)
}

func (r *recordingMessenger) Sizes() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.sizes)
}

// invocationLogFields are the fields every invocation's line carries.
var invocationLogFields = []string{"severity", "message", "function", "eventID", "document", "outcome", "sent", "pruned", "durationMs"}

// invoke runs function name on e and returns its error and its one log
// line, failing the test unless the invocation logged exactly one line with
// every field of invocationLogFields.
func (h *harness) invoke(ctx context.Context, name string, e event.Event) (error, map[string]any) {
	h.t.Helper()
	h.logs.Take(h.t) // forget lines of earlier invocations
	err := h.svc.Handler(name)(ctx, e)
	lines := h.logs.Take(h.t)
	if len(lines) != 1 {
		h.t.Fatalf("%s logged %d lines, want 1: %v", name, len(lines), lines)
	}
	line := lines[0]
	for _, k := range invocationLogFields {
		if _, ok := line[k]; !ok {
			h.t.Fatalf("%s: log line has no %q: %v", name, k, line)
		}
	}
	if line["function"] != name || line["eventID"] != e.ID() {
		h.t.Fatalf("log line names function %v event %v, want %s %s", line["function"], line["eventID"], name, e.ID())
	}
	return err, line
}

// expectLine checks the outcome, severity and counts of a log line.
func expectLine(t *testing.T, line map[string]any, outcome triggeronce.Outcome, severity string, sent, pruned int) {
	t.Helper()
	if line["outcome"] != string(outcome) || line["severity"] != severity ||
		line["sent"] != float64(sent) || line["pruned"] != float64(pruned) {
		t.Fatalf("log line %v: want outcome %s severity %s sent %d pruned %d", line, outcome, severity, sent, pruned)
	}
}

// Data seeding.

func (h *harness) setDocs(docs map[string]map[string]any) {
	h.t.Helper()
	ctx := context.Background()
	bw := h.env.Client.BulkWriter(ctx)
	var jobs []*firestore.BulkWriterJob
	for path, data := range docs {
		j, err := bw.Set(h.env.Client.Doc(path), data)
		if err != nil {
			h.t.Fatal(err)
		}
		jobs = append(jobs, j)
	}
	bw.End()
	for _, j := range jobs {
		if _, err := j.Results(); err != nil {
			h.t.Fatalf("seed: %v", err)
		}
	}
}

// world describes users, who follows whom and their devices.
type world struct {
	users     map[string]string   // userID -> displayName
	counts    map[string]int      // userID -> initial postCount
	followers map[string][]string // author -> followers
	tokens    map[string][]string // user -> device tokens
}

func (h *harness) seed(w world) {
	h.t.Helper()
	docs := map[string]map[string]any{}
	now := time.Now()
	for u, name := range w.users {
		docs["users/"+u] = map[string]any{"displayName": name}
	}
	for u, n := range w.counts {
		doc := docs["users/"+u]
		if doc == nil {
			doc = map[string]any{}
			docs["users/"+u] = doc
		}
		doc[postCountField] = n
	}
	for a, fs := range w.followers {
		for _, f := range fs {
			docs["users/"+a+"/followers/"+f] = map[string]any{"createdAt": now}
		}
	}
	for u, ts := range w.tokens {
		for _, tok := range ts {
			docs["users/"+u+"/fcmTokens/"+tok] = map[string]any{"createdAt": now}
		}
	}
	h.setDocs(docs)
}

// Events.

func postFields(title string) map[string]any {
	return map[string]any{"title": title, "body": "body of " + title, "createdAt": time.Now()}
}

func (h *harness) change(typ, doc string, fields map[string]any) firestoreeventtest.Change {
	c := firestoreeventtest.Change{ID: newEventID(), Type: typ, Project: h.env.ProjectID, Document: doc}
	if typ == EventDeleted {
		c.Before = fields
	} else {
		c.After = fields
	}
	return c
}

func (h *harness) created(userID, postID, title string) event.Event {
	h.t.Helper()
	return mustEvent(h.t, h.change(EventCreated, "users/"+userID+"/posts/"+postID, postFields(title)))
}

func (h *harness) deleted(userID, postID string) event.Event {
	h.t.Helper()
	return mustEvent(h.t, h.change(EventDeleted, "users/"+userID+"/posts/"+postID, postFields("gone")))
}

func mustEvent(t *testing.T, c firestoreeventtest.Change) event.Event {
	t.Helper()
	e, err := c.Event()
	if err != nil {
		t.Fatal(err)
	}
	return e
}

var eventSeq struct {
	sync.Mutex
	n int
}

// newEventID returns an ID unique in this test binary, shaped like
// Eventarc's.
func newEventID() string {
	eventSeq.Lock()
	defer eventSeq.Unlock()
	eventSeq.n++
	return fmt.Sprintf("evt-%d-%d", time.Now().UnixNano(), eventSeq.n)
}

// Reading the outcome.

// marker returns the state of the guard's marker for (eventID, function),
// "" when there is none.
func (h *harness) marker(eventID, function string) string {
	h.t.Helper()
	id := triggeronce.Key{EventID: eventID, Function: function}.ID()
	snap, err := h.env.Client.Collection(markerCollection).Doc(id).Get(context.Background())
	if status.Code(err) == codes.NotFound {
		return ""
	}
	if err != nil {
		h.t.Fatal(err)
	}
	s, _ := snap.Data()["state"].(string)
	return s
}

// markers returns every marker document.
func markers(t *testing.T, client *firestore.Client) []*firestore.DocumentSnapshot {
	t.Helper()
	snaps, err := client.Collection(markerCollection).Documents(context.Background()).GetAll()
	if err != nil {
		t.Fatal(err)
	}
	return snaps
}

// postCount returns users/{userID}.postCount and whether the user document
// exists.
func postCount(t *testing.T, client *firestore.Client, userID string) (int64, bool) {
	t.Helper()
	snap, err := client.Collection("users").Doc(userID).Get(context.Background())
	if status.Code(err) == codes.NotFound {
		return 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	v, err := snap.DataAt(postCountField)
	if err != nil {
		t.Fatalf("users/%s has no %s: %v", userID, postCountField, err)
	}
	n, ok := v.(int64)
	if !ok {
		t.Fatalf("users/%s.%s = %v (%T), want an integer", userID, postCountField, v, v)
	}
	return n, true
}

// tokenExists reports whether users/{userID}/fcmTokens/{token} exists.
func (h *harness) tokenExists(userID, token string) bool {
	h.t.Helper()
	_, err := h.env.Client.Collection("users").Doc(userID).Collection("fcmTokens").Doc(token).Get(context.Background())
	if status.Code(err) == codes.NotFound {
		return false
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return true
}

// pushesPerToken counts the delivered pushes of the stand-in by token.
func pushesPerToken(fcm *fcmemulator.Server) map[string]int {
	got := map[string]int{}
	for _, m := range fcm.Messages() {
		got[m.Token]++
	}
	return got
}

// expectPushes fails t unless every token of want got exactly want[token]
// pushes and no other token got any.
func expectPushes(t *testing.T, fcm *fcmemulator.Server, want map[string]int) {
	t.Helper()
	got := pushesPerToken(fcm)
	for tok, n := range want {
		if got[tok] != n {
			t.Errorf("token %s got %d pushes, want %d", tok, got[tok], n)
		}
	}
	for tok, n := range got {
		if _, ok := want[tok]; !ok {
			t.Errorf("token %s got %d pushes, want none", tok, n)
		}
	}
}

func each(tokens []string, n int) map[string]int {
	m := map[string]int{}
	for _, t := range tokens {
		m[t] = n
	}
	return m
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
