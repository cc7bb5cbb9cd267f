package bridge_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/fireonce/fireonce/shared/bridge"
	"github.com/fireonce/fireonce/shared/emulatorapi"
	"github.com/fireonce/fireonce/shared/firestoreemulator"
	"github.com/fireonce/fireonce/shared/logtest"
)

// The real emulator, started with --functions_emulator pointing at the
// bridge, fires the table's triggers; every function gets each of its events
// twice (the default duplicates) with one ce-id, decoded by sdk-go.
func TestEndToEndWithEmulator(t *testing.T) {
	const project = "demo-bridge-e2e"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	fn := newFunctions(t, "sendPostNotification", "incrementPostCount", "decrementPostCount")
	b, err := bridge.New(project, fn.serve(), table, &bridge.Options{
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })

	emuLog := &logtest.Buffer{}
	emu, err := firestoreemulator.Start(ctx, &firestoreemulator.Options{
		ProjectID: project, FunctionsEmulator: b.Addr(), Log: emuLog,
	})
	if err != nil {
		t.Fatalf("start the Firestore emulator: %v", err)
	}
	t.Cleanup(func() {
		if err := emu.Stop(); err != nil {
			t.Errorf("stop the emulator: %v", err)
		}
		if t.Failed() {
			t.Logf("emulator output:\n%s", emuLog.String())
		}
	})
	if err := b.Register(ctx, emu.Host()); err != nil {
		t.Fatal(err)
	}

	admin := emulatorapi.New(emu.Host(), project).Admin()
	if r, err := admin.Create(ctx, "users/u1/posts", "p1", map[string]any{"title": "Hello"}); err != nil || !r.OK() {
		t.Fatalf("create: %v %v", err, r)
	}
	if r, err := admin.Delete(ctx, "users/u1/posts/p1"); err != nil || !r.OK() {
		t.Fatalf("delete: %v %v", err, r)
	}

	// Two created triggers and one deleted trigger: three events.
	waitFor(t, "three events from the emulator", time.Minute, func() bool { return b.Stats().Events >= 3 })
	idle(t, b)

	byFunction := map[string][]received{}
	for _, r := range fn.received() {
		byFunction[r.Function] = append(byFunction[r.Function], r)
	}
	ids := map[string]string{}
	for _, tr := range table {
		got := byFunction[tr.Name]
		if len(got) != bridge.DefaultDuplicates {
			t.Errorf("%s received %d deliveries, want %d", tr.Name, len(got), bridge.DefaultDuplicates)
			continue
		}
		for _, r := range got {
			e := r.Event
			if e.ID() != got[0].Event.ID() {
				t.Errorf("%s: duplicates carry different ce-ids %q and %q", tr.Name, e.ID(), got[0].Event.ID())
			}
			if e.Type() != tr.EventType || e.Subject() != "documents/users/u1/posts/p1" ||
				e.Source() != "//firestore.googleapis.com/projects/"+project+"/databases/(default)" {
				t.Errorf("%s: type %q subject %q source %q", tr.Name, e.Type(), e.Subject(), e.Source())
			}
			doc := r.Data.GetValue()
			if tr.EventType == deleted {
				doc = r.Data.GetOldValue()
			}
			if doc.GetFields()["title"].GetStringValue() != "Hello" {
				t.Errorf("%s: document %v", tr.Name, doc)
			}
		}
		ids[tr.Name] = got[0].Event.ID()
	}
	// The emulator gives each trigger its own event ID for the same change.
	if ids["sendPostNotification"] == ids["incrementPostCount"] {
		t.Logf("note: both created triggers got the same ce-id %q", ids["sendPostNotification"])
	}
	s := b.Stats()
	if s.Events != 3 || s.Deliveries != 6 || s.Delivered != 6 || s.Rejected != 0 {
		t.Errorf("stats %+v", s)
	}
}
