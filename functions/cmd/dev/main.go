// Command dev runs fireonce locally: the Firestore emulator with the
// project's rules, the functions on functions-framework, the bridge that
// turns the emulator's trigger deliveries into CloudEvents for them (with
// at-least-once delivery simulated), and an FCM stand-in that logs each push.
// Ports come from firebase.json. Ctrl-C stops everything it started.
//
// Run it through ./scripts/dev.sh, which builds the functions server first:
//
//	./scripts/dev.sh                     # run until Ctrl-C
//	./scripts/dev.sh --demo              # write a demo world, check every effect, exit
//	./scripts/dev.sh --duplicates 3 --redeliver-after 10s --retry=false
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/fireonce/fireonce/functions/internal/devloop"
	"github.com/fireonce/fireonce/shared/bridge"
	"github.com/fireonce/fireonce/shared/cloudlog"
	"github.com/fireonce/fireonce/shared/emulatorapi"
)

func main() {
	os.Exit(run())
}

func run() int {
	var (
		serveBin       = flag.String("serve-bin", "", "functions server binary (go build ./functions/cmd/serve); required")
		firebaseJSON   = flag.String("config", "firebase.json", "firebase.json with the emulator ports")
		rules          = flag.String("rules", "firestore.rules", "security rules loaded into the emulator")
		project        = flag.String("project", devloop.DefaultProjectID, "emulator project ID")
		duplicates     = flag.Int("duplicates", bridge.DefaultDuplicates, "deliver each event N times concurrently with the same ce-id")
		redeliverAfter = flag.Duration("redeliver-after", 0, "deliver each event once more after this long (0: never)")
		retry          = flag.Bool("retry", true, "redeliver an event whose function failed, with backoff, like a function deployed with --retry")
		emulatorLog    = flag.String("emulator-log", ".emulator/firestore-emulator.log", "file for the emulator's own output")
		demo           = flag.Bool("demo", false, "write a demo world as its users, wait for the functions, print a summary and exit (non-zero when any check fails)")
	)
	flag.Parse()
	logger := cloudlog.New(os.Stdout, slog.LevelInfo)

	ports, err := devloop.PortsFromFirebaseJSON(*firebaseJSON)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dev:", err)
		return 2
	}
	if *duplicates < 1 {
		fmt.Fprintln(os.Stderr, "dev: --duplicates must be at least 1")
		return 2
	}
	if err := os.MkdirAll(filepath.Dir(*emulatorLog), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "dev:", err)
		return 2
	}
	emuLog, err := os.Create(*emulatorLog)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dev:", err)
		return 2
	}
	defer emuLog.Close()
	opts := &devloop.Options{
		EmulatorLog: emuLog,
		ProjectID:   *project,
		Ports:       ports,
		RulesFile:   *rules,
		ServeBinary: *serveBin,
		Bridge:      bridge.Options{Duplicates: *duplicates, RedeliverAfter: *redeliverAfter, Retry: *retry},
		Logger:      logger,
	}
	if *demo {
		opts.FCMUnregistered = []string{devloop.DemoDeadToken}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	loop, err := devloop.Start(startCtx, opts)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dev:", err)
		return 1
	}
	defer func() {
		fmt.Fprintln(os.Stderr, "dev: stopping")
		if err := loop.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "dev: stop:", err)
		}
	}()

	fmt.Fprintf(os.Stderr, `
fireonce dev loop is up (project %[1]s)
  Firestore emulator   %[2]s   (export FIRESTORE_EMULATOR_HOST=%[2]s; its log: %[8]s)
  functions            %[3]s/<name>   (functions-framework)
  event bridge         http://%[4]s   (%[5]d deliveries per event, retry %[6]t)
  FCM stand-in         %[7]s
Write a post as user u1, as a client app would (the security rules apply:
createdAt must be the request time):
  curl -s -H 'Authorization: Bearer %[9]s' -H 'Content-Type: application/json' \
    'http://%[2]s/v1/projects/%[1]s/databases/(default)/documents:commit' \
    -d '{"writes":[{"update":{"name":"projects/%[1]s/databases/(default)/documents/users/u1/posts/p1","fields":{"title":{"stringValue":"Hello"},"body":{"stringValue":"first post"}}},"updateTransforms":[{"fieldPath":"createdAt","setToServerValue":"REQUEST_TIME"}],"currentDocument":{"exists":false}}]}'
Ctrl-C stops everything.
`, loop.ProjectID(), loop.FirestoreHost(), loop.FunctionsURL(), loop.BridgeAddr(), *duplicates, *retry, loop.FCMEndpoint(), *emulatorLog,
		emulatorapi.UnsignedIDToken(loop.ProjectID(), "u1"))

	if *demo {
		sum, err := loop.RunDemo(ctx, os.Stderr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "dev: demo:", err)
			return 1
		}
		sum.Print(os.Stderr)
		if !sum.OK() {
			return 1
		}
		return 0
	}
	select {
	case <-ctx.Done():
	case <-loop.Done():
		fmt.Fprintln(os.Stderr, "dev: the emulator or the functions server exited; stopping")
		return 1
	}
	return 0
}
