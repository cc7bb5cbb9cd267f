// Package firestoreemulator starts and stops the Firestore emulator that ships
// with the Google Cloud CLI, from Go: for the local dev program and for
// end-to-end tests that need an emulator of their own (for example one started
// with --functions_emulator).
//
// Guarantees:
//   - Start returns only once the emulator answers HTTP on Host(), or with an
//     error; it fails early, with the tail of the emulator's output, when the
//     process exits during start-up, and stops what it started on any failure.
//   - The websocket port is always passed, so the emulator never opens a
//     random port of its own.
//   - The launcher is a shell script that starts java as a child. The emulator
//     runs in its own process group, and Stop signals the whole group (TERM,
//     then KILL after a grace period) and returns only when no live process of
//     the group is left, so no java child keeps a port after Stop.
//   - Missing prerequisites (java, gcloud, the emulator component) give errors
//     that say how to install them, matching ErrJavaNotFound or
//     ErrLauncherNotFound.
package firestoreemulator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// EnvLauncher names the variable that, when set, is the path of the emulator
// launcher, instead of looking it up through gcloud.
const EnvLauncher = "FIRESTORE_EMULATOR_LAUNCHER"

// Sentinel errors for missing prerequisites; the returned errors wrap them and
// add installation instructions.
var (
	ErrJavaNotFound     = errors.New("firestoreemulator: java not found")
	ErrLauncherNotFound = errors.New("firestoreemulator: emulator launcher not found")
)

// Defaults used when the corresponding Options field is zero.
const (
	DefaultHost         = "127.0.0.1"
	DefaultStartTimeout = 90 * time.Second
	DefaultStopGrace    = 5 * time.Second
)

// Options configures Start. The zero value (or nil) starts an emulator on free
// loopback ports with no rules and no functions emulator.
type Options struct {
	// Host is the address to bind; default DefaultHost.
	Host string
	// Port is the HTTP and gRPC port; 0 picks a free one.
	Port int
	// WebsocketPort is always passed to the emulator; 0 picks a free one.
	WebsocketPort int
	// ProjectID, when set, is passed as --project_id.
	ProjectID string
	// RulesFile, when set, is the security rules file (--rules).
	RulesFile string
	// FunctionsEmulator, when set, is the host:port the emulator delivers
	// trigger events to (--functions_emulator).
	FunctionsEmulator string
	// Log receives the emulator's stdout and stderr; nil discards them.
	Log io.Writer
	// StartTimeout bounds the wait for the emulator to answer; default
	// DefaultStartTimeout (the JVM starts slowly on a busy machine).
	StartTimeout time.Duration
	// StopGrace is how long Stop waits after TERM before KILL; default
	// DefaultStopGrace.
	StopGrace time.Duration
}

// Emulator is a running emulator process group. Its methods are safe for
// concurrent use.
type Emulator struct {
	host    string
	wsPort  int
	cmd     *exec.Cmd
	grace   time.Duration
	done    chan struct{} // closed when the launcher process has exited
	waitErr error         // set before done is closed
	tail    *tailBuffer

	stopOnce sync.Once
	stopErr  error
}

