// Package bench measures what fireonce's guard costs, side by side with an
// unguarded baseline and the seed approaches, in one process and one run.
//
// Every case reports p50 and p99 latency per event, the round trips of a
// first delivery counted as they happen (Firestore RPCs by a gRPC client
// interceptor, see grpccount; Redis commands by a go-redis hook), and the
// ratio of its p50 to its baseline's p50. The cases run interleaved, so the
// noise of a shared machine lands on every case alike and the ratios are
// taken within one run: the latency cases take turns delivery by delivery,
// in a new order every turn; storms and the HTTP variants take turns in
// rounds, each HTTP variant right before or after its baseline.
//
// The figures come from the Firestore emulator and a redis-server on
// loopback. They compare the cases with one another on one machine at one
// time; they say nothing about production Firestore or Memorystore.
//
// ./scripts/bench.sh starts the emulator and a redis-server and runs
// ./functions/cmd/bench, which prints the table and writes it as JSON.
package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/redis/go-redis/v9"

	"github.com/fireonce/fireonce/shared/grpccount"
	"github.com/fireonce/fireonce/shared/triggeronce"
)

// Config says what to run. Zero values mean the defaults in brackets.
type Config struct {
	// EmulatorHost is the Firestore emulator's host:port (required).
	EmulatorHost string `json:"-"`
	// Redis, when set, adds the Redis cases (7a-7c).
	Redis *redis.Options `json:"-"`
	// Samples per latency case [400], split over Rounds [20]; Warmup
	// deliveries per case are run first and dropped [100].
	Samples int `json:"samples"`
	Rounds  int `json:"rounds"`
	Warmup  int `json:"warmup"`
	// Users is how many users the events spread over [1000].
	Users int `json:"users"`
	// Storms of StormSize concurrent deliveries of one event [20 of 64].
	Storms    int `json:"storms"`
	StormSize int `json:"stormSize"`
	// Events per throughput variant [1200], posted with Concurrency
	// requests in flight [16]. NoHTTP skips case 6.
	Events      int  `json:"events"`
	Concurrency int  `json:"concurrency"`
	NoHTTP      bool `json:"noHTTP,omitempty"`
	// Only, when set, keeps the cases whose ID it matches (e.g. "^(1|2a)$").
	Only *regexp.Regexp `json:"-"`
	// Progress receives a line per round; nil discards it.
	Progress io.Writer `json:"-"`
}

func (c *Config) defaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Samples, 400)
	def(&c.Rounds, 20)
	def(&c.Warmup, 100)
	def(&c.Users, 1000)
	def(&c.Storms, 20)
	def(&c.StormSize, 64)
	def(&c.Events, 1200)
	def(&c.Concurrency, 16)
	c.Rounds = min(c.Rounds, c.Samples, c.Storms, c.Events)
	if c.Progress == nil {
		c.Progress = io.Discard
	}
}

// Report is one run's figures.
type Report struct {
	Started   time.Time `json:"started"`
	Seconds   float64   `json:"seconds"`
	Command   string    `json:"command,omitempty"`
	GoVersion string    `json:"goVersion"`
	Platform  string    `json:"platform"`
	CPUs      int       `json:"cpus"`
	Note      string    `json:"note"`
	// Project is the emulator project the run wrote to.
	Project string   `json:"project"`
	Config  Config   `json:"config"`
	Cases   []Result `json:"cases"`
}

// Note is what every report says about where its figures come from.
const Note = "Firestore emulator and redis-server on loopback, on a shared machine: " +
	"the figures compare the cases within this run and say nothing about production."

// Result is one case's figures.
type Result struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Backend  string `json:"backend"`
	Baseline string `json:"baseline,omitempty"` // the ID of the case RatioP50 divides by
	// Unit is what one sample is: a delivery, or a storm of deliveries.
	Unit    string  `json:"unit"`
	Samples int     `json:"samples"`
	P50Ms   float64 `json:"p50Ms"`
	P99Ms   float64 `json:"p99Ms"`
	// RoundTrips per event, counted; Calls names them.
	RoundTrips float64 `json:"roundTrips"`
	Calls      string  `json:"calls"`
	RatioP50   float64 `json:"ratioP50,omitempty"`
	// Throughput (case 6): events per second, and their ratio to the
	// baseline's.
	EventsPerSec    float64 `json:"eventsPerSec,omitempty"`
	ThroughputRatio float64 `json:"throughputRatio,omitempty"`
	// Check says what was verified about the effects (executions, pushes,
	// counters); Errors counts failed deliveries.
	Check  string `json:"check"`
	Errors int    `json:"errors"`
	// FirstError is the first failure, when there was one.
	FirstError string `json:"firstError,omitempty"`
}

