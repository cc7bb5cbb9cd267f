package functions_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/fireonce/fireonce/functions"
)

// repoRoot is the module root, two levels above this file.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("runtime.Caller failed")
	}
	return filepath.Dir(filepath.Dir(file))
}

func deployDryRun(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{"scripts/deploy.sh", "--dry-run"}, args...)...)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(cmd.Environ(), "GOOGLE_CLOUD_PROJECT=", "CLOUDSDK_CORE_PROJECT=", "FIREONCE_REGION=", "FIREONCE_TRIGGER_LOCATION=", "FIREONCE_DATABASE=")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestDeployDryRunMatchesTable checks that deploy.sh deploys every function
// of the table exactly once, as the table says, with --retry.
func TestDeployDryRunMatchesTable(t *testing.T) {
	out, err := deployDryRun(t, "--project", "demo-p", "--region", "europe-west1", "--trigger-location", "eur3",
		"--service-account", "fn@demo-p.iam.gserviceaccount.com", "--memory", "256Mi", "--timeout", "540s",
		"--set-env-vars", "FIREONCE_STORE=firestore")
	if err != nil {
		t.Fatalf("deploy.sh --dry-run: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	deploys := map[string][]string{}
	for _, l := range lines {
		fields := strings.Fields(l)
		if len(fields) > 3 && fields[0] == "gcloud" && fields[1] == "functions" && fields[2] == "deploy" {
			if _, dup := deploys[fields[3]]; dup {
				t.Errorf("%s deployed twice", fields[3])
			}
			deploys[fields[3]] = fields[4:]
		}
	}
	table := functions.Table()
	if len(deploys) != len(table) {
		t.Errorf("%d gcloud deploys, table has %d functions:\n%s", len(deploys), len(table), out)
	}
	for _, f := range table {
		flags, ok := deploys[f.Name]
		if !ok {
			t.Errorf("%s is not deployed", f.Name)
			continue
		}
		// printf %q escapes ( ) { } ,; the shell would remove the backslashes.
		got := map[string]bool{}
		for _, fl := range flags {
			got[strings.ReplaceAll(fl, `\`, "")] = true
		}
		for _, want := range []string{
			"--gen2", "--runtime=go126", "--source=.", "--retry",
			"--entry-point=" + f.Name,
			"--project=demo-p", "--region=europe-west1", "--trigger-location=eur3",
			"--trigger-event-filters=type=" + f.EventType,
			"--trigger-event-filters=database=(default)",
			"--trigger-event-filters-path-pattern=document=" + f.Document,
			"--service-account=fn@demo-p.iam.gserviceaccount.com", "--memory=256Mi", "--timeout=540s",
			"--set-env-vars=FIREONCE_STORE=firestore",
		} {
			if !got[want] {
				t.Errorf("%s: missing %s in %v", f.Name, want, flags)
			}
		}
	}
	if !strings.Contains(out, "firebase deploy --only firestore --project=demo-p") {
		t.Errorf("rules and indexes are not deployed:\n%s", out)
	}
}

// TestDeployNamedDatabase: triggers on a named database, and the functions
// told to write to it.
func TestDeployNamedDatabase(t *testing.T) {
	out, err := deployDryRun(t, "--project", "p", "--region", "r", "--trigger-location", "l", "--database", "eu-db",
		"--set-env-vars", "A=1")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, f := range functions.Table() {
		line := ""
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "deploy "+f.Name+" ") {
				line = strings.ReplaceAll(l, `\`, "")
			}
		}
		if !strings.Contains(line, "--trigger-event-filters=database=eu-db") || !strings.Contains(line, "--set-env-vars=A=1,FIREONCE_DATABASE=eu-db") {
			t.Errorf("%s: want the eu-db trigger filter and FIREONCE_DATABASE=eu-db: %s", f.Name, line)
		}
	}
}

func TestDeployOnly(t *testing.T) {
	out, err := deployDryRun(t, "--project", "p", "--region", "r", "--trigger-location", "l", "--only", "incrementPostCount")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if n := strings.Count(out, "gcloud functions deploy"); n != 1 || !strings.Contains(out, "deploy incrementPostCount ") {
		t.Fatalf("--only incrementPostCount printed %d deploys:\n%s", n, out)
	}
}

func TestDeployErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no project", []string{"--region", "r", "--trigger-location", "l"}, "no project"},
		{"no region", []string{"--project", "p", "--trigger-location", "l"}, "no region"},
		{"no trigger location", []string{"--project", "p", "--region", "r"}, "no trigger location"},
		{"unknown function", []string{"--project", "p", "--region", "r", "--trigger-location", "l", "--only", "nope"}, "no function named 'nope'"},
		{"unknown flag", []string{"--frobnicate"}, "unknown argument"},
		{"flag without value", []string{"--project"}, "--project needs a value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := deployDryRun(t, tt.args...)
			if err == nil || !strings.Contains(out, tt.want) {
				t.Fatalf("err = %v, output %q, want failure mentioning %q", err, out, tt.want)
			}
			if strings.Contains(out, "gcloud functions deploy") {
				t.Fatalf("printed deploy commands despite the error:\n%s", out)
			}
		})
	}
}
