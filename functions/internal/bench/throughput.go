package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/firestore"
	firebase "firebase.google.com/go/v4"
	ffunctions "github.com/GoogleCloudPlatform/functions-framework-go/functions"
	"github.com/cloudevents/sdk-go/v2/event"
	"google.golang.org/api/option"

	"github.com/fireonce/fireonce/functions"
	"github.com/fireonce/fireonce/functions/internal/instances"
	"github.com/fireonce/fireonce/shared/fcmemulator"
	"github.com/fireonce/fireonce/shared/firestoreevent/firestoreeventtest"
	"github.com/fireonce/fireonce/shared/grpccount"
	"github.com/fireonce/fireonce/shared/triggeronce"
)

// The functions-framework server runs in this process. Its registry is
// global and cannot be reset, so the routes are registered once per process
// and dispatch through serving to the handlers of the current run.
var (
	serveOnce sync.Once
	serveURL  string
	serveErr  error
	serving   atomic.Pointer[map[string]func(context.Context, event.Event) error]
)

// serve starts functions-framework on a free loopback port, serving every
// function of the table at /guarded-<name> and /unguarded-<name> (and, from
// the functions package's init, the production registrations at /<name>,
// which the bench does not call: they read their clients from the
// environment, where no RPC could be counted).
func serve() (string, error) {
	serveOnce.Do(func() {
		if os.Getenv("FUNCTION_TARGET") != "" {
			serveErr = errors.New("bench: FUNCTION_TARGET is set; functions-framework would serve one function at /")
			return
		}
		for _, variant := range []string{"guarded", "unguarded"} {
			for _, f := range functions.Table() {
				// Registered by name (path "/"+name): the framework's
				// registry aliases its list of unnamed functions when several
				// servers start, a data race under -race.
				name := variant + "-" + f.Name
				path := "/" + name
				ffunctions.CloudEvent(name, func(ctx context.Context, e event.Event) error {
					h := (*serving.Load())[path]
					if h == nil {
						return fmt.Errorf("bench: nothing serves %s", path)
					}
					return h(ctx, e)
				})
			}
		}
		// Instances of concurrency 1, as the platform runs them (and clear
		// of cloudevents/sdk-go#1224, see package instances).
		front, err := instances.Start(16)
		if err != nil {
			serveErr = err
			return
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			serveErr = err
			return
		}
		go (&http.Server{Handler: front, ReadHeaderTimeout: 10 * time.Second}).Serve(l)
		serveURL = "http://" + l.Addr().String()
	})
	return serveURL, serveErr
}

// httpCases are case 6: post-created events posted to the server, guarded
// and unguarded, spread over every user and all from one hot author.
func (e *env) httpCases(ctx context.Context) ([]benchCase, func(), error) {
	fcm := fcmemulator.New(nil)
	if err := fcm.Start("127.0.0.1:0"); err != nil {
		return nil, nil, err
	}
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
		fcm.Close()
	}
	fail := func(err error) ([]benchCase, func(), error) { closeAll(); return nil, nil, err }

	app, err := firebase.NewApp(ctx, &firebase.Config{ProjectID: e.project},
		option.WithEndpoint(fcm.URL()+"/v1"), option.WithoutAuthentication())
	if err != nil {
		return fail(err)
	}
	msg, err := app.Messaging(ctx)
	if err != nil {
		return fail(err)
	}
	client := func() (*firestore.Client, *grpccount.Counter, error) {
		calls := &grpccount.Counter{}
		c, err := grpccount.EmulatorClient(ctx, e.cfg.EmulatorHost, e.project, calls)
		if err == nil {
			closers = append(closers, func() { c.Close() })
		}
		return c, calls, err
	}
	gfs, gcalls, err := client()
	if err != nil {
		return fail(err)
	}
	ufs, ucalls, err := client()
	if err != nil {
		return fail(err)
	}
	// The functions' own Service and handlers, on injected clients.
	g := triggeronce.NewFirestore(gfs, quiet)
	svc := functions.NewService(&functions.Deps{Firestore: gfs, Messaging: msg, PushGuard: g, CountGuard: g},
		quiet.Logger)
	routes := map[string]func(context.Context, event.Event) error{}
	for _, f := range functions.Table() {
		routes["/guarded-"+f.Name] = svc.Handler(f.Name)
	}
	for name, h := range (&unguarded{fs: ufs, msg: msg}).handlers() {
		routes["/unguarded-"+name] = h
	}
	serving.Store(&routes)
	base, err := serve()
	if err != nil {
		return fail(err)
	}

	var created []string
	for _, f := range functions.Table() {
		if f.EventType == functions.EventCreated {
			created = append(created, f.Name)
		}
	}
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 4 * e.cfg.Concurrency}}
	closers = append(closers, hc.CloseIdleConnections)
	spread := func(n int) int { return (n*7919 + 1) % len(e.users) }
	hot := func(int) int { return 0 }
	tc := func(id, name, baseline, variant string, take func() []string, author func(int) int) *throughputCase {
		return &throughputCase{
			Result: Result{ID: id, Name: name, Backend: "http+firestore", Baseline: baseline, Unit: "delivery"},
			e:      e, url: base + "/" + variant + "-", functions: created, http: hc, take: take,
			author: author, fcm: fcm, hot: author(0) == author(1), statuses: map[int]int{},
		}
	}
	conc := e.cfg.Concurrency
	cases := []benchCase{
		tc("6a", fmt.Sprintf("HTTP unguarded handlers, %d in flight, authors spread", conc), "", "unguarded", ucalls.Take, spread),
		tc("6b", fmt.Sprintf("HTTP guarded functions, %d in flight, authors spread", conc), "6a", "guarded", gcalls.Take, spread),
		tc("6c", fmt.Sprintf("HTTP unguarded handlers, %d in flight, one hot author", conc), "", "unguarded", ucalls.Take, hot),
		tc("6d", fmt.Sprintf("HTTP guarded functions, %d in flight, one hot author", conc), "6c", "guarded", gcalls.Take, hot),
	}
	return cases, closeAll, nil
}

