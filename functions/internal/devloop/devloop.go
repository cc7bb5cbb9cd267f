// Package devloop runs fireonce locally the way production runs it: the
// Firestore emulator, whose writes trigger the Go functions (the Firebase
// emulator suite cannot run Go functions: the bridge closes that gap), the
// functions served by functions-framework in a process of their own, and an
// FCM stand-in that logs each push.
//
// Start brings the pieces up in dependency order (the bridge listens before
// the emulator starts, since the emulator is told where to deliver; triggers
// are registered once the emulator answers) and Stop takes them down: the
// functions server's and the emulator's whole process groups (the emulator's
// launcher starts java as a child), then the bridge after its deliveries in
// flight. Nothing it started is left listening.
package devloop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/fireonce/fireonce/functions"
	"github.com/fireonce/fireonce/shared/bridge"
	"github.com/fireonce/fireonce/shared/emulatorapi"
	"github.com/fireonce/fireonce/shared/fcmemulator"
	"github.com/fireonce/fireonce/shared/firestoreemulator"
)

// DefaultProjectID is a demo- project: the emulator never reaches production
// with it.
const DefaultProjectID = "demo-fireonce"

// Options configure a Loop.
type Options struct {
	// ProjectID defaults to DefaultProjectID.
	ProjectID string
	// Ports; zero ports are picked free.
	Ports Ports
	// RulesFile is loaded into the emulator (firestore.rules).
	RulesFile string
	// ServeBinary is the functions server (built from ./functions/cmd/serve).
	ServeBinary string
	// Bridge configures the at-least-once simulation.
	Bridge bridge.Options
	// FCMUnregistered are device tokens the FCM stand-in reports dead.
	FCMUnregistered []string
	// Logger receives the bridge's and the FCM stand-in's lines; default
	// slog.Default().
	Logger *slog.Logger
	// ProcessLog receives the emulator's and the functions server's output;
	// default os.Stderr for the emulator, os.Stdout for the functions.
	EmulatorLog, FunctionsLog io.Writer
}

// Loop is a running dev loop.
type Loop struct {
	project   string
	ports     Ports
	emu       *firestoreemulator.Emulator
	bridge    *bridge.Bridge
	fcm       *fcmemulator.Server
	http      *http.Server
	serve     *exec.Cmd
	serveDone chan struct{}
	api       *emulatorapi.Client
	stopOnce  sync.Once
	stopErr   error
}