// Launcher returns the path of the emulator launcher: $FIRESTORE_EMULATOR_LAUNCHER
// when set, else platform/cloud-firestore-emulator/cloud_firestore_emulator
// under the Google Cloud CLI's SDK root. The error says how to install what is
// missing and matches ErrLauncherNotFound.
func Launcher(ctx context.Context) (string, error) {
	if p := os.Getenv(EnvLauncher); p != "" {
		if err := executable(p); err != nil {
			return "", fmt.Errorf("%w: %s=%s: %v", ErrLauncherNotFound, EnvLauncher, p, err)
		}
		return p, nil
	}
	gcloud, err := exec.LookPath("gcloud")
	if err != nil {
		return "", fmt.Errorf("%w: the Google Cloud CLI (gcloud) is not on PATH; it ships the Firestore emulator. "+
			"Install it from https://cloud.google.com/sdk/docs/install "+
			"(Debian: apt-get install google-cloud-cli google-cloud-cli-firestore-emulator), "+
			"or set %s to the emulator's cloud_firestore_emulator script", ErrLauncherNotFound, EnvLauncher)
	}
	out, err := exec.CommandContext(ctx, gcloud, "info", "--format=value(installation.sdk_root)").Output()
	if err != nil {
		return "", fmt.Errorf("%w: `gcloud info` failed (%v); is the Google Cloud CLI installed correctly? "+
			"Or set %s", ErrLauncherNotFound, err, EnvLauncher)
	}
	root := strings.TrimSpace(string(out))
	p := root + "/platform/cloud-firestore-emulator/cloud_firestore_emulator"
	if err := executable(p); err != nil {
		return "", fmt.Errorf("%w: the Firestore emulator is not installed in %s (%v). "+
			"Install it with `gcloud components install cloud-firestore-emulator` "+
			"(Debian package installs: apt-get install google-cloud-cli-firestore-emulator)",
			ErrLauncherNotFound, root, err)
	}
	return p, nil
}

// CheckJava reports whether the Java runtime the launcher runs is available:
// $JAVA when set (the launcher honours it), else java on PATH.
func CheckJava() error {
	if j := os.Getenv("JAVA"); j != "" {
		if _, err := exec.LookPath(j); err != nil {
			return fmt.Errorf("%w: JAVA=%s: %v", ErrJavaNotFound, j, err)
		}
		return nil
	}
	if _, err := exec.LookPath("java"); err != nil {
		return fmt.Errorf("%w on PATH; the Firestore emulator needs a Java 11+ runtime. "+
			"Debian/Ubuntu: apt-get update && apt-get install -y default-jre-headless; macOS: brew install openjdk",
			ErrJavaNotFound)
	}
	return nil
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return errors.New("not an executable file")
	}
	return nil
}

// Start starts an emulator and waits until it answers HTTP. ctx bounds only
// the start-up; the emulator runs until Stop. nil opts means defaults.
func Start(ctx context.Context, opts *Options) (*Emulator, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Host == "" {
		o.Host = DefaultHost
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.StopGrace <= 0 {
		o.StopGrace = DefaultStopGrace
	}
	if err := CheckJava(); err != nil {
		return nil, err
	}
	launcher, err := Launcher(ctx)
	if err != nil {
		return nil, err
	}
	if o.Port == 0 {
		if o.Port, err = FreePort(o.Host); err != nil {
			return nil, err
		}
	}
	if o.WebsocketPort == 0 {
		if o.WebsocketPort, err = FreePort(o.Host); err != nil {
			return nil, err
		}
	}
	args := []string{"start",
		"--host", o.Host,
		"--port", strconv.Itoa(o.Port),
		"--websocket_port", strconv.Itoa(o.WebsocketPort),
	}
	if o.ProjectID != "" {
		args = append(args, "--project_id", o.ProjectID)
	}
	if o.RulesFile != "" {
		if _, err := os.Stat(o.RulesFile); err != nil {
			return nil, fmt.Errorf("firestoreemulator: rules file: %w", err)
		}
		args = append(args, "--rules", o.RulesFile)
	}
	if o.FunctionsEmulator != "" {
		args = append(args, "--functions_emulator", o.FunctionsEmulator)
	}

	e := &Emulator{
		host:   net.JoinHostPort(o.Host, strconv.Itoa(o.Port)),
		wsPort: o.WebsocketPort,
		grace:  o.StopGrace,
		done:   make(chan struct{}),
		tail:   &tailBuffer{max: 4096},
	}
	var out io.Writer = e.tail
	if o.Log != nil {
		out = io.MultiWriter(o.Log, e.tail)
	}
	// Not CommandContext: ctx bounds the start-up, not the emulator's life.
	cmd := exec.Command(launcher, args...)
	cmd.Stdout = out
	cmd.Stderr = out
	// Its own group, so Stop reaches the java child the launcher starts.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Should a stray process keep the output pipe open, Wait gives up on it.
	cmd.WaitDelay = o.StopGrace
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("firestoreemulator: start %s: %w", launcher, err)
	}
	e.cmd = cmd
	go func() {
		e.waitErr = cmd.Wait()
		close(e.done)
	}()

	if err := e.waitReady(ctx, o.StartTimeout); err != nil {
		_ = e.Stop()
		return nil, err
	}
	return e, nil
}

