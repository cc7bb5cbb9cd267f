// Package bridge closes the gap the Firebase emulator suite leaves for Go: it
// lets the Firestore emulator's triggers fire Go functions served by
// functions-framework-go, with the at-least-once delivery of production.
//
// The emulator, started with --functions_emulator pointing at the bridge,
// POSTs each event to /functions/projects/{project}/triggers/{triggerID}. Its
// format breaks functions-framework-go; the bridge repairs it and forwards a
// binary-mode CloudEvent to {functionsURL}/{Name}.
//
// Guarantees:
//   - Register registers one emulator trigger per Trigger, with ID Name and
//     always with the database "(default)" (a trigger without a database makes
//     every later write fail with 500).
//   - Every forwarded event is a valid binary-mode CloudEvent: the body is the
//     DocumentEventData protobuf (the emulator sends its base64 text), the
//     Content-Type is application/protobuf, the ce-datacontenttype header is
//     dropped (sdk-go rejects it as an extension), ce-source has a single
//     "projects/", and every other ce-* header, ce-id included, is kept.
//   - The emulator gets its answer before any delivery starts (it delivers one
//     event at a time, with a 20 s timeout, and never retries): 200 for an
//     accepted event, 404 for an unknown trigger or another project, 400 for a
//     body that is not a DocumentEventData or a delivery without ce-id,
//     ce-type or ce-source, 503 after Close. Rejections are logged.
//   - At-least-once, as in production: each event is delivered
//     Options.Duplicates times concurrently with the same ce-id, once more
//     after Options.RedeliverAfter when set, and with Options.Retry a delivery
//     the function failed (non-2xx, or unreachable) is redelivered with
//     exponential backoff up to Options.MaxAttempts attempts.
//   - One log line per delivery: trigger, event ID, document, copy, attempt,
//     status, duration. A functions server that is down is logged, never a
//     crash.
//   - Idle waits for in-flight deliveries and pending redeliveries without
//     sleeping; Close stops pending timers and waits for deliveries in flight.
package bridge

// The fixtures in testdata are real emulator deliveries; see internal/capture.
//go:generate go run ./internal/capture -dir testdata

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/googleapis/google-cloudevents-go/cloud/firestoredata"
	"google.golang.org/protobuf/proto"

	"github.com/fireonce/fireonce/shared/emulatorapi"
)

// Trigger is one function of the functions table.
type Trigger struct {
	// Name is the function's name: the emulator trigger ID and the path
	// (/Name) on the functions server.
	Name string
	// EventType is a Firestore CloudEvent type, e.g.
	// "google.cloud.firestore.document.v1.created".
	EventType string
	// DocumentPattern is a path pattern, e.g. "users/{userID}/posts/{postID}".
	DocumentPattern string
}

// Defaults for zero Options fields.
const (
	DefaultDuplicates      = 2
	DefaultMaxAttempts     = 5
	DefaultRetryBackoff    = time.Second
	DefaultMaxRetryBackoff = 30 * time.Second
	DefaultDeliveryTimeout = 60 * time.Second // a 2nd gen event function's default timeout
)

// Options configures a Bridge; nil means defaults.
type Options struct {
	// Duplicates is how many times each event is delivered concurrently with
	// the same ce-id; 0 means DefaultDuplicates, 1 delivers once.
	Duplicates int
	// RedeliverAfter, when positive, delivers each event once more that long
	// after it arrived.
	RedeliverAfter time.Duration
	// Retry redelivers a delivery the function failed, like a function
	// deployed with --retry.
	Retry bool
	// MaxAttempts bounds the attempts of one delivery with Retry; 0 means
	// DefaultMaxAttempts.
	MaxAttempts int
	// RetryBackoff is the delay before the first retry, doubled for each
	// later one up to MaxRetryBackoff; 0 means the defaults.
	RetryBackoff, MaxRetryBackoff time.Duration
	// DeliveryTimeout bounds one delivery; 0 means DefaultDeliveryTimeout.
	DeliveryTimeout time.Duration
	// Logger receives one line per delivery and per rejected request; nil
	// discards them.
	Logger *slog.Logger
	// Client sends the deliveries; nil means a client with DeliveryTimeout.
	Client *http.Client
}

// Bridge receives the emulator's deliveries and forwards them. Its methods
// are safe for concurrent use.
type Bridge struct {
	project      string
	functionsURL string
	triggers     map[string]Trigger
	order        []Trigger
	opts         Options
	log          *slog.Logger
	client       *http.Client

	mu      sync.Mutex
	closed  bool
	pending int           // deliveries in flight plus timers not yet fired
	idle    chan struct{} // closed while pending == 0
	timers  map[*time.Timer]struct{}
	stats   Stats

	srv *http.Server
	ln  net.Listener
}