// Start starts every piece and registers the triggers of the functions
// table. On error, whatever was started is stopped.
func Start(ctx context.Context, opts *Options) (_ *Loop, err error) {
	if opts == nil || opts.ServeBinary == "" {
		return nil, errors.New("devloop: Options.ServeBinary is required (go build ./functions/cmd/serve)")
	}
	o := *opts
	if o.ProjectID == "" {
		o.ProjectID = DefaultProjectID
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.EmulatorLog == nil {
		o.EmulatorLog = os.Stderr
	}
	if o.FunctionsLog == nil {
		o.FunctionsLog = os.Stdout
	}
	l := &Loop{project: o.ProjectID, ports: o.Ports}
	defer func() {
		if err != nil {
			l.Stop()
		}
	}()
	if err := l.pickPorts(); err != nil {
		return nil, err
	}

	// The bridge (and the FCM stand-in beside it) listen first: the
	// emulator is told where to deliver when it starts.
	l.fcm = fcmemulator.New(&fcmemulator.Options{Logger: o.Logger, Unregistered: o.FCMUnregistered})
	bo := o.Bridge
	if bo.Logger == nil {
		bo.Logger = o.Logger
	}
	if l.bridge, err = bridge.New(l.project, l.FunctionsURL(), triggers(), &bo); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", l.BridgeAddr())
	if err != nil {
		return nil, fmt.Errorf("devloop: bridge: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/functions/", l.bridge.Handler())
	mux.Handle("/v1/", l.fcm.Handler())
	l.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go l.http.Serve(ln)

	l.emu, err = firestoreemulator.Start(ctx, &firestoreemulator.Options{
		Host: l.ports.FirestoreHost, Port: l.ports.FirestorePort, WebsocketPort: l.ports.WebsocketPort,
		ProjectID: l.project, RulesFile: o.RulesFile, FunctionsEmulator: l.BridgeAddr(), Log: o.EmulatorLog,
	})
	if err != nil {
		return nil, err
	}
	l.api = emulatorapi.New(l.emu.Host(), l.project)

	if err := l.startFunctions(ctx, o.ServeBinary, o.FunctionsLog); err != nil {
		return nil, err
	}
	if err := l.bridge.Register(ctx, l.emu.Host()); err != nil {
		return nil, err
	}
	return l, nil
}

func triggers() []bridge.Trigger {
	var ts []bridge.Trigger
	for _, f := range functions.Table() {
		ts = append(ts, bridge.Trigger{Name: f.Name, EventType: f.EventType, DocumentPattern: f.Document})
	}
	return ts
}

func (l *Loop) pickPorts() error {
	p := &l.ports
	for _, h := range []*string{&p.FirestoreHost, &p.FunctionsHost, &p.BridgeHost} {
		if *h == "" {
			*h = "127.0.0.1"
		}
	}
	for _, pp := range []struct {
		host string
		port *int
	}{{p.FirestoreHost, &p.FirestorePort}, {p.FirestoreHost, &p.WebsocketPort}, {p.FunctionsHost, &p.FunctionsPort}, {p.BridgeHost, &p.BridgePort}} {
		if *pp.port != 0 {
			continue
		}
		port, err := firestoreemulator.FreePort(pp.host)
		if err != nil {
			return err
		}
		*pp.port = port
	}
	return nil
}

// startFunctions runs the functions server in its own process group and
// waits until it listens.
func (l *Loop) startFunctions(ctx context.Context, bin string, log io.Writer) error {
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		"HOST="+l.ports.FunctionsHost,
		"PORT="+strconv.Itoa(l.ports.FunctionsPort),
		"GOOGLE_CLOUD_PROJECT="+l.project,
		"FIRESTORE_EMULATOR_HOST="+l.emu.Host(),
		"FCM_ENDPOINT="+l.FCMEndpoint(),
		"FUNCTION_TARGET=",
	)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("devloop: start functions server %s: %w", bin, err)
	}
	l.serve = cmd
	l.serveDone = make(chan struct{})
	go func() { cmd.Wait(); close(l.serveDone) }()

	addr := net.JoinHostPort(l.ports.FunctionsHost, strconv.Itoa(l.ports.FunctionsPort))
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-l.serveDone:
			return fmt.Errorf("devloop: the functions server exited during start-up (see its output above)")
		case <-ctx.Done():
			return fmt.Errorf("devloop: the functions server does not listen on %s: %w", addr, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Done is closed when the emulator or the functions server exits on its own.
func (l *Loop) Done() <-chan struct{} {
	done := make(chan struct{})
	go func() {
		select {
		case <-l.emu.Done():
		case <-l.serveDone:
		}
		close(done)
	}()
	return done
}

// Stop stops every piece. It is safe to call more than once.
func (l *Loop) Stop() error {
	l.stopOnce.Do(func() {
		var errs []error
		if l.serve != nil && l.serve.Process != nil {
			// The negative PID signals the whole process group.
			_ = syscall.Kill(-l.serve.Process.Pid, syscall.SIGTERM)
			select {
			case <-l.serveDone:
			case <-time.After(5 * time.Second):
				_ = syscall.Kill(-l.serve.Process.Pid, syscall.SIGKILL)
				<-l.serveDone
			}
		}
		if l.emu != nil {
			errs = append(errs, l.emu.Stop())
		}
		if l.bridge != nil {
			errs = append(errs, l.bridge.Close())
		}
		if l.http != nil {
			errs = append(errs, l.http.Close())
		}
		l.stopErr = errors.Join(errs...)
	})
	return l.stopErr
}

// ProjectID is the emulator project.
func (l *Loop) ProjectID() string { return l.project }

// FirestoreHost is the emulator's host:port (FIRESTORE_EMULATOR_HOST).
func (l *Loop) FirestoreHost() string { return l.emu.Host() }

// FunctionsURL is the functions server's base URL; each function is at /<name>.
func (l *Loop) FunctionsURL() string {
	return "http://" + net.JoinHostPort(l.ports.FunctionsHost, strconv.Itoa(l.ports.FunctionsPort))
}

// BridgeAddr is where the emulator delivers events.
func (l *Loop) BridgeAddr() string {
	return net.JoinHostPort(l.ports.BridgeHost, strconv.Itoa(l.ports.BridgePort))
}

// FCMEndpoint is the FCM stand-in's base URL, as FCM_ENDPOINT takes it.
func (l *Loop) FCMEndpoint() string { return "http://" + l.BridgeAddr() + "/v1" }

// Bridge is the event bridge (for its Stats).
func (l *Loop) Bridge() *bridge.Bridge { return l.bridge }

// FCM is the FCM stand-in (for the pushes it received).
func (l *Loop) FCM() *fcmemulator.Server { return l.fcm }

// API is a REST client for the emulator project.
func (l *Loop) API() *emulatorapi.Client { return l.api }
