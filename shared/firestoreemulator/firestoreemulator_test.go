package firestoreemulator_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fireonce/fireonce/shared/firestoreemulator"
	"github.com/fireonce/fireonce/shared/logtest"
)

// envFake makes the test binary act as a fake launcher (see TestMain).
const envFake = "FIRESTOREEMULATOR_TEST_FAKE"

// TestMain lets the test binary stand in for the launcher: "launcher" serves
// HTTP on --port, ignores TERM and starts a "child" that ignores TERM too, so
// Stop has to escalate to KILL for the whole group.
func TestMain(m *testing.M) {
	switch os.Getenv(envFake) {
	case "launcher":
		fakeLauncher()
		return
	case "child":
		signal.Ignore(syscall.SIGTERM)
		select {}
	}
	os.Exit(m.Run())
}

func fakeLauncher() {
	signal.Ignore(syscall.SIGTERM)
	var host, port string
	for i, a := range os.Args {
		switch a {
		case "--host":
			host = os.Args[i+1]
		case "--port":
			port = os.Args[i+1]
		}
	}
	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), envFake+"=child")
	if err := child.Start(); err != nil {
		os.Exit(2)
	}
	_ = http.ListenAndServe(net.JoinHostPort(host, port), http.HandlerFunc(
		func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "Ok") }))
	os.Exit(3)
}

func portFree(t *testing.T, addr string) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Errorf("%s still in use after Stop: %v", addr, err)
		return
	}
	l.Close()
}

func TestStartStopRealEmulator(t *testing.T) {
	var log logtest.Buffer
	ctx := context.Background()
	emu, err := firestoreemulator.Start(ctx, &firestoreemulator.Options{
		ProjectID: "demo-firestoreemulator",
		Log:       &log,
	})
	if err != nil {
		t.Fatalf("Start: %v\n(the emulator needs java and the Google Cloud CLI's cloud-firestore-emulator component)", err)
	}
	pgid := emu.Pgid()
	t.Cleanup(func() { _ = emu.Stop() })

	resp, err := http.Get("http://" + emu.Host() + "/")
	if err != nil {
		t.Fatalf("GET /: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET / = %s %q", resp.Status, body)
	}
	if !firestoreemulator.GroupAlive(pgid) {
		t.Fatalf("process group %d not alive while running", pgid)
	}

	if err := emu.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if firestoreemulator.GroupAlive(pgid) {
		t.Errorf("process group %d (launcher and java) still alive after Stop", pgid)
	}
	select {
	case <-emu.Done():
	default:
		t.Error("Done not closed after Stop")
	}
	portFree(t, emu.Host())
	portFree(t, net.JoinHostPort(firestoreemulator.DefaultHost, strconv.Itoa(emu.WebsocketPort())))
	if err := emu.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if !strings.Contains(log.String(), "Dev App Server is now running") {
		t.Logf("emulator output:\n%s", log.String())
	}
}

func TestStopKillsGroupIgnoringTerm(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(firestoreemulator.EnvLauncher, exe)
	t.Setenv(envFake, "launcher")
	emu, err := firestoreemulator.Start(context.Background(), &firestoreemulator.Options{
		StartTimeout: 20 * time.Second,
		StopGrace:    300 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	pgid := emu.Pgid()
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	if err := emu.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if firestoreemulator.GroupAlive(pgid) {
		t.Errorf("process group %d still alive after Stop", pgid)
	}
	portFree(t, emu.Host())
}

func TestStartFailsEarlyWhenProcessExits(t *testing.T) {
	script := filepath.Join(t.TempDir(), "launcher")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho 'no such flag: boom' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(firestoreemulator.EnvLauncher, script)
	// A long timeout: only the early exit can make Start return quickly.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := firestoreemulator.Start(ctx, &firestoreemulator.Options{StartTimeout: time.Minute})
	if err == nil {
		t.Fatal("Start succeeded with a launcher that exits")
	}
	for _, want := range []string{"exited during start-up", "no such flag: boom"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

func TestMissingPrerequisites(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "plain")
	if err := os.WriteFile(notExec, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	java, err := exec.LookPath("java")
	if err != nil {
		t.Fatalf("java: %v (the emulator tests need a Java runtime: apt-get install -y default-jre-headless)", err)
	}
	tests := []struct {
		name     string
		env      map[string]string
		want     error
		contains string
	}{
		{"launcher missing", map[string]string{firestoreemulator.EnvLauncher: filepath.Join(dir, "nope")},
			firestoreemulator.ErrLauncherNotFound, firestoreemulator.EnvLauncher},
		{"launcher not executable", map[string]string{firestoreemulator.EnvLauncher: notExec},
			firestoreemulator.ErrLauncherNotFound, "not an executable"},
		{"gcloud not on PATH", map[string]string{firestoreemulator.EnvLauncher: "", "PATH": dir, "JAVA": java},
			firestoreemulator.ErrLauncherNotFound, "cloud.google.com/sdk/docs/install"},
		{"java missing", map[string]string{"JAVA": filepath.Join(dir, "java")},
			firestoreemulator.ErrJavaNotFound, "JAVA="},
		{"java not on PATH", map[string]string{"JAVA": "", "PATH": dir},
			firestoreemulator.ErrJavaNotFound, "apt-get install"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			_, err := firestoreemulator.Start(context.Background(), nil)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Start error = %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.contains) {
				t.Errorf("error %q does not say %q", err, tt.contains)
			}
		})
	}
}
