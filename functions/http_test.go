package functions

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	fd "github.com/googleapis/google-cloudevents-go/cloud/firestoredata"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/fireonce/fireonce/shared/fcmemulator"
	"github.com/fireonce/fireonce/shared/firestoreemulator"
	"github.com/fireonce/fireonce/shared/firestoreevent/firestoreeventtest"
	"github.com/fireonce/fireonce/shared/firestoretest"
	"github.com/fireonce/fireonce/shared/logtest"
)

// served is ./functions/cmd/serve running in a subprocess: the functions as
// functions-framework-go serves them, each at /<name>, configured from the
// environment as on Cloud Functions.
type served struct {
	base   string
	logs   *logtest.Buffer
	exited chan struct{}
	cmd    *exec.Cmd
}

func serveFunctions(t *testing.T, project, fcmEndpoint string) *served {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "serve")
	build := exec.Command("go", "build", "-o", bin, "./functions/cmd/serve")
	build.Dir = moduleRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./functions/cmd/serve: %v\n%s", err, out)
	}

	p, err := firestoreemulator.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(p)
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "FUNCTION_TARGET", "PORT", "HOST", "GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT", "FIREBASE_CONFIG",
			"FCM_ENDPOINT", "FIREONCE_STORE", "REDIS_URL":
			continue
		}
		env = append(env, kv)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(env, "PORT="+port, "HOST=127.0.0.1", "GOOGLE_CLOUD_PROJECT="+project,
		firestoretest.EnvHost+"="+firestoretest.Host(t), "FCM_ENDPOINT="+fcmEndpoint)
	s := &served{base: "http://127.0.0.1:" + port, logs: &logtest.Buffer{}, exited: make(chan struct{}), cmd: cmd}
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-s.exited
		if t.Failed() {
			t.Logf("server output:\n%s", s.logs.String())
		}
	})

	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
		if err == nil {
			conn.Close()
			return s
		}
		select {
		case <-s.exited:
			t.Fatalf("serve exited at start-up:\n%s", s.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve does not listen on %s after 30s:\n%s", port, s.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive fails t if the server process has ended.
func (s *served) alive(t *testing.T) {
	t.Helper()
	select {
	case <-s.exited:
		t.Fatalf("the server died: %v\n%s", s.cmd.ProcessState, s.logs.String())
	default:
	}
}

// lines returns the server's JSON log lines that carry an outcome.
func (s *served) lines() []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(s.logs.String(), "\n") {
		if !strings.HasPrefix(l, "{") || !strings.Contains(l, `"outcome"`) {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err == nil {
			out = append(out, m)
		}
	}
	return out
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("runtime.Caller failed")
	}
	return filepath.Dir(filepath.Dir(file))
}

var httpClient = &http.Client{Timeout: 60 * time.Second}

func do(req *http.Request) (int, string, error) {
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), nil
}

