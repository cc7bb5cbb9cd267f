// Package buildcheck checks a source tree the way Google's Go buildpack reads
// it before it builds a function: the buildpack compiles only the package at
// the root of --source, which must be the one package there (test files
// included: not even a package x_test), must import functions-framework-go's
// functions package (a blank import counts) so the framework is linked in,
// and must sit in a module whose path has a dot in its first element.
package buildcheck

import (
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// FrameworkImport is the package the root package must import.
const FrameworkImport = "github.com/GoogleCloudPlatform/functions-framework-go/functions"

// ErrRoot wraps every reason a root would not build as a function.
var ErrRoot = errors.New("buildcheck: the source root is not deployable")

// CheckRoot reports why dir would not deploy, or nil when it would.
func CheckRoot(dir string) error {
	modBytes, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return fmt.Errorf("%w: no go.mod at the root (%v)", ErrRoot, err)
	}
	modPath := modulePath(modBytes)
	first, _, _ := strings.Cut(modPath, "/")
	if !strings.Contains(first, ".") {
		return fmt.Errorf("%w: module path %q needs a dot in its first element (e.g. example.com/...)", ErrRoot, modPath)
	}

	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("%w: no Go package at the root; the buildpack builds only the root package, so it must import the functions", ErrRoot)
	}
	pkgs := map[string]bool{}
	importsFramework := false
	fset := token.NewFileSet()
	for _, f := range files {
		parsed, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrRoot, err)
		}
		pkgs[parsed.Name.Name] = true
		for _, imp := range parsed.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == FrameworkImport && !strings.HasSuffix(f, "_test.go") {
				importsFramework = true
			}
		}
	}
	if len(pkgs) > 1 {
		names := make([]string, 0, len(pkgs))
		for n := range pkgs {
			names = append(names, n)
		}
		sort.Strings(names)
		return fmt.Errorf("%w: %d packages at the root (%s); the buildpack needs exactly one, test packages included",
			ErrRoot, len(pkgs), strings.Join(names, ", "))
	}
	if !importsFramework {
		return fmt.Errorf("%w: the root package does not import %s (a blank import is enough); without it the buildpack cannot start the framework",
			ErrRoot, FrameworkImport)
	}
	return nil
}

// modulePath returns the path on go.mod's module line ("" when absent).
func modulePath(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module")
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
			continue
		}
		rest, _, _ = strings.Cut(rest, "//")
		rest = strings.TrimSpace(rest)
		if p, err := strconv.Unquote(rest); err == nil {
			return p
		}
		return rest
	}
	return ""
}
