package emulatorapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fireonce/fireonce/shared/emulatorapi"
	"github.com/fireonce/fireonce/shared/firestoretest"
)

// newClient returns a Client on a fresh project of the shared emulator,
// cleared when the test ends.
func newClient(t *testing.T) *emulatorapi.Client {
	t.Helper()
	c := emulatorapi.New(firestoretest.Host(t), firestoretest.NewProjectID(t))
	t.Cleanup(func() { _ = c.ClearDocuments(context.Background()) })
	return c
}

const testRules = `rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    match /private/{uid} {
      allow read, write: if request.auth != null && request.auth.uid == uid
        && request.auth.token.firebase.sign_in_provider == 'password';
    }
    match /stamped/{id} {
      allow create: if request.resource.data.createdAt == request.time;
    }
    match /open/{document=**} {
      allow read, write: if true;
    }
  }
}
`

func TestLoadRules(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	if err := c.LoadRules(ctx, testRules); err != nil {
		t.Fatalf("LoadRules(valid): %v", err)
	}
	err := c.LoadRules(ctx, "rules_version = '2';\nservice cloud.firestore { match /x { allow read: if foo( } }")
	if err == nil || !strings.Contains(err.Error(), "Error compiling rules") || !strings.Contains(err.Error(), "L2:") {
		t.Fatalf("LoadRules(broken) = %v, want the emulator's compile error with its line", err)
	}
}

func TestIdentities(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	if err := c.LoadRules(ctx, testRules); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Admin().Set(ctx, "private/alice", map[string]any{"n": 1}, nil); err != nil || !r.OK() {
		t.Fatalf("Admin seed: %v %v", r, err)
	}
	tests := []struct {
		name string
		user *emulatorapi.User
		want int
	}{
		{"owner", c.As("alice"), http.StatusOK},
		{"other user", c.As("bob"), http.StatusForbidden},
		{"unauthenticated", c.As(""), http.StatusForbidden},
		{"admin bypasses rules", c.Admin(), http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := tt.user.Get(ctx, "private/alice")
			if err != nil {
				t.Fatal(err)
			}
			if r.StatusCode != tt.want {
				t.Fatalf("Get = %v, want %d", r, tt.want)
			}
			if r.StatusCode == http.StatusForbidden && r.Status != "PERMISSION_DENIED" {
				t.Fatalf("denial status = %q, want PERMISSION_DENIED", r.Status)
			}
		})
	}
}

func TestServerTime(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	if err := c.LoadRules(ctx, testRules); err != nil {
		t.Fatal(err)
	}
	u := c.As("alice")
	r, err := u.Create(ctx, "stamped", "a", map[string]any{"createdAt": emulatorapi.ServerTime})
	if err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("Create with ServerTime = %v, %v; want 200", r, err)
	}
	r, err = u.Create(ctx, "stamped", "b", map[string]any{"createdAt": time.Now()})
	if err != nil || r.StatusCode != http.StatusForbidden {
		t.Fatalf("Create with a client time = %v, %v; want 403", r, err)
	}
	r, err = c.Admin().Get(ctx, "stamped/a")
	if err != nil {
		t.Fatal(err)
	}
	d, err := r.Document()
	if err != nil {
		t.Fatal(err)
	}
	if ts, ok := d.Fields["createdAt"].(time.Time); !ok || time.Since(ts) > time.Minute || time.Since(ts) < -time.Minute {
		t.Fatalf("createdAt = %v, want a recent timestamp", d.Fields["createdAt"])
	}
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	at := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	in := map[string]any{
		"s": "x", "i": 42, "f": 1.5, "b": true, "n": nil, "t": at,
		"m":   map[string]any{"k": "v", "odd key": int64(-1)},
		"a":   []any{"x", 2},
		"raw": []byte{0, 1, 2},
	}
	want := map[string]any{
		"s": "x", "i": int64(42), "f": 1.5, "b": true, "n": nil, "t": at,
		"m":   map[string]any{"k": "v", "odd key": int64(-1)},
		"a":   []any{"x", int64(2)},
		"raw": []byte{0, 1, 2},
	}
	// An FCM token is a document ID with a colon: it must not be read as a
	// custom method in the URL.
	path := "open/u1/fcmTokens/abc:APA91b-x_y"
	admin := c.Admin()
	if r, err := admin.Set(ctx, path, in, nil); err != nil || !r.OK() {
		t.Fatalf("Set: %v %v", r, err)
	}
	r, err := admin.Get(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := r.Document()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d.Fields, want) {
		t.Fatalf("fields = %#v\nwant %#v", d.Fields, want)
	}
	if !strings.HasSuffix(d.Name, "/documents/"+path) {
		t.Fatalf("name = %q", d.Name)
	}
	r, err = admin.List(ctx, "open/u1/fcmTokens")
	if err != nil {
		t.Fatal(err)
	}
	if docs, err := r.Documents(); err != nil || len(docs) != 1 {
		t.Fatalf("List = %v docs, %v; want 1", len(docs), err)
	}
}

