package functions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/firestore"
	firebase "firebase.google.com/go/v4"
	"firebase.google.com/go/v4/messaging"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/redis/go-redis/v9"
	"google.golang.org/api/option"

	"github.com/fireonce/fireonce/shared/cloudlog"
	"github.com/fireonce/fireonce/shared/firestoreevent"
	"github.com/fireonce/fireonce/shared/triggeronce"
	"github.com/fireonce/fireonce/shared/triggeronce/redisstore"
)

// Messenger is the part of the FCM client the push function uses;
// *messaging.Client implements it.
type Messenger interface {
	SendEachForMulticast(ctx context.Context, m *messaging.MulticastMessage) (*messaging.BatchResponse, error)
}

// Deps are the clients the handlers use. Production builds them lazily,
// once per instance, from the environment; tests build them directly.
type Deps struct {
	// Firestore holds users, posts, followers, tokens and the counter guard's
	// markers.
	Firestore *firestore.Client
	// Database is the ID of Firestore's database ("" means "(default)"):
	// an event from another database is rejected, since the effects would
	// land in the wrong one.
	Database string
	// Messaging sends pushes.
	Messaging Messenger
	// PushGuard guards sendPostNotification's external effect (Guard.Run);
	// its store is Firestore or Redis.
	PushGuard *triggeronce.Guard
	// CountGuard guards the counters: it must be on Firestore, since the
	// marker and the counter commit together.
	CountGuard *triggeronce.Guard
}

func (d *Deps) database() string {
	if d.Database == "" {
		return DefaultDatabase
	}
	return d.Database
}

// serves reports whether an event of database belongs to d's database
// (events that do not name one are taken as the default's).
func (d *Deps) serves(database string) bool {
	if database == "" {
		database = DefaultDatabase
	}
	return database == d.database()
}

// Service serves the functions of the table. Its zero value is not usable:
// use NewService (tests) or the package's registered default.
type Service struct {
	logger *slog.Logger
	deps   func(ctx context.Context) (*Deps, error)
	now    func() time.Time
}

// NewService returns a Service over fixed dependencies, logging to logger
// (cloud-formatted JSON on stdout when nil).
func NewService(d *Deps, logger *slog.Logger) *Service {
	if logger == nil {
		logger = cloudlog.New(os.Stdout, slog.LevelInfo)
	}
	return &Service{logger: logger, deps: func(context.Context) (*Deps, error) { return d, nil }, now: time.Now}
}

// newEnvService returns the Service the registered functions use: its
// clients are created on first use from the environment (see Config) and
// kept for the instance's life. A failure is not cached, so a transient one
// (or a fixed configuration) recovers on the next delivery.
func newEnvService() *Service {
	logger := cloudlog.New(os.Stdout, slog.LevelInfo)
	var (
		mu     sync.Mutex
		cached *Deps
	)
	return &Service{logger: logger, now: time.Now, deps: func(ctx context.Context) (*Deps, error) {
		mu.Lock()
		defer mu.Unlock()
		if cached != nil {
			return cached, nil
		}
		cfg, err := ConfigFromEnv(nil)
		if err != nil {
			return nil, err
		}
		d, err := depsFromConfig(context.WithoutCancel(ctx), cfg)
		if err != nil {
			return nil, err
		}
		cached = d
		return d, nil
	}}
}

// quietGuard keeps the guard's own records out of the log: each invocation
// logs one line of its own that carries the guard's outcome.
var guardOptions = &triggeronce.Options{Logger: slog.New(slog.DiscardHandler)}

