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
package main

import (
	"log"
	"os"

	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"

	_ "github.com/fireonce/fireonce/functions"
)

func main() {
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	host := os.Getenv("HOST")
	if host == "" {
		host = "127.0.0.1"
	}
	if err := funcframework.StartHostPort(host, port); err != nil {
		log.Fatalf("serve: %v", err)
	}
}