// New returns a Bridge for project that forwards to functionsURL (the base
// URL of a functions-framework server hosting every function at /<name>).
func New(project, functionsURL string, triggers []Trigger, opts *Options) (*Bridge, error) {
	if project == "" || functionsURL == "" {
		return nil, errors.New("bridge: project and functions URL are required")
	}
	b := &Bridge{
		project:      project,
		functionsURL: strings.TrimRight(functionsURL, "/"),
		triggers:     make(map[string]Trigger, len(triggers)),
		idle:         make(chan struct{}),
		timers:       map[*time.Timer]struct{}{},
	}
	close(b.idle)
	for _, t := range triggers {
		if t.Name == "" || t.EventType == "" || t.DocumentPattern == "" {
			return nil, fmt.Errorf("bridge: trigger %+v: name, event type and document pattern are required", t)
		}
		if _, dup := b.triggers[t.Name]; dup {
			return nil, fmt.Errorf("bridge: trigger %q listed twice", t.Name)
		}
		b.triggers[t.Name] = t
		b.order = append(b.order, t)
	}
	if opts != nil {
		b.opts = *opts
	}
	o := &b.opts
	if o.Duplicates <= 0 {
		o.Duplicates = DefaultDuplicates
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = DefaultRetryBackoff
	}
	if o.MaxRetryBackoff <= 0 {
		o.MaxRetryBackoff = DefaultMaxRetryBackoff
	}
	if o.DeliveryTimeout <= 0 {
		o.DeliveryTimeout = DefaultDeliveryTimeout
	}
	b.log = o.Logger
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	b.client = o.Client
	if b.client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64
		b.client = &http.Client{Transport: tr}
	}
	b.stats.ByStatus = map[int]int{}
	b.stats.EventsByTrigger = map[string]int{}
	return b, nil
}

// Register registers every trigger with the emulator at emulatorHost
// (host:port). Registering again replaces the triggers, so it is safe to call
// after the emulator restarts.
func (b *Bridge) Register(ctx context.Context, emulatorHost string) error {
	api := emulatorapi.New(emulatorHost, b.project)
	for _, t := range b.order {
		err := api.RegisterTrigger(ctx, t.Name, emulatorapi.Trigger{
			EventType:       t.EventType,
			Database:        emulatorapi.DefaultDatabase,
			Namespace:       emulatorapi.DefaultDatabase,
			DocumentPattern: t.DocumentPattern,
		})
		if err != nil {
			return fmt.Errorf("bridge: %w", err)
		}
	}
	return nil
}

// Handler returns the handler for the emulator's deliveries.
func (b *Bridge) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /functions/projects/{project}/triggers/{trigger}", b.receive)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		b.reject(w, r, http.StatusNotFound, "no such endpoint", "")
	})
	return mux
}

// Start serves Handler on addr ("127.0.0.1:0" picks a free port) until Close.
// Pass Addr to the emulator as --functions_emulator.
func (b *Bridge) Start(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("bridge: listen on %s: %w", addr, err)
	}
	b.ln = ln
	b.srv = &http.Server{Handler: b.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = b.srv.Serve(ln) }()
	return nil
}

// Addr returns the host:port Start listens on; empty before Start.
func (b *Bridge) Addr() string {
	if b.ln == nil {
		return ""
	}
	return b.ln.Addr().String()
}

// event is one accepted delivery from the emulator, repaired.
type event struct {
	trigger  Trigger
	id       string
	document string
	header   http.Header
	body     []byte
}

func (b *Bridge) receive(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("trigger")
	t, ok := b.triggers[name]
	if !ok || r.PathValue("project") != b.project {
		b.reject(w, r, http.StatusNotFound, "unknown trigger", name)
		return
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		b.reject(w, r, http.StatusBadRequest, "unreadable body: "+err.Error(), name)
		return
	}
	body, err := decodeBody(raw)
	if err != nil {
		b.reject(w, r, http.StatusBadRequest, err.Error(), name)
		return
	}
	ev := &event{trigger: t, id: r.Header.Get("Ce-Id"), document: r.Header.Get("Ce-Document"), body: body}
	if ev.id == "" || r.Header.Get("Ce-Type") == "" || r.Header.Get("Ce-Source") == "" {
		b.reject(w, r, http.StatusBadRequest, "ce-id, ce-type and ce-source are required", name)
		return
	}
	ev.header = repairHeader(r.Header)

	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		b.reject(w, r, http.StatusServiceUnavailable, "bridge closed", name)
		return
	}
	b.stats.Events++
	b.scheduleLocked(ev)
	b.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (b *Bridge) reject(w http.ResponseWriter, r *http.Request, status int, reason, trigger string) {
	b.mu.Lock()
	b.stats.Rejected++
	b.mu.Unlock()
	b.log.Warn("bridge: rejected emulator request", "method", r.Method, "path", r.URL.Path,
		"trigger", trigger, "event_id", r.Header.Get("Ce-Id"), "status", status, "reason", reason)
	http.Error(w, "bridge: "+reason, status)
}

// decodeBody returns the DocumentEventData protobuf the emulator sent as
// base64 text. Raw protobuf is accepted too, should a later emulator send it.
func decodeBody(raw []byte) ([]byte, error) {
	if len(raw) == 0 {
		return nil, errors.New("empty body")
	}
	var data firestoredata.DocumentEventData
	if dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(raw))); err == nil {
		if err := proto.Unmarshal(dec, &data); err == nil {
			return dec, nil
		}
	}
	if err := proto.Unmarshal(raw, &data); err != nil {
		return nil, errors.New("body is neither base64 nor raw DocumentEventData protobuf")
	}
	return raw, nil
}

// repairHeader keeps the ce-* headers, ce-datacontenttype excepted, and undoes
// the doubled "projects/" of ce-source.
func repairHeader(in http.Header) http.Header {
	out := http.Header{}
	for k, vs := range in {
		if !strings.HasPrefix(k, "Ce-") || k == "Ce-Datacontenttype" {
			continue
		}
		out[k] = append([]string(nil), vs...)
	}
	if src := out.Get("Ce-Source"); src != "" {
		out.Set("Ce-Source", strings.Replace(src, "/projects/projects/", "/projects/", 1))
	}
	out.Set("Content-Type", "application/protobuf")
	return out
}
