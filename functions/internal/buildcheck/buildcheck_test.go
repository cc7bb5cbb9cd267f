package buildcheck

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const goodMod = "module example.com/fn\n\ngo 1.26.0\n"

const goodRoot = `// Package fn is the root package.
package fn

import (
	_ "example.com/fn/functions"
	_ "github.com/GoogleCloudPlatform/functions-framework-go/functions"
)
`

func TestCheckRoot(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		wantErr string // substring of the reason; "" means deployable
	}{
		{name: "deployable", files: map[string]string{"go.mod": goodMod, "deploy.go": goodRoot}},
		{name: "no go.mod", files: map[string]string{"deploy.go": goodRoot}, wantErr: "no go.mod"},
		{name: "module path without a dot", files: map[string]string{"go.mod": "module fn\n", "deploy.go": goodRoot}, wantErr: "needs a dot"},
		{name: "no package", files: map[string]string{"go.mod": goodMod}, wantErr: "no Go package at the root"},
		{name: "two packages", files: map[string]string{"go.mod": goodMod, "deploy.go": goodRoot, "other.go": "package other\n"}, wantErr: "2 packages at the root (fn, other)"},
		{name: "external test package", files: map[string]string{"go.mod": goodMod, "deploy.go": goodRoot, "deploy_test.go": "package fn_test\n"}, wantErr: "2 packages at the root"},
		{name: "no framework import", files: map[string]string{"go.mod": goodMod, "deploy.go": "package fn\n\nimport _ \"example.com/fn/functions\"\n"}, wantErr: "does not import " + FrameworkImport},
		{name: "framework imported only by a test", files: map[string]string{"go.mod": goodMod, "deploy.go": "package fn\n", "deploy_test.go": "package fn\n\nimport _ \"" + FrameworkImport + "\"\n"}, wantErr: "does not import"},
		{name: "syntax error", files: map[string]string{"go.mod": goodMod, "deploy.go": "package fn\nimport (\n"}, wantErr: "deploy.go"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			err := CheckRoot(dir)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckRoot = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("CheckRoot = nil, want an error containing %q", tt.wantErr)
			}
			if !errors.Is(err, ErrRoot) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("CheckRoot = %v, want ErrRoot containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestModulePath(t *testing.T) {
	for in, want := range map[string]string{
		"module example.com/a\n":              "example.com/a",
		"// c\nmodule \"example.com/b\" // x": "example.com/b",
		"modules x\n":                         "",
		"go 1.26\n":                           "",
	} {
		if got := modulePath([]byte(in)); got != want {
			t.Errorf("modulePath(%q) = %q, want %q", in, got, want)
		}
	}
}