func TestWrites(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	u := c.Admin()
	steps := []struct {
		name string
		do   func() (*emulatorapi.Response, error)
		want int
	}{
		{"create", func() (*emulatorapi.Response, error) {
			return u.Create(ctx, "open", "d", map[string]any{"a": 1, "b": 2})
		}, 200},
		{"create again conflicts", func() (*emulatorapi.Response, error) {
			return u.Create(ctx, "open", "d", map[string]any{"a": 1})
		}, http.StatusConflict},
		{"patch keeps other fields", func() (*emulatorapi.Response, error) {
			return u.Patch(ctx, "open/d", map[string]any{"a": 10}, nil)
		}, 200},
		{"patch a missing document", func() (*emulatorapi.Response, error) {
			return u.Patch(ctx, "open/missing", map[string]any{"a": 1}, nil)
		}, http.StatusNotFound},
		{"set replaces", func() (*emulatorapi.Response, error) {
			return u.Set(ctx, "open/e", map[string]any{"x": 1}, nil)
		}, 200},
		{"delete", func() (*emulatorapi.Response, error) {
			return u.Delete(ctx, "open/e")
		}, 200},
	}
	for _, s := range steps {
		r, err := s.do()
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if r.StatusCode != s.want {
			t.Fatalf("%s: %v, want %d", s.name, r, s.want)
		}
	}
	r, _ := u.Get(ctx, "open/d")
	d, err := r.Document()
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"a": int64(10), "b": int64(2)}; !reflect.DeepEqual(d.Fields, want) {
		t.Fatalf("after patch: %v, want %v", d.Fields, want)
	}
	if r, err := u.Patch(ctx, "open/d", map[string]any{}, &emulatorapi.WriteOptions{UpdateMask: []string{"b"}}); err != nil || !r.OK() {
		t.Fatalf("patch deleting b: %v %v", r, err)
	}
	r, _ = u.Get(ctx, "open/d")
	if d, _ := r.Document(); !reflect.DeepEqual(d.Fields, map[string]any{"a": int64(10)}) {
		t.Fatalf("after masked delete: %v", d.Fields)
	}
	if r, _ := u.Get(ctx, "open/e"); r.StatusCode != http.StatusNotFound {
		t.Fatalf("deleted document: %v, want 404", r)
	}
	if _, err := u.Get(ctx, "open"); err == nil {
		t.Fatal("Get(collection path) did not fail")
	}
}

func TestRegisterTriggerAndClear(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	err := c.RegisterTrigger(ctx, "t1", emulatorapi.Trigger{
		EventType:       "google.cloud.firestore.document.v1.created",
		DocumentPattern: "open/{id}",
	})
	if err != nil {
		t.Fatalf("RegisterTrigger: %v", err)
	}
	// A trigger registered without a database breaks every later write
	// with 500; this write proves RegisterTrigger sent one.
	admin := c.Admin()
	if r, err := admin.Set(ctx, "open/x", map[string]any{"a": 1}, nil); err != nil || !r.OK() {
		t.Fatalf("write after RegisterTrigger: %v %v", r, err)
	}
	if err := c.RegisterTrigger(ctx, "", emulatorapi.Trigger{}); err == nil {
		t.Fatal("RegisterTrigger without id succeeded")
	}
	if err := c.ClearDocuments(ctx); err != nil {
		t.Fatalf("ClearDocuments: %v", err)
	}
	if r, _ := admin.Get(ctx, "open/x"); r.StatusCode != http.StatusNotFound {
		t.Fatalf("after ClearDocuments: %v, want 404", r)
	}
}

// TestReset checks the request on a fake server: POST /reset clears every
// project on an emulator, so it must not run against the shared one.
func TestReset(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Method + " " + r.URL.Path
		if r.URL.Path != "/reset" {
			http.Error(w, "Not Found", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	c := emulatorapi.New(strings.TrimPrefix(srv.URL, "http://"), "demo-x")
	if err := c.Reset(context.Background()); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	if got != "POST /reset" {
		t.Fatalf("request = %q, want POST /reset", got)
	}
}

func TestEncodeValue(t *testing.T) {
	tests := []struct {
		in   any
		want string
	}{
		{nil, `{"nullValue":null}`},
		{"s", `{"stringValue":"s"}`},
		{7, `{"integerValue":"7"}`},
		{uint8(7), `{"integerValue":"7"}`},
		{2.5, `{"doubleValue":2.5}`},
		{false, `{"booleanValue":false}`},
		{time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("x", 3600)), `{"timestampValue":"2025-12-31T23:00:00Z"}`},
		{[]string{"a"}, `{"arrayValue":{"values":[{"stringValue":"a"}]}}`},
		{map[string]int{"k": 1}, `{"mapValue":{"fields":{"k":{"integerValue":"1"}}}}`},
	}
	for _, tt := range tests {
		v, err := emulatorapi.EncodeValue(tt.in)
		if err != nil {
			t.Errorf("EncodeValue(%#v): %v", tt.in, err)
			continue
		}
		if got := mustJSON(t, v); got != tt.want {
			t.Errorf("EncodeValue(%#v) = %s, want %s", tt.in, got, tt.want)
		}
	}
	for _, bad := range []any{uint64(1 << 63), map[int]int{1: 1}, make(chan int), emulatorapi.ServerTime, []any{emulatorapi.ServerTime}} {
		if _, err := emulatorapi.EncodeValue(bad); err == nil {
			t.Errorf("EncodeValue(%#v) succeeded", bad)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
