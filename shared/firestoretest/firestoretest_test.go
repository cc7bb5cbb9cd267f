package firestoretest_test

import (
	"context"
	"testing"

	"github.com/fireonce/fireonce/shared/firestoretest"
)

func TestEnvsAreIsolated(t *testing.T) {
	ctx := context.Background()
	a, b := firestoretest.New(t), firestoretest.New(t)
	if a.ProjectID == b.ProjectID {
		t.Fatalf("two Envs share project ID %q", a.ProjectID)
	}
	if _, err := a.Client.Doc("c/d").Set(ctx, map[string]any{"x": 1}); err != nil {
		t.Fatalf("write to a: %v", err)
	}
	if _, err := a.Client.Doc("c/d").Get(ctx); err != nil {
		t.Fatalf("read back from a: %v", err)
	}
	snap, err := b.Client.Doc("c/d").Get(ctx)
	if err == nil || snap.Exists() {
		t.Fatalf("document written to project a is visible in project b")
	}
}

func TestClearProject(t *testing.T) {
	ctx := context.Background()
	env := firestoretest.New(t)
	if _, err := env.Client.Doc("c/d").Set(ctx, map[string]any{"x": 1}); err != nil {
		t.Fatal(err)
	}
	if err := firestoretest.ClearProject(ctx, env.Host, env.ProjectID); err != nil {
		t.Fatal(err)
	}
	if snap, err := env.Client.Doc("c/d").Get(ctx); err == nil && snap.Exists() {
		t.Fatal("document survived ClearProject")
	}
}
