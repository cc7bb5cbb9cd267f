// Package fcmemulator is a local stand-in for the Firebase Cloud Messaging
// HTTP v1 API, for handler tests that go through the real firebase-admin-go
// messaging client and for the local dev loop.
//
// Point the client at it with
//
//	firebase.NewApp(ctx, &firebase.Config{ProjectID: p},
//		option.WithEndpoint(srv.URL()+"/v1"), option.WithoutAuthentication())
//
// (use an App of its own for messaging: the options also reach Firestore).
//
// Guarantees:
//   - It answers POST /v1/projects/{project}/messages:send as FCM does:
//     {"name":"projects/{project}/messages/{N}"} on success, and on failure
//     the FCM v1 error body, so the client's predicates work unchanged:
//     unregistered tokens get 404 UNREGISTERED (messaging.IsUnregistered),
//     invalid tokens 400 INVALID_ARGUMENT (messaging.IsInvalidArgument),
//     injected failures 503 UNAVAILABLE (messaging.IsUnavailable; the client
//     retries these itself, about 5 attempts over 7 s) or 500 INTERNAL
//     (messaging.IsInternal; not retried by the client).
//   - Every request is recorded (Requests); only those answered 200 and not
//     validate_only count as pushes (Messages, PushesTo).
//   - It is safe for concurrent use: SendEachForMulticast sends from up to 50
//     goroutines.
package fcmemulator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Message is one send request the server received.
type Message struct {
	// Project is the project ID from the request path.
	Project string
	// Token, Topic and Condition are the message's target (one is set).
	Token, Topic, Condition string
	// Title and Body are the notification's, empty without a notification.
	Title, Body string
	// Data is the message's data payload.
	Data map[string]string
	// ValidateOnly is set for dry runs, which never count as pushes.
	ValidateOnly bool
	// Raw is the request's "message" object as sent.
	Raw json.RawMessage
	// Time is when the server received it.
	Time time.Time
	// Status is the HTTP status the server answered.
	Status int
	// Name is the message name answered on success.
	Name string
}

// Failure is a transient failure the server can inject.
type Failure int

const (
	// Unavailable answers 503 UNAVAILABLE; the client retries it by itself.
	Unavailable Failure = iota + 1
	// Internal answers 500 INTERNAL; the client does not retry it.
	Internal
)

// Options configures a Server; nil means defaults.
type Options struct {
	// Logger, when set, logs each push (device token, title, body) and each
	// rejected request.
	Logger *slog.Logger
	// Unregistered tokens are answered 404 UNREGISTERED.
	Unregistered []string
	// Invalid tokens are answered 400 INVALID_ARGUMENT.
	Invalid []string
}

// Server is the FCM stand-in. Its methods are safe for concurrent use.
type Server struct {
	log  *slog.Logger
	opts Options

	mu           sync.Mutex
	unregistered map[string]bool
	invalid      map[string]bool
	anyFail      []pending            // next requests, whatever the token
	tokenFail    map[string][]pending // next requests for one token
	requests     []Message
	seq          int

	httpSrv *http.Server
	ln      net.Listener
}

type pending struct {
	f Failure
	n int
}

// New returns a Server; serve it with Handler (for example through httptest)
// or Start.
func New(opts *Options) *Server {
	s := &Server{}
	if opts != nil {
		s.opts = *opts
	}
	s.log = s.opts.Logger
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.Reset()
	return s
}

// Handler returns the HTTP handler of the FCM v1 send endpoint.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/projects/{project}/messages:send", s.send)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "NOT_FOUND", "", "fcmemulator: no such endpoint: "+r.Method+" "+r.URL.Path)
	})
	return mux
}

// Start serves the handler on addr ("127.0.0.1:0" picks a free port) until
// Close.
func (s *Server) Start(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("fcmemulator: listen on %s: %w", addr, err)
	}
	s.ln = ln
	s.httpSrv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.httpSrv.Serve(ln) }()
	return nil
}

// URL returns the base URL after Start ("http://127.0.0.1:port"); the
// messaging endpoint is URL()+"/v1". It is empty before Start.
func (s *Server) URL() string {
	if s.ln == nil {
		return ""
	}
	return "http://" + s.ln.Addr().String()
}

// Close stops a server started with Start, waiting for requests in flight.
func (s *Server) Close() error {
	if s.httpSrv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.httpSrv.Shutdown(ctx)
}

// SetUnregistered makes the server answer requests for tokens with 404
// UNREGISTERED from now on.
func (s *Server) SetUnregistered(tokens ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range tokens {
		s.unregistered[t] = true
	}
}

// SetInvalid makes the server answer requests for tokens with 400
// INVALID_ARGUMENT from now on.
func (s *Server) SetInvalid(tokens ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range tokens {
		s.invalid[t] = true
	}
}

// FailNext makes the next n requests fail with f: with no tokens, the next n
// requests whatever their token; otherwise the next n requests for each of
// tokens. Injected failures apply before the token's own state.
func (s *Server) FailNext(n int, f Failure, tokens ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(tokens) == 0 {
		s.anyFail = append(s.anyFail, pending{f, n})
		return
	}
	for _, t := range tokens {
		s.tokenFail[t] = append(s.tokenFail[t], pending{f, n})
	}
}

// Messages returns the pushes delivered so far (answered 200, not dry runs),
// in arrival order.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.requests {
		if isPush(m) {
			out = append(out, m)
		}
	}
	return out
}