// Failed reports whether any case had errors or a failed check.
func (r *Report) Failed() bool {
	for _, c := range r.Cases {
		if c.Errors > 0 || strings.HasPrefix(c.Check, "FAIL") {
			return true
		}
	}
	return false
}

// env is what the cases share.
type env struct {
	cfg     Config
	run     string // prefix of this run's event IDs
	project string
	fs      *firestore.Client
	fsCalls *grpccount.Counter
	users   []string
}

// Run runs every case and returns the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	if cfg.EmulatorHost == "" {
		return nil, errors.New("bench: no Firestore emulator host (FIRESTORE_EMULATOR_HOST)")
	}
	rep := &Report{Started: time.Now().UTC(), GoVersion: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH, CPUs: runtime.NumCPU(), Note: Note, Config: cfg}
	e := &env{cfg: cfg, run: rand.Text()[:8], project: "demo-bench-" + strings.ToLower(rand.Text()[:10]),
		fsCalls: &grpccount.Counter{}}
	rep.Project = e.project
	var err error
	if e.fs, err = grpccount.EmulatorClient(ctx, cfg.EmulatorHost, e.project, e.fsCalls); err != nil {
		return nil, err
	}
	defer e.fs.Close()
	if err := e.seed(ctx); err != nil {
		return nil, err
	}

	cases, closeCases, err := e.cases(ctx)
	if err != nil {
		return nil, err
	}
	defer closeCases()
	for _, c := range cases {
		fmt.Fprintf(cfg.Progress, "bench: warm-up %s %s\n", c.res().ID, c.res().Name)
		if err := c.warm(ctx, cfg.Warmup); err != nil {
			return nil, fmt.Errorf("bench: warm-up of %s: %w", c.res().ID, err)
		}
	}
	us := units(cases, mrand.New(mrand.NewPCG(1, 2)))
	for r := range cfg.Rounds {
		fmt.Fprintf(cfg.Progress, "bench: round %d/%d\n", r+1, cfg.Rounds)
		for _, i := range us.order.Perm(len(us.units)) {
			if err := us.units[i].round(ctx, r); err != nil {
				return nil, err
			}
		}
	}
	byID := map[string]*Result{}
	for _, c := range cases {
		res := c.finish(ctx)
		byID[res.ID] = res
		rep.Cases = append(rep.Cases, *res)
	}
	for i := range rep.Cases {
		c := &rep.Cases[i]
		if b, ok := byID[c.Baseline]; ok && b.P50Ms > 0 {
			c.RatioP50 = c.P50Ms / b.P50Ms
			if c.EventsPerSec > 0 && b.EventsPerSec > 0 {
				c.ThroughputRatio = c.EventsPerSec / b.EventsPerSec
			}
		}
	}
	rep.Seconds = time.Since(rep.Started).Seconds()
	return rep, nil
}

// benchCase is one row of the table.
type benchCase interface {
	res() *Result
	// warm runs n deliveries whose figures are dropped.
	warm(ctx context.Context, n int) error
	// round runs this case's share of samples for round r.
	round(ctx context.Context, r int) error
	// finish computes the figures.
	finish(ctx context.Context) *Result
}

// cases returns every case in table order, and a function that releases
// what they hold.
func (e *env) cases(ctx context.Context) ([]benchCase, func(), error) {
	var cases []benchCase
	for _, c := range e.firestoreCases() {
		cases = append(cases, c)
	}
	cases = append(cases, e.stormCase("5", "firestore", triggeronce.NewFirestore(e.fs, quiet), e.fsCalls.Take))
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	if !e.cfg.NoHTTP {
		hc, closeHTTP, err := e.httpCases(ctx)
		if err != nil {
			return nil, nil, err
		}
		cases = append(cases, hc...)
		closers = append(closers, closeHTTP)
	}
	if e.cfg.Redis != nil {
		rc, closeRedis, err := e.redisCases(ctx)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		cases = append(cases, rc...)
		closers = append(closers, closeRedis)
	}
	if e.cfg.Only != nil {
		cases = slices.DeleteFunc(cases, func(c benchCase) bool { return !e.cfg.Only.MatchString(c.res().ID) })
	}
	return cases, closeAll, nil
}