// waitReady polls the emulator's root URL until it answers.
func (e *Emulator) waitReady(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.host+"/", nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-e.done:
			return fmt.Errorf("firestoreemulator: the emulator exited during start-up (%v); its output ends with:\n%s",
				e.waitErr, e.tail.String())
		case <-ctx.Done():
			return fmt.Errorf("firestoreemulator: the emulator did not answer on %s within %v (%w); its output ends with:\n%s",
				e.host, limit, ctx.Err(), e.tail.String())
		case <-tick.C:
		}
	}
}

// Host returns the emulator's host:port, as FIRESTORE_EMULATOR_HOST expects.
func (e *Emulator) Host() string { return e.host }

// WebsocketPort returns the websocket port passed to the emulator.
func (e *Emulator) WebsocketPort() int { return e.wsPort }

// Pgid returns the process group ID of the emulator (the launcher's PID).
func (e *Emulator) Pgid() int { return e.cmd.Process.Pid }

// Done is closed when the launcher process exits, whether through Stop or on
// its own (a crash the dev program should notice).
func (e *Emulator) Done() <-chan struct{} { return e.done }

// Stop terminates the emulator's whole process group: TERM, then KILL after
// the grace period. It returns once the launcher has been reaped and no
// process of the group is left. It is safe to call more than once; later
// calls return the first call's result.
func (e *Emulator) Stop() error {
	e.stopOnce.Do(func() { e.stopErr = e.stop() })
	return e.stopErr
}

func (e *Emulator) stop() error {
	pgid := e.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	deadline := time.Now().Add(e.grace)
	if !e.waitGone(pgid, deadline) {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		if !e.waitGone(pgid, time.Now().Add(e.grace)) {
			return fmt.Errorf("firestoreemulator: process group %d still alive after KILL", pgid)
		}
	}
	return nil
}

// waitGone waits until the launcher is reaped and the group is empty, or the
// deadline passes.
func (e *Emulator) waitGone(pgid int, deadline time.Time) bool {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-e.done:
	case <-timer.C:
		return false
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for GroupAlive(pgid) {
		select {
		case <-timer.C:
			return false
		case <-tick.C:
		}
	}
	return true
}

// GroupAlive reports whether any process of process group pgid still runs.
// Zombies do not count: an orphaned child that exited holds no port and waits
// only for init to reap it, which some container inits do lazily.
func GroupAlive(pgid int) bool {
	err := syscall.Kill(-pgid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	live, ok := liveMembers(pgid)
	if !ok {
		return true // no /proc: trust kill
	}
	return live
}

// liveMembers scans /proc for a process of group pgid that is not a zombie.
// ok is false when /proc cannot be read (not Linux).
func liveMembers(pgid int) (live, ok bool) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false, false
	}
	for _, ent := range entries {
		if _, err := strconv.Atoi(ent.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + ent.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid pgrp ...; comm may contain spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, err := strconv.Atoi(f[2]); err == nil && g == pgid {
			return true, true
		}
	}
	return false, true
}

// FreePort returns a TCP port on host that nothing listens on right now.
func FreePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("firestoreemulator: find a free port on %s: %w", host, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tailBuffer keeps the last max bytes written, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.buf))
}