// TestServedFunctions posts binary-mode CloudEvents to the served
// functions: first garbage, which must be dropped or refused and change
// nothing, then 10 post creations and 4 deletions, each delivered 3 times at
// once to every function listening to it.
func TestServedFunctions(t *testing.T) {
	t.Parallel()
	env := firestoretest.New(t)
	fcm := fcmemulator.New(nil)
	ts := httptest.NewServer(fcm.Handler())
	t.Cleanup(ts.Close)
	srv := serveFunctions(t, env.ProjectID, ts.URL+"/v1")

	// Three authors: a1 and a2 have old posts to delete (so the counts
	// never touch zero and the order of deliveries does not matter), a3
	// has no user document yet. f1 and f3 share a device; f4 has none.
	h := &harness{t: t, env: env}
	h.seed(world{
		users:  map[string]string{"a1": "Ann", "a2": "Bob"},
		counts: map[string]int{"a1": 3, "a2": 2},
		followers: map[string][]string{
			"a1": {"f1", "f2"}, "a2": {"f2", "f3"}, "a3": {"f1", "f4"},
		},
		tokens: map[string][]string{
			"f1": {"f1-a", "f1-b", "shared"}, "f2": {"f2-a"}, "f3": {"f3-a", "shared"},
		},
	})
	devicesOf := map[string][]string{
		"a1": {"f1-a", "f1-b", "shared", "f2-a"},
		"a2": {"f2-a", "f3-a", "shared"},
		"a3": {"f1-a", "f1-b", "shared"},
	}

	t.Run("garbage", func(t *testing.T) {
		testGarbage(t, srv, env.ProjectID)
		srv.alive(t)
		if m := markers(t, env.Client); len(m) != 0 {
			t.Fatalf("garbage left %d markers, first %s", len(m), m[0].Ref.ID)
		}
		for user, want := range map[string]int64{"a1": 3, "a2": 2} {
			if n, _ := postCount(t, env.Client, user); n != want {
				t.Errorf("%s postCount %d, want %d", user, n, want)
			}
		}
		if _, exists := postCount(t, env.Client, "a3"); exists {
			t.Errorf("garbage created users/a3")
		}
		if n := len(fcm.Requests()); n != 0 {
			t.Errorf("garbage caused %d FCM requests", n)
		}
	})
	if t.Failed() {
		return
	}

	t.Run("concurrent duplicates", func(t *testing.T) {
		type delivery struct {
			function string
			change   firestoreeventtest.Change
		}
		var deliveries []delivery
		creations := map[string][]string{"a1": {"n1", "n2", "n3", "n4", "n5"}, "a2": {"n6", "n7", "n8"}, "a3": {"n9", "n10"}}
		deletions := map[string][]string{"a1": {"old1", "old2"}, "a2": {"old3", "old4"}}
		for user, posts := range creations {
			for _, p := range posts {
				c := h.change(EventCreated, "users/"+user+"/posts/"+p, postFields("post "+p))
				deliveries = append(deliveries, delivery{push, c}, delivery{increment, c})
			}
		}
		for user, posts := range deletions {
			for _, p := range posts {
				deliveries = append(deliveries, delivery{decrement, h.change(EventDeleted, "users/"+user+"/posts/"+p, postFields("old"))})
			}
		}

		const copies = 3
		type result struct {
			function, eventID string
			statuses          []int
			err               error
		}
		results := make([]result, len(deliveries)*copies)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, d := range deliveries {
			data, err := d.change.Data()
			if err != nil {
				t.Fatal(err)
			}
			for c := range copies {
				r := &results[i*copies+c]
				r.function, r.eventID = d.function, d.change.ID
				wg.Go(func() {
					<-start
					// The platform retries a 500 (the functions are deployed
					// with --retry); a concurrent duplicate whose twin holds
					// the lease answers 500 until the twin is done.
					deadline := time.Now().Add(45 * time.Second)
					for {
						req, err := d.change.RequestWithBody(context.Background(), srv.base+"/"+d.function, data)
						if err != nil {
							r.err = err
							return
						}
						code, body, err := do(req)
						if err != nil {
							r.err = err
							return
						}
						r.statuses = append(r.statuses, code)
						if code != http.StatusInternalServerError {
							return
						}
						if time.Now().After(deadline) {
							r.err = fmt.Errorf("still 500 after 45s: %s", body)
							return
						}
						time.Sleep(50 * time.Millisecond) // the platform's backoff, shortened
					}
				})
			}
		}
		close(start)
		wg.Wait()
		srv.alive(t)

		// Every delivery ended 2xx; a 500 on the way was a retryable
		// outcome (see below).
		type fkey struct{ function, eventID string }
		ours := map[string]bool{}
		for _, d := range deliveries {
			ours[d.change.ID] = true
		}
		errors500 := map[fkey]int{}
		requests := 0
		for _, r := range results {
			if r.err != nil {
				t.Fatalf("%s %s: %v (statuses %v)", r.function, r.eventID, r.err, r.statuses)
			}
			requests += len(r.statuses)
			for i, code := range r.statuses {
				last := i == len(r.statuses)-1
				switch {
				case code == http.StatusInternalServerError && !last:
					errors500[fkey{r.function, r.eventID}]++
				case code/100 == 2 && last:
				default:
					t.Errorf("%s %s: statuses %v", r.function, r.eventID, r.statuses)
				}
			}
		}

		var lines []map[string]any
		waitFor(t, "one log line per request", 20*time.Second, func() bool {
			lines = lines[:0]
			for _, l := range srv.lines() {
				if ours[fmt.Sprint(l["eventID"])] {
					lines = append(lines, l)
				}
			}
			return len(lines) >= requests
		})
		if len(lines) != requests {
			t.Errorf("%d log lines for %d requests", len(lines), requests)
		}
		executed := map[fkey]int{}
		retryable := map[fkey]int{}
		aborted := map[string]int{}
		for _, l := range lines {
			k := fkey{fmt.Sprint(l["function"]), fmt.Sprint(l["eventID"])}
			switch l["outcome"] {
			case "executed":
				executed[k]++
			case "duplicate":
			case "in_progress":
				// A twin holds the lease: retry later.
				retryable[k]++
			case "failed":
				// The emulator aborts a commit that waits too long for the
				// lock decrementPostCount's transaction holds on the user
				// document ("Transaction lock timeout"): nothing was
				// committed, and the platform's retry runs it again.
				if e := fmt.Sprint(l["error"]); strings.Contains(e, "code = Aborted") {
					retryable[k]++
					aborted[k.function]++
					continue
				}
				t.Errorf("unexpected failure: %v", l)
			default:
				t.Errorf("unexpected outcome: %v", l)
			}
		}
		if len(aborted) > 0 {
			t.Logf("deliveries aborted by lock contention on the user documents, then retried: %v", aborted)
		}
		for _, d := range deliveries {
			k := fkey{d.function, d.change.ID}
			if executed[k] != 1 {
				t.Errorf("%s of %s executed %d times", d.function, d.change.Document, executed[k])
			}
			if errors500[k] != retryable[k] {
				t.Errorf("%s of %s: %d answers 500 but %d retryable outcomes", d.function, d.change.Document, errors500[k], retryable[k])
			}
		}

		// Effects: exact counts, one push per device per post.
		for user, want := range map[string]int64{"a1": 3 + 5 - 2, "a2": 2 + 3 - 2, "a3": 2} {
			if n, _ := postCount(t, env.Client, user); n != want {
				t.Errorf("%s postCount %d, want %d", user, n, want)
			}
		}
		got := map[string]int{}
		for _, m := range fcm.Messages() {
			got[m.Token+" "+m.Data["userID"]+"/"+m.Data["postID"]]++
		}
		want := map[string]int{}
		for user, posts := range creations {
			for _, p := range posts {
				for _, dev := range devicesOf[user] {
					want[dev+" "+user+"/"+p] = 1
				}
			}
		}
		for k, n := range want {
			if got[k] != n {
				t.Errorf("push %s delivered %d times, want %d", k, got[k], n)
			}
		}
		for k, n := range got {
			if want[k] == 0 {
				t.Errorf("push %s delivered %d times, want none", k, n)
			}
		}

		ms := markers(t, env.Client)
		for _, m := range ms {
			if st := m.Data()["state"]; st != "done" {
				t.Errorf("marker %s is %v", m.Ref.ID, st)
			}
		}
		if len(ms) != len(deliveries) {
			t.Errorf("%d markers for %d (function, event) pairs", len(ms), len(deliveries))
		}
	})
}

