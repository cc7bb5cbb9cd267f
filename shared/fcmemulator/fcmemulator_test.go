package fcmemulator_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	firebase "firebase.google.com/go/v4"
	"firebase.google.com/go/v4/messaging"
	"google.golang.org/api/option"

	"github.com/fireonce/fireonce/shared/fcmemulator"
	"github.com/fireonce/fireonce/shared/logtest"
)

const project = "demo-fcm"

// client returns the real firebase-admin-go messaging client pointed at base.
func client(t *testing.T, base string) *messaging.Client {
	t.Helper()
	ctx := context.Background()
	app, err := firebase.NewApp(ctx, &firebase.Config{ProjectID: project},
		option.WithEndpoint(base+"/v1"), option.WithoutAuthentication())
	if err != nil {
		t.Fatalf("firebase.NewApp: %v", err)
	}
	c, err := app.Messaging(ctx)
	if err != nil {
		t.Fatalf("app.Messaging: %v", err)
	}
	return c
}

// serve returns a Server behind httptest and a messaging client for it.
func serve(t *testing.T, opts *fcmemulator.Options) (*fcmemulator.Server, *messaging.Client) {
	t.Helper()
	s := fcmemulator.New(opts)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, client(t, ts.URL)
}

func multicast(tokens ...string) *messaging.MulticastMessage {
	return &messaging.MulticastMessage{
		Tokens:       tokens,
		Notification: &messaging.Notification{Title: "New post from Ada", Body: "Hello"},
		Data:         map[string]string{"userID": "u1", "postID": "p1"},
	}
}

func TestMulticastRecordsAndLogsEachPush(t *testing.T) {
	var logs logtest.Buffer
	s, c := serve(t, &fcmemulator.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	tokens := []string{"tok-a", "tok-b", "tok-c"}
	br, err := c.SendEachForMulticast(context.Background(), multicast(tokens...))
	if err != nil {
		t.Fatalf("SendEachForMulticast: %v", err)
	}
	if br.SuccessCount != 3 {
		t.Fatalf("SuccessCount = %d, want 3: %+v", br.SuccessCount, br.Responses)
	}
	names := map[string]bool{}
	for i, r := range br.Responses {
		if !strings.HasPrefix(r.MessageID, "projects/"+project+"/messages/") || names[r.MessageID] {
			t.Errorf("response %d: message ID %q not a fresh projects/%s/messages/N", i, r.MessageID, project)
		}
		names[r.MessageID] = true
	}
	msgs := s.Messages()
	if len(msgs) != 3 {
		t.Fatalf("Messages() has %d, want 3", len(msgs))
	}
	for _, m := range msgs {
		if m.Project != project || m.Title != "New post from Ada" || m.Body != "Hello" ||
			m.Data["userID"] != "u1" || m.Data["postID"] != "p1" || m.Time.IsZero() {
			t.Errorf("recorded %+v", m)
		}
	}
	for _, tok := range tokens {
		if n := s.PushesTo(tok); n != 1 {
			t.Errorf("PushesTo(%s) = %d, want 1", tok, n)
		}
		for _, want := range []string{`"token":"` + tok + `"`, `"title":"New post from Ada"`, `"body":"Hello"`} {
			if !strings.Contains(logs.String(), want) {
				t.Errorf("logs lack %s:\n%s", want, logs.String())
			}
		}
	}
}

func TestDeadTokens(t *testing.T) {
	s, c := serve(t, &fcmemulator.Options{Unregistered: []string{"gone"}, Invalid: []string{"junk"}})
	s.SetUnregistered("gone-later")
	tests := []struct {
		token string
		is    func(error) bool
		name  string
	}{
		{"gone", messaging.IsUnregistered, "IsUnregistered"},
		{"gone-later", messaging.IsUnregistered, "IsUnregistered"},
		{"junk", messaging.IsInvalidArgument, "IsInvalidArgument"},
	}
	for _, tt := range tests {
		t.Run(tt.token, func(t *testing.T) {
			br, err := c.SendEachForMulticast(context.Background(), multicast("ok", tt.token))
			if err != nil {
				t.Fatalf("SendEachForMulticast: %v", err)
			}
			if !br.Responses[0].Success {
				t.Errorf("healthy token failed: %v", br.Responses[0].Error)
			}
			if err := br.Responses[1].Error; !tt.is(err) {
				t.Errorf("%s(%v) = false", tt.name, err)
			}
			if n := s.PushesTo(tt.token); n != 0 {
				t.Errorf("PushesTo(%s) = %d, want 0", tt.token, n)
			}
		})
	}
}

// The real client retries 503 by itself (0 s, 1 s, 2 s, 4 s: 5 attempts) and
// never retries 500; each case goes through it.
func TestInjectedFailures(t *testing.T) {
	tests := []struct {
		name      string
		inject    func(*fcmemulator.Server)
		wantErr   func(error) bool // nil: success expected
		wantTries int
	}{
		{"503 burst absorbed by the client's retries",
			func(s *fcmemulator.Server) { s.FailNext(2, fcmemulator.Unavailable, "t") }, nil, 3},
		{"503 beyond the client's retries surfaces",
			func(s *fcmemulator.Server) { s.FailNext(5, fcmemulator.Unavailable, "t") }, messaging.IsUnavailable, 5},
		{"500 is not retried",
			func(s *fcmemulator.Server) { s.FailNext(1, fcmemulator.Internal, "t") }, messaging.IsInternal, 1},
		{"failure for another token leaves this one alone",
			func(s *fcmemulator.Server) { s.FailNext(1, fcmemulator.Internal, "other") }, nil, 1},
		{"next request whatever the token",
			func(s *fcmemulator.Server) { s.FailNext(1, fcmemulator.Internal) }, messaging.IsInternal, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // the 503 cases mostly wait for the client's backoff
			s, c := serve(t, nil)
			tt.inject(s)
			br, err := c.SendEachForMulticast(context.Background(), multicast("t"))
			if err != nil {
				t.Fatalf("SendEachForMulticast: %v", err)
			}
			got := br.Responses[0]
			switch {
			case tt.wantErr == nil && !got.Success:
				t.Errorf("send failed: %v", got.Error)
			case tt.wantErr != nil && !tt.wantErr(got.Error):
				t.Errorf("error %v does not match", got.Error)
			}
			if n := len(s.Requests()); n != tt.wantTries {
				t.Errorf("server saw %d requests, want %d", n, tt.wantTries)
			}
			wantPushes := 0
			if tt.wantErr == nil {
				wantPushes = 1
			}
			if n := s.PushesTo("t"); n != wantPushes {
				t.Errorf("PushesTo = %d, want %d", n, wantPushes)
			}
			// Injected failures are used up: the next send goes through.
			if _, err := c.Send(context.Background(), &messaging.Message{Token: "t"}); err != nil {
				t.Errorf("send after the failures: %v", err)
			}
		})
	}
}

