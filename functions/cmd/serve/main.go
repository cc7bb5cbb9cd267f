// Command serve runs every fireonce function locally with
// functions-framework-go, as the Cloud Functions runtime does:
//
//	go run ./functions/cmd/serve            # every function at /<name>
//	FUNCTION_TARGET=incrementPostCount go run ./functions/cmd/serve   # that one at /
//
// PORT (default 8080) and HOST (default 127.0.0.1: loopback unless told
// otherwise) choose where it listens. The functions read their configuration
// (GOOGLE_CLOUD_PROJECT, FIRESTORE_EMULATOR_HOST, FCM_ENDPOINT, ...) on the
// first delivery.
//
// Like Cloud Functions (2nd gen) with its default concurrency of 1, each
// instance handles one request at a time and concurrent deliveries land on
// different instances: INSTANCES (default 8) functions-framework servers run
// in this process on loopback ports, behind a front server on PORT that hands
// each request to an idle one (queueing when all are busy). This also keeps
// clear of cloudevents/sdk-go#1224: a functions-framework server handling
// concurrent requests to one function can leave one of them waiting for
// the next request.
package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"

	_ "github.com/fireonce/fireonce/functions"
)

func main() {
	port := envOr("PORT", "8080")
	host := envOr("HOST", "127.0.0.1")
	n, err := strconv.Atoi(envOr("INSTANCES", "8"))
	if err != nil || n < 1 {
		log.Fatalf("serve: INSTANCES=%q: want a whole number of at least 1", os.Getenv("INSTANCES"))
	}
	backends := make([]*url.URL, n)
	for i := range backends {
		addr, err := startInstance()
		if err != nil {
			log.Fatalf("serve: instance %d: %v", i, err)
		}
		backends[i] = &url.URL{Scheme: "http", Host: addr}
	}
	srv := &http.Server{Addr: net.JoinHostPort(host, port), Handler: newFront(backends), ReadHeaderTimeout: 10 * time.Second}
	log.Printf("serve: %d instances behind http://%s", n, srv.Addr)
	log.Fatal(srv.ListenAndServe())
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
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
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return addr, nil
		}
		select {
		case err := <-errc:
			return "", err
		default:
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("not listening on %s after 10s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// maxFunctionTimeout is the longest an event-driven function may run.
const maxFunctionTimeout = 540 * time.Second

// newFront returns a handler that proxies each request to an idle backend,
// waiting for one when all are busy: one request per backend at a time.
func newFront(backends []*url.URL) http.Handler {
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
		// The function runs to the end even when the caller goes away, as on
		// the platform (bounded by the maximum function timeout): cancelling
		// a request while functions-framework hands it over is what strands
		// the next one (cloudevents/sdk-go#1332).
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), maxFunctionTimeout)
		defer cancel()
		p.ServeHTTP(w, r.WithContext(ctx))
	})
}