// testGarbage posts requests no function can process to every function:
// each is dropped (2xx, with an ERROR line naming its event) or refused
// (4xx), never a 5xx.
func testGarbage(t *testing.T, srv *served, project string) {
	random := make([]byte, 4096)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range random {
		random[i] = byte(rng.UintN(256))
	}
	const doc = "users/a1/posts/g1"
	asJSON, err := protojson.Marshal(&fd.DocumentEventData{Value: &fd.Document{
		Name: "projects/" + project + "/databases/(default)/documents/" + doc}})
	if err != nil {
		t.Fatal(err)
	}

	type garbage struct {
		name string
		// frameworkError: sdk-go answers 500 to a structured-mode event it
		// cannot parse, before any function code runs (Eventarc only
		// sends binary mode). Nothing else may get a 5xx.
		frameworkError bool
		// req builds the request to url from a well-formed change of the
		// function's type.
		req func(c firestoreeventtest.Change, url string) (*http.Request, error)
	}
	withBody := func(body []byte) func(firestoreeventtest.Change, string) (*http.Request, error) {
		return func(c firestoreeventtest.Change, url string) (*http.Request, error) {
			return c.RequestWithBody(context.Background(), url, body)
		}
	}
	edit := func(f func(h http.Header)) func(firestoreeventtest.Change, string) (*http.Request, error) {
		return func(c firestoreeventtest.Change, url string) (*http.Request, error) {
			req, err := c.Request(context.Background(), url)
			if err == nil {
				f(req.Header)
			}
			return req, err
		}
	}
	raw := func(method, contentType, body string) func(firestoreeventtest.Change, string) (*http.Request, error) {
		return func(_ firestoreeventtest.Change, url string) (*http.Request, error) {
			req, err := http.NewRequest(method, url, strings.NewReader(body))
			if err == nil && contentType != "" {
				req.Header.Set("Content-Type", contentType)
			}
			return req, err
		}
	}
	cases := []garbage{
		{name: "random bytes", req: withBody(random)},
		{name: "empty body", req: withBody(nil)},
		{name: "JSON declared as protobuf", req: withBody(asJSON)},
		{name: "invalid JSON", req: edit(func(h http.Header) { h.Set("Content-Type", "application/json") })},
		{name: "no ce-specversion", req: edit(func(h http.Header) { h.Del("ce-specversion") })},
		{name: "unknown ce-specversion", req: edit(func(h http.Header) { h.Set("ce-specversion", "9.9") })},
		{name: "no ce-id", req: edit(func(h http.Header) { h.Del("ce-id") })},
		{name: "no ce-type", req: edit(func(h http.Header) { h.Del("ce-type") })},
		{name: "wrong ce-type", req: edit(func(h http.Header) { h.Set("ce-type", "google.cloud.firestore.document.v1.written") })},
		{name: "subject outside the pattern", req: edit(func(h http.Header) {
			h.Set("ce-subject", "documents/users/a1/comments/g1")
			h.Set("ce-document", "users/a1/comments/g1")
		})},
		{name: "document extension disagrees", req: edit(func(h http.Header) { h.Set("ce-document", "users/a2/posts/g1") })},
		{name: "plain JSON, no CloudEvent", req: raw(http.MethodPost, "application/json", `{"hello":"world"}`)},
		{name: "GET", req: raw(http.MethodGet, "", "")},
		{name: "broken structured event", req: raw(http.MethodPost, "application/cloudevents+json", `{"specversion":"1.0",`), frameworkError: true},
	}
	for _, g := range cases {
		for _, f := range Table() {
			t.Run(g.name+"/"+f.Name, func(t *testing.T) {
				fields := postFields("garbage")
				c := firestoreeventtest.Change{ID: newEventID(), Type: f.EventType, Project: project, Document: doc}
				if f.EventType == EventDeleted {
					c.Before = fields
				} else {
					c.After = fields
				}
				req, err := g.req(c, srv.base+"/"+f.Name)
				if err != nil {
					t.Fatal(err)
				}
				if g.name == "invalid JSON" {
					req.Body = io.NopCloser(bytes.NewReader([]byte(`{"value": {"name": 12`)))
					req.ContentLength = -1
				}
				code, body, err := do(req)
				if err != nil {
					t.Fatalf("no answer: %v", err)
				}
				t.Logf("%d %s", code, strings.TrimSpace(body))
				if g.frameworkError {
					if code != http.StatusInternalServerError {
						t.Fatalf("answered %d, want the framework's 500: %s", code, body)
					}
					for _, l := range srv.lines() {
						if l["eventID"] == c.ID {
							t.Fatalf("the function ran: %v", l)
						}
					}
					return
				}
				switch code / 100 {
				case 4:
				case 2:
					// Dropped: an ERROR line says so.
					waitFor(t, "the rejection's log line", 10*time.Second, func() bool {
						for _, l := range srv.lines() {
							if l["eventID"] == c.ID && l["function"] == f.Name &&
								l["outcome"] == "rejected" && l["severity"] == "ERROR" {
								return true
							}
						}
						return false
					})
				default:
					t.Fatalf("answered %d: %s", code, body)
				}
			})
		}
	}
}
