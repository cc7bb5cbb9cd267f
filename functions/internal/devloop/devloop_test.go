package devloop

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fireonce/fireonce/shared/bridge"
	"github.com/fireonce/fireonce/shared/firestoreemulator"
	"github.com/fireonce/fireonce/shared/logtest"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("runtime.Caller failed")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

func TestPortsFromFirebaseJSON(t *testing.T) {
	p, err := PortsFromFirebaseJSON(filepath.Join(repoRoot(t), "firebase.json"))
	if err != nil {
		t.Fatal(err)
	}
	if p.FirestorePort == 0 || p.WebsocketPort == 0 || p.FunctionsPort == 0 || p.BridgePort == 0 {
		t.Fatalf("ports not read: %+v", p)
	}
	seen := map[int]bool{}
	for _, port := range []int{p.FirestorePort, p.WebsocketPort, p.FunctionsPort, p.BridgePort} {
		if seen[port] {
			t.Fatalf("firebase.json gives port %d twice: %+v", port, p)
		}
		seen[port] = true
	}
	if _, err := PortsFromFirebaseJSON(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Fatal("no error for a missing file")
	}
}

// TestDemoEndToEnd runs the whole loop on free ports: the real emulator
// started with --functions_emulator, writes made through its REST API as
// users (rules on), events delivered by the bridge with duplicates and
// retries, the functions served by functions-framework in their own process.
// Counters must be exact, each device must get one push per post, no marker
// may be left processing.
func TestDemoEndToEnd(t *testing.T) {
	if err := firestoreemulator.CheckJava(); err != nil {
		t.Fatal(err)
	}
	root := repoRoot(t)
	bin := filepath.Join(t.TempDir(), "serve")
	build := exec.Command("go", "build", "-o", bin, "./functions/cmd/serve")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the functions server: %v\n%s", err, out)
	}

	logger := slog.New(slog.NewTextHandler(&logtest.Buffer{}, nil))
	functionsLog := &logtest.Buffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	loop, err := Start(ctx, &Options{
		ProjectID:       "demo-e2e",
		RulesFile:       filepath.Join(root, "firestore.rules"),
		ServeBinary:     bin,
		Bridge:          bridge.Options{Duplicates: 3, Retry: true, RetryBackoff: 200 * time.Millisecond},
		FCMUnregistered: []string{DemoDeadToken},
		Logger:          logger,
		EmulatorLog:     io.Discard,
		FunctionsLog:    functionsLog,
	})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			loop.Stop()
		}
	}()

	var progress bytes.Buffer
	sum, err := loop.RunDemo(ctx, &progress)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, progress.String())
	}
	var out strings.Builder
	sum.Print(&out)
	if !sum.OK() {
		t.Fatalf("demo checks failed:\n%s", out.String())
	}
	// The checks above include exact counters, pushes per device and no
	// processing marker; also make sure duplicates really were delivered.
	total := 0
	for _, n := range sum.Events {
		total += n
	}
	if sum.Deliveries < 3*total {
		t.Fatalf("%d deliveries for %d events with 3 duplicates each:\n%s", sum.Deliveries, total, out.String())
	}
	t.Log(out.String())

	// Stop leaves nothing listening: not the emulator (nor its java
	// child), the functions server, or the bridge and FCM stand-in.
	stopped = true
	if err := loop.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	p := loop.ports
	for _, addr := range []string{
		net.JoinHostPort(p.FirestoreHost, strconv.Itoa(p.FirestorePort)),
		net.JoinHostPort(p.FirestoreHost, strconv.Itoa(p.WebsocketPort)),
		net.JoinHostPort(p.FunctionsHost, strconv.Itoa(p.FunctionsPort)),
		loop.BridgeAddr(),
	} {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			t.Errorf("%s still accepts connections after Stop", addr)
		}
	}
	if firestoreemulator.GroupAlive(loop.emu.Pgid()) {
		t.Errorf("a process of the emulator's group %d survived Stop", loop.emu.Pgid())
	}
	if firestoreemulator.GroupAlive(loop.serve.Process.Pid) {
		t.Errorf("a process of the functions server's group survived Stop")
	}
}