// Requests returns every send request received, failed ones included, in
// arrival order.
func (s *Server) Requests() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// PushesTo returns how many pushes were delivered to token.
func (s *Server) PushesTo(token string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.requests {
		if m.Token == token && isPush(m) {
			n++
		}
	}
	return n
}

// Reset forgets recorded requests and injected failures, and restores the
// unregistered and invalid tokens given in Options.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unregistered = setOf(s.opts.Unregistered)
	s.invalid = setOf(s.opts.Invalid)
	s.anyFail = nil
	s.tokenFail = map[string][]pending{}
	s.requests = nil
}

func isPush(m Message) bool { return m.Status == http.StatusOK && !m.ValidateOnly }

func setOf(ss []string) map[string]bool {
	m := make(map[string]bool, len(ss))
	for _, s := range ss {
		m[s] = true
	}
	return m
}

type sendRequest struct {
	ValidateOnly bool            `json:"validate_only"`
	Message      json.RawMessage `json:"message"`
}

type wireMessage struct {
	Token        string            `json:"token"`
	Topic        string            `json:"topic"`
	Condition    string            `json:"condition"`
	Data         map[string]string `json:"data"`
	Notification *struct {
		Title string `json:"title"`
		Body  string `json:"body"`
	} `json:"notification"`
}

func (s *Server) send(w http.ResponseWriter, r *http.Request) {
	m := Message{Project: r.PathValue("project"), Time: time.Now()}
	var req sendRequest
	var wm wireMessage
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err == nil && len(req.Message) == 0 {
		err = errors.New("message is required")
	}
	if err == nil {
		err = json.Unmarshal(req.Message, &wm)
	}
	if err != nil {
		s.log.Warn("fcm request rejected", "project", m.Project, "status", http.StatusBadRequest, "error", err.Error())
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "fcmemulator: invalid request: "+err.Error())
		return
	}
	m.Token, m.Topic, m.Condition, m.Data = wm.Token, wm.Topic, wm.Condition, wm.Data
	if wm.Notification != nil {
		m.Title, m.Body = wm.Notification.Title, wm.Notification.Body
	}
	m.ValidateOnly, m.Raw = req.ValidateOnly, req.Message

	s.mu.Lock()
	status, grpcStatus, code, msg := s.outcomeLocked(m)
	m.Status = status
	if status == http.StatusOK {
		s.seq++
		m.Name = fmt.Sprintf("projects/%s/messages/%d", m.Project, s.seq)
	}
	s.requests = append(s.requests, m)
	s.mu.Unlock()

	if status != http.StatusOK {
		s.log.Warn("fcm push rejected", "token", m.Token, "title", m.Title, "status", status, "error_code", code)
		writeError(w, status, grpcStatus, code, msg)
		return
	}
	if !m.ValidateOnly {
		s.log.Info("fcm push", "token", m.Token, "topic", m.Topic, "title", m.Title, "body", m.Body, "name", m.Name)
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	_ = json.NewEncoder(w).Encode(map[string]string{"name": m.Name})
}

// outcomeLocked decides the answer to m, consuming an injected failure.
func (s *Server) outcomeLocked(m Message) (status int, grpcStatus, code, msg string) {
	if m.Token == "" && m.Topic == "" && m.Condition == "" {
		return http.StatusBadRequest, "INVALID_ARGUMENT", "INVALID_ARGUMENT",
			"Request contains an invalid argument: one of token, topic or condition is required."
	}
	if m.Token != "" {
		if f, ok := take(s.tokenFail, m.Token); ok {
			return failure(f)
		}
	}
	if len(s.anyFail) > 0 {
		f := s.anyFail[0].f
		if s.anyFail[0].n--; s.anyFail[0].n <= 0 {
			s.anyFail = s.anyFail[1:]
		}
		return failure(f)
	}
	switch {
	case s.invalid[m.Token]:
		return http.StatusBadRequest, "INVALID_ARGUMENT", "INVALID_ARGUMENT",
			"The registration token is not a valid FCM registration token"
	case s.unregistered[m.Token]:
		return http.StatusNotFound, "NOT_FOUND", "UNREGISTERED", "Requested entity was not found."
	}
	return http.StatusOK, "", "", ""
}

func take(q map[string][]pending, token string) (Failure, bool) {
	ps := q[token]
	if len(ps) == 0 {
		return 0, false
	}
	f := ps[0].f
	if ps[0].n--; ps[0].n <= 0 {
		ps = ps[1:]
	}
	if len(ps) == 0 {
		delete(q, token)
	} else {
		q[token] = ps
	}
	return f, true
}

func failure(f Failure) (int, string, string, string) {
	if f == Internal {
		return http.StatusInternalServerError, "INTERNAL", "INTERNAL", "Internal error encountered."
	}
	return http.StatusServiceUnavailable, "UNAVAILABLE", "UNAVAILABLE", "The service is currently unavailable."
}

// writeError writes the google.rpc.Status error body FCM v1 answers, with an
// FcmError detail when code is set.
func writeError(w http.ResponseWriter, status int, grpcStatus, code, msg string) {
	type detail struct {
		Type      string `json:"@type"`
		ErrorCode string `json:"errorCode"`
	}
	var body struct {
		Error struct {
			Code    int      `json:"code"`
			Message string   `json:"message"`
			Status  string   `json:"status"`
			Details []detail `json:"details,omitempty"`
		} `json:"error"`
	}
	body.Error.Code, body.Error.Message, body.Error.Status = status, msg, grpcStatus
	if code != "" {
		body.Error.Details = []detail{{Type: "type.googleapis.com/google.firebase.fcm.v1.FcmError", ErrorCode: code}}
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}
