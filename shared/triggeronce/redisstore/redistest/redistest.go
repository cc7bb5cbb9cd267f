// Package redistest runs a real redis-server for tests: one per test on a
// free loopback port in a temporary directory, stopped by t.Cleanup, or the
// shared server that scripts/test.sh starts.
//
// The server binary is $REDIS_SERVER, else redis-server on PATH. When there
// is none, tests fail (never skip) with instructions to install it.
package redistest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Options configure a Server. nil means defaults.
type Options struct {
	// AppendOnly turns on AOF persistence with appendfsync always, so every
	// acknowledged write survives Kill and Restart.
	AppendOnly bool
}

// Server is a redis-server process owned by one test.
type Server struct {
	// Addr is host:port of the server; it stays the same across Restart.
	Addr string

	bin  string
	dir  string
	args []string
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// startTimeout bounds how long a server may take to answer PING.
const startTimeout = 20 * time.Second

// Binary returns the redis-server to run, or fails t with how to install it.
func Binary(t testing.TB) string {
	t.Helper()
	names := []string{"redis-server", "/usr/bin/redis-server"}
	if bin := os.Getenv("REDIS_SERVER"); bin != "" {
		names = []string{bin}
	}
	for _, name := range names {
		if bin, err := exec.LookPath(name); err == nil {
			return bin
		}
	}
	t.Fatalf("redistest: %s not found; the Redis store's tests need a real redis-server.\n"+
		"  Debian/Ubuntu: apt-get update && apt-get install -y redis-server (./scripts/test.sh does this when run as root)\n"+
		"  macOS: brew install redis\n"+
		"  or set REDIS_SERVER to its path", strings.Join(names, " or "))
	return ""
}

// Start starts a redis-server on a free loopback port in a temporary
// directory and stops it when the test ends.
func Start(t testing.TB, opts *Options) *Server {
	t.Helper()
	if opts == nil {
		opts = &Options{}
	}
	s := &Server{bin: Binary(t), dir: t.TempDir()}
	t.Cleanup(func() { s.stop(t) })
	var lastErr error
	for range 5 { // another process may take the port between probe and bind
		port, err := freePort()
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		s.args = []string{
			"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", s.dir,
			"--daemonize", "no", "--logfile", filepath.Join(s.dir, "redis.log"),
			"--save", "", "--appendfsync", "always",
			"--appendonly", map[bool]string{true: "yes", false: "no"}[opts.AppendOnly],
		}
		if lastErr = s.start(); lastErr == nil {
			return s
		}
		s.stop(t)
	}
	t.Fatalf("redistest: %v\n%s", lastErr, s.logTail())
	return nil
}

// Client returns a client of s with the given options (Addr is set; nil
// means defaults), closed when the test ends.
func (s *Server) Client(t testing.TB, opts *redis.Options) *redis.Client {
	t.Helper()
	o := redis.Options{}
	if opts != nil {
		o = *opts
	}
	o.Addr = s.Addr
	c := redis.NewClient(&o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Kill ends the server with SIGKILL, as a crash would, and waits until it has
// exited. With AppendOnly every acknowledged write is on disk already.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Restart starts the server again on the same port and directory, so an
// AppendOnly server comes back with its data; it waits until it answers.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Kill(t)
	if err := s.start(); err != nil {
		t.Fatalf("redistest: restart: %v\n%s", err, s.logTail())
	}
}

func (s *Server) start() error {
	cmd := exec.Command(s.bin, s.args...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	done := s.done
	go func() { _ = cmd.Wait(); close(done) }()

	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	deadline := time.Now().Add(startTimeout)
	for {
		// PING fails with LOADING while the server replays its AOF.
		err := c.Ping(context.Background()).Err()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			s.cmd = nil
			return fmt.Errorf("%s exited before answering on %s: %s", s.bin, s.Addr, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer on %s within %v: %v", s.bin, s.Addr, startTimeout, err)
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
}

// stop ends the server politely, then forcibly.
func (s *Server) stop(t testing.TB) {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		t.Logf("redistest: %s did not stop on SIGINT; killing it", s.Addr)
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd = nil
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Shared returns a client of the server named by REDIS_URL or
// FIREONCE_REDIS_ADDR (scripts/test.sh sets the latter), or else of a new
// server for this test. Tests sharing a server must use distinct keys, for
// example through a per-test key prefix (see Prefix).
func Shared(t testing.TB) redis.UniversalClient {
	t.Helper()
	var c *redis.Client
	switch url, addr := os.Getenv("REDIS_URL"), os.Getenv("FIREONCE_REDIS_ADDR"); {
	case url != "":
		o, err := redis.ParseURL(url)
		if err != nil {
			t.Fatalf("redistest: REDIS_URL: %v", err)
		}
		c = redis.NewClient(o)
	case addr != "":
		c = redis.NewClient(&redis.Options{Addr: addr})
	default:
		return Start(t, nil).Client(t, nil)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("redistest: the Redis server of REDIS_URL/FIREONCE_REDIS_ADDR does not answer: %v", err)
	}
	return c
}

// Prefix returns a key prefix unique to this test and run, so tests can
// share one server without seeing each other's keys.
func Prefix(t testing.TB) string {
	return fmt.Sprintf("fireonce:test:%d:%s:", time.Now().UnixNano(), t.Name())
}