func TestResetAndStart(t *testing.T) {
	s := fcmemulator.New(&fcmemulator.Options{Unregistered: []string{"gone"}})
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := client(t, s.URL())
	ctx := context.Background()
	s.SetInvalid("a")
	s.FailNext(3, fcmemulator.Internal, "b")
	s.Reset()
	for _, tok := range []string{"a", "b"} {
		if _, err := c.Send(ctx, &messaging.Message{Token: tok}); err != nil {
			t.Errorf("Send(%s) after Reset: %v", tok, err)
		}
	}
	if _, err := c.Send(ctx, &messaging.Message{Token: "gone"}); !messaging.IsUnregistered(err) {
		t.Errorf("Options.Unregistered lost on Reset: %v", err)
	}
	if _, err := c.SendDryRun(ctx, &messaging.Message{Token: "a"}); err != nil {
		t.Errorf("SendDryRun: %v", err)
	}
	if n := s.PushesTo("a"); n != 1 {
		t.Errorf("PushesTo(a) = %d, want 1 (dry runs do not count)", n)
	}
	if n := len(s.Messages()); n != 2 {
		t.Errorf("Messages() = %d, want 2", n)
	}
}

func TestMalformedRequests(t *testing.T) {
	s := fcmemulator.New(nil)
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	tests := []struct {
		name, method, path, body string
		want                     int
	}{
		{"not JSON", http.MethodPost, "/v1/projects/p/messages:send", "{", http.StatusBadRequest},
		{"no message", http.MethodPost, "/v1/projects/p/messages:send", "{}", http.StatusBadRequest},
		{"no target", http.MethodPost, "/v1/projects/p/messages:send", `{"message":{"data":{"a":"b"}}}`, http.StatusBadRequest},
		{"unknown path", http.MethodPost, "/v1/projects/p/other", "{}", http.StatusNotFound},
		{"wrong method", http.MethodGet, "/v1/projects/p/messages:send", "", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, ts.URL+tt.path, strings.NewReader(tt.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.want)
			}
		})
	}
	if n := len(s.Messages()); n != 0 {
		t.Errorf("malformed requests recorded as pushes: %d", n)
	}
}
