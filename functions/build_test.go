package functions_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fireonce/fireonce/functions"
	"github.com/fireonce/fireonce/functions/internal/buildcheck"
	"github.com/fireonce/fireonce/shared/fcmemulator"
	"github.com/fireonce/fireonce/shared/firestoreemulator"
	"github.com/fireonce/fireonce/shared/firestoreevent/firestoreeventtest"
	"github.com/fireonce/fireonce/shared/firestoretest"
	"github.com/fireonce/fireonce/shared/logtest"
)

// TestRootIsDeployable checks the repository root the way Google's Go
// buildpack reads it.
func TestRootIsDeployable(t *testing.T) {
	if err := buildcheck.CheckRoot(repoRoot(t)); err != nil {
		t.Fatal(err)
	}
}

// buildpackMain is what the buildpack generates: a main package that imports
// the root package of the source and starts the framework.
const buildpackMain = `package main

import (
	"log"
	"os"

	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"

	_ "github.com/fireonce/fireonce"
)

func main() {
	if err := funcframework.StartHostPort("127.0.0.1", os.Getenv("PORT")); err != nil {
		log.Fatal(err)
	}
}
`

// TestBuildpackBuild builds the module the way the buildpack does (a
// generated main module that requires this one through a replace directive),
// starts the binary once per FUNCTION_TARGET and posts a binary-mode
// CloudEvent to it.
func TestBuildpackBuild(t *testing.T) {
	env := firestoretest.New(t)
	root := repoRoot(t)
	dir := t.TempDir()

	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	// Keep the module's requirements so the build resolves from the module
	// cache, as the buildpack's go mod tidy would from the proxy.
	mainMod := strings.Replace(string(gomod), "module github.com/fireonce/fireonce", "module example.com/buildpackmain", 1) +
		fmt.Sprintf("\nrequire github.com/fireonce/fireonce v0.0.0\n\nreplace github.com/fireonce/fireonce => %s\n", root)
	gosum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"go.mod": mainMod, "go.sum": string(gosum), "main.go": buildpackMain} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "server")
	build := exec.Command("go", "build", "-mod=mod", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build as the buildpack does: %v\n%s", err, out)
	}

	fcm := fcmemulator.New(nil)
	srv := &http.Server{Handler: fcm.Handler()}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	for _, f := range functions.Table() {
		t.Run(f.Name, func(t *testing.T) {
			p, err := firestoreemulator.FreePort("127.0.0.1")
			if err != nil {
				t.Fatal(err)
			}
			port := strconv.Itoa(p)
			cmd := exec.Command(bin)
			cmd.Env = append(os.Environ(),
				"PORT="+port, "FUNCTION_TARGET="+f.Name,
				"GOOGLE_CLOUD_PROJECT="+env.ProjectID,
				"FIRESTORE_EMULATOR_HOST="+env.Host,
				"FCM_ENDPOINT=http://"+ln.Addr().String()+"/v1")
			logs := &logtest.Buffer{}
			cmd.Stdout, cmd.Stderr = logs, logs
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			base := "http://127.0.0.1:" + port
			waitListening(t, "127.0.0.1:"+port)

			change := firestoreeventtest.Change{Type: f.EventType, Project: env.ProjectID, Document: "users/u1/posts/p1"}
			fields := map[string]any{"title": "t", "body": "b", "createdAt": time.Now()}
			if strings.HasSuffix(f.EventType, ".deleted") {
				change.Before = fields
			} else {
				change.After = fields
			}
			// With FUNCTION_TARGET set the function is served at "/".
			req, err := change.Request(context.Background(), base+"/")
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("post event: %v\nlogs:\n%s", err, logs.String())
			}
			resp.Body.Close()
			if resp.StatusCode/100 != 2 {
				t.Fatalf("%s answered %s\nlogs:\n%s", f.Name, resp.Status, logs.String())
			}
			// The log line is written before the response, but reaches us
			// through a pipe: poll for it.
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(logs.String(), `"outcome":"executed"`) {
				if time.Now().After(deadline) {
					t.Fatalf("%s did not log an executed outcome:\n%s", f.Name, logs.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

func waitListening(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %s after 30s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
