// Package rulestest gives tests an emulator project that enforces this
// repository's firestore.rules, so a test sees exactly what a mobile or web
// client would see in production.
//
// The rules file is found from this package's source location (walking up
// to go.mod), so it works from any test's working directory inside this
// module. Like firestoretest, New fails the test, never skips it, when the
// emulator is not reachable or the rules do not compile.
package rulestest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/fireonce/fireonce/shared/emulatorapi"
	"github.com/fireonce/fireonce/shared/firestoretest"
)

// RulesFileName is the rules file at the module root, as firebase.json names it.
const RulesFileName = "firestore.rules"

// errNoModuleRoot is returned when no go.mod is found above this package.
var errNoModuleRoot = errors.New("rulestest: no go.mod above the package source")

// RulesPath returns the absolute path of the module's firestore.rules.
func RulesPath() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errNoModuleRoot
	}
	for dir := filepath.Dir(file); ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, RulesFileName), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%w: %s", errNoModuleRoot, file)
		}
		dir = parent
	}
}

// New returns a client for a fresh emulator project with the repository's
// rules loaded. Its documents are deleted when the test ends.
func New(t testing.TB) *emulatorapi.Client {
	t.Helper()
	path, err := RulesPath()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("rulestest: %v", err)
	}
	c := emulatorapi.New(firestoretest.Host(t), firestoretest.NewProjectID(t))
	if err := c.LoadRules(context.Background(), string(src)); err != nil {
		t.Fatalf("rulestest: %s: %v", path, err)
	}
	t.Cleanup(func() { _ = c.ClearDocuments(context.Background()) })
	return c
}