// throughputCase posts distinct post-created events, one delivery per
// function listening on created, Concurrency requests in flight.
type throughputCase struct {
	Result
	e         *env
	url       string // base URL of the variant, ending in "/"
	functions []string
	http      *http.Client
	take      func() []string
	author    func(n int) int // index of the author of event n
	fcm       *fcmemulator.Server
	hot       bool // one author: check its counter

	n         int
	latencies []time.Duration
	calls     [][]string // per round
	events    int
	elapsed   time.Duration
	pushes    int
	counted   int64 // postCount increments seen on the hot author
	statuses  map[int]int
}

func (c *throughputCase) res() *Result { return &c.Result }

func (c *throughputCase) warm(ctx context.Context, n int) error {
	_, codes, _, err := c.post(ctx, n)
	for _, code := range codes {
		if err == nil && code/100 != 2 {
			err = fmt.Errorf("HTTP status %d (0: no answer)", code)
		}
	}
	return err
}

// post posts k events and returns the deliveries' latencies and HTTP
// statuses (0: no answer), and the time until all were answered. It fails
// only when it cannot post at all.
func (c *throughputCase) post(ctx context.Context, k int) ([]time.Duration, []int, time.Duration, error) {
	var reqs []*http.Request
	for range k {
		c.n++
		author := c.e.users[c.author(c.n)]
		post := fmt.Sprintf("%s-%s-%d", c.e.run, c.ID, c.n)
		ch := firestoreeventtest.Change{ID: "ev-" + post, Type: functions.EventCreated, Project: c.e.project,
			Document: "users/" + author + "/posts/" + post,
			After:    map[string]any{"title": "Post " + post, "body": "Hello", "createdAt": time.Now()}}
		data, err := ch.Data()
		if err != nil {
			return nil, nil, 0, err
		}
		for _, f := range c.functions {
			req, err := ch.RequestWithBody(ctx, c.url+f, data)
			if err != nil {
				return nil, nil, 0, err
			}
			reqs = append(reqs, req)
		}
	}
	lat := make([]time.Duration, len(reqs))
	codes := make([]int, len(reqs))
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range c.e.cfg.Concurrency {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(reqs); i = int(next.Add(1) - 1) {
				t := time.Now()
				resp, err := c.http.Do(reqs[i])
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					codes[i] = resp.StatusCode
				}
				lat[i] = time.Since(t)
			}
		})
	}
	wg.Wait()
	return lat, codes, time.Since(start), nil
}

func (c *throughputCase) round(ctx context.Context, r int) error {
	k := share(c.e.cfg.Events, c.e.cfg.Rounds, r)
	pushes := len(c.fcm.Messages())
	before, err := c.hotCount(ctx)
	if err != nil {
		return err
	}
	c.take()
	lat, codes, elapsed, err := c.post(ctx, k)
	if err != nil {
		return err
	}
	for _, code := range codes {
		c.statuses[code]++
	}
	c.calls = append(c.calls, c.take())
	after, err := c.hotCount(ctx)
	if err != nil {
		return err
	}
	c.latencies = append(c.latencies, lat...)
	c.events += k
	c.elapsed += elapsed
	c.pushes += len(c.fcm.Messages()) - pushes
	c.counted += after - before
	return nil
}

// hotCount reads the hot author's postCount (0 when the authors spread).
func (c *throughputCase) hotCount(ctx context.Context) (int64, error) {
	if !c.hot {
		return 0, nil
	}
	snap, err := c.e.fs.Collection("users").Doc(c.e.users[c.author(0)]).Get(ctx)
	if err != nil {
		return 0, err
	}
	n, _ := snap.DataAt(postCount)
	v, _ := n.(int64)
	return v, nil
}

func (c *throughputCase) finish(ctx context.Context) *Result {
	c.Samples = len(c.latencies)
	c.P50Ms = percentile(c.latencies, 0.50)
	c.P99Ms = percentile(c.latencies, 0.99)
	c.RoundTrips, c.Calls = summarize(c.calls, c.events)
	if c.elapsed > 0 {
		c.EventsPerSec = float64(c.events) / c.elapsed.Seconds()
	}
	ok := 0
	for code, k := range c.statuses {
		if code/100 == 2 {
			ok += k
		} else {
			c.Errors += k
			if c.FirstError == "" {
				c.FirstError = fmt.Sprintf("HTTP status %d (0: no answer)", code)
			}
		}
	}
	want := c.events * followers
	verdict := "ok"
	if c.pushes != want || (c.hot && c.counted != int64(c.events)) || c.Errors > 0 {
		verdict = "FAIL"
	}
	c.Check = fmt.Sprintf("%s: %d events, %d/%d deliveries 2xx, %d pushes (want %d)",
		verdict, c.events, ok, c.Samples, c.pushes, want)
	if c.hot {
		c.Check += fmt.Sprintf(", postCount +%d (want %d)", c.counted, c.events)
	}
	return &c.Result
}