func depsFromConfig(ctx context.Context, cfg Config) (*Deps, error) {
	if cfg.Database == "" {
		cfg.Database = DefaultDatabase
	}
	fs, err := firestore.NewClientWithDatabase(ctx, cfg.ProjectID, cfg.Database)
	if err != nil {
		return nil, fmt.Errorf("functions: firestore client for %s database %s: %w", cfg.ProjectID, cfg.Database, err)
	}
	var opts []option.ClientOption
	if cfg.FCMEndpoint != "" {
		opts = append(opts, option.WithEndpoint(cfg.FCMEndpoint), option.WithoutAuthentication())
	}
	// A separate App for messaging: App options would also reach Firestore.
	app, err := firebase.NewApp(ctx, &firebase.Config{ProjectID: cfg.ProjectID}, opts...)
	if err != nil {
		fs.Close()
		return nil, fmt.Errorf("functions: firebase app: %w", err)
	}
	msg, err := app.Messaging(ctx)
	if err != nil {
		fs.Close()
		return nil, fmt.Errorf("functions: messaging client: %w", err)
	}
	d := &Deps{Firestore: fs, Database: cfg.Database, Messaging: msg, CountGuard: triggeronce.NewFirestore(fs, guardOptions)}
	switch cfg.Store {
	case "redis":
		ropts, err := redis.ParseURL(cfg.RedisURL)
		if err != nil {
			fs.Close()
			return nil, fmt.Errorf("functions: REDIS_URL: %w", err)
		}
		d.PushGuard = triggeronce.New(redisstore.New(redis.NewClient(ropts), nil), guardOptions)
	default:
		d.PushGuard = d.CountGuard
	}
	return d, nil
}

// report is what one invocation logs.
type report struct {
	outcome triggeronce.Outcome
	sent    int
	pruned  int
}

// outcomeRejected is logged for an event that no retry can make valid.
const outcomeRejected triggeronce.Outcome = "rejected"

// Handler returns the CloudEvent function registered under name.
func (s *Service) Handler(name string) func(context.Context, event.Event) error {
	r, ok := lookup(name)
	if !ok {
		panic("functions: no function " + name + " in the table")
	}
	return func(ctx context.Context, e event.Event) error {
		return s.invoke(ctx, r, e)
	}
}

func (s *Service) invoke(ctx context.Context, r row, e event.Event) error {
	start := s.now()
	rep := &report{}
	inv, err := s.validate(r, e)
	var document string
	if inv != nil {
		document = inv.event.Document
		inv.report = rep
		var d *Deps
		switch d, err = s.deps(ctx); {
		case err != nil:
			rep.outcome = triggeronce.OutcomeFailed
		case !d.serves(inv.event.Database):
			rep.outcome = outcomeRejected
			err = fmt.Errorf("%w: event from database %q, but the functions write to %q (FIREONCE_DATABASE)",
				firestoreevent.ErrMalformed, inv.event.Database, d.database())
		default:
			err = r.handle(s, ctx, d, inv)
		}
	} else {
		rep.outcome = outcomeRejected
		document = strings.TrimPrefix(e.Subject(), "documents/")
	}

	level := slog.LevelInfo
	switch rep.outcome {
	case triggeronce.OutcomeInProgress, triggeronce.OutcomeReleased:
		level = slog.LevelWarn
	case triggeronce.OutcomeFailed, outcomeRejected:
		level = slog.LevelError
	}
	attrs := []slog.Attr{
		slog.String("function", r.Name),
		slog.String("eventID", e.ID()),
		slog.String("document", document),
		slog.String("outcome", string(rep.outcome)),
		slog.Int("sent", rep.sent),
		slog.Int("pruned", rep.pruned),
		slog.Int64("durationMs", s.now().Sub(start).Milliseconds()),
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	s.logger.LogAttrs(ctx, level, r.Name+" "+string(rep.outcome), attrs...)

	if rep.outcome == outcomeRejected || errors.Is(err, triggeronce.ErrNotCompleted) {
		// No retry can fix a malformed event, and a retry after an effect
		// that ran but could not be marked done would repeat it.
		return nil
	}
	return err
}

// validate decodes e and checks it belongs to r before anything is written:
// garbage must not cost a marker.
func (s *Service) validate(r row, e event.Event) (*invocation, error) {
	ev, err := firestoreevent.Decode(e)
	if err != nil {
		return nil, err
	}
	if base := strings.TrimSuffix(ev.Type, ".withAuthContext"); base != r.EventType {
		return nil, fmt.Errorf("%w: %s listens to %s, got %s", firestoreevent.ErrMalformed, r.Name, r.EventType, ev.Type)
	}
	if ev.ID == "" {
		return nil, fmt.Errorf("%w: no event ID", firestoreevent.ErrMalformed)
	}
	params, err := ev.Params(r.pattern)
	if err != nil {
		return nil, err
	}
	return &invocation{event: ev, params: params}, nil
}

func (inv *invocation) key(function string) (triggeronce.Key, triggeronce.Meta) {
	return triggeronce.Key{EventID: inv.event.ID, Function: function},
		triggeronce.Meta{EventType: inv.event.Type, Subject: inv.event.Subject}
}
