// Package instances serves the registered functions-framework functions the
// way Cloud Functions (2nd gen) runs them at its default concurrency of 1:
// several instances, each handling one request at a time, so concurrent
// deliveries land on different instances and queue when all are busy.
//
// Each instance is a functions-framework server of its own (funcframework
// builds a fresh handler per server) on a loopback port of this process,
// behind one front handler. This also keeps clear of cloudevents/sdk-go#1224
// and #1332: one functions-framework server handling concurrent requests to a
// function can strand a request until the next one arrives, and cancelling a
// request while the framework hands it over strands the next. Here an
// instance never has two requests, and a request, once handed to an
// instance, runs to its end even when its caller goes away (as on the
// platform, bounded by the maximum function timeout).
package instances

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"time"

	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"
)

// MaxFunctionTimeout is the longest an event-driven function may run.
const MaxFunctionTimeout = 540 * time.Second

// Start starts n functions-framework servers serving every registered
// function (or FUNCTION_TARGET's at "/") and returns the front handler.
// The servers run until the process exits, as funcframework's do.
func Start(n int) (http.Handler, error) {
	if n < 1 {
		return nil, fmt.Errorf("instances: need at least 1 instance, not %d", n)
	}
	backends := make([]*url.URL, n)
	for i := range backends {
		addr, err := startInstance()
		if err != nil {
			return nil, fmt.Errorf("instances: instance %d: %w", i, err)
		}
		backends[i] = &url.URL{Scheme: "http", Host: addr}
	}
	return Front(backends), nil
}

// startInstance starts one functions-framework server on a free loopback
// port and returns its address once it listens.
func startInstance() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close() // funcframework listens itself; the port is free again
	errc := make(chan error, 1)
	go func() { errc <- funcframework.StartHostPort("127.0.0.1", port) }()
	addr := "127.0.0.1:" + port
	deadline := time.Now().Add(20 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return addr, nil
		}
		select {
		case err := <-errc:
			return "", err
		case <-time.After(20 * time.Millisecond): // poll interval
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("functions-framework does not listen on %s after 20s", addr)
		}
	}
}

// Front returns a handler that proxies each request to an idle backend,
// waiting for one when all are busy: one request per backend at a time.
func Front(backends []*url.URL) http.Handler {
	idle := make(chan *httputil.ReverseProxy, len(backends))
	for _, b := range backends {
		idle <- httputil.NewSingleHostReverseProxy(b)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p *httputil.ReverseProxy
		select {
		case p = <-idle:
		case <-r.Context().Done():
			return // the caller gave up while queued
		}
		defer func() { idle <- p }()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), MaxFunctionTimeout)
		defer cancel()
		p.ServeHTTP(w, r.WithContext(ctx))
	})
}
