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
// Like Cloud Functions (2nd gen) at its default concurrency of 1, each
// instance handles one request at a time and concurrent deliveries land on
// different instances: INSTANCES (default 8) functions-framework servers run
// behind a front on PORT (see package instances).
package main

import (
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	_ "github.com/fireonce/fireonce/functions"
	"github.com/fireonce/fireonce/functions/internal/instances"
)

func main() {
	port := envOr("PORT", "8080")
	host := envOr("HOST", "127.0.0.1")
	n, err := strconv.Atoi(envOr("INSTANCES", "8"))
	if err != nil || n < 1 {
		log.Fatalf("serve: INSTANCES=%q: want a whole number of at least 1", os.Getenv("INSTANCES"))
	}
	front, err := instances.Start(n)
	if err != nil {
		log.Fatalf("serve: %v", err)
	}
	srv := &http.Server{Addr: net.JoinHostPort(host, port), Handler: front, ReadHeaderTimeout: 10 * time.Second}
	log.Printf("serve: %d instances behind http://%s", n, srv.Addr)
	log.Fatal(srv.ListenAndServe())
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
