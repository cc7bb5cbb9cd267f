package functions

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestConfigFromEnv(t *testing.T) {
	file := filepath.Join(t.TempDir(), "firebase.json")
	if err := os.WriteFile(file, []byte(`{"projectId":"from-file"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		env          map[string]string
		wantProject  string
		wantStore    string
		wantDatabase string
		wantErr      error
		wantAnyErr   bool
	}{
		{name: "GOOGLE_CLOUD_PROJECT", env: map[string]string{"GOOGLE_CLOUD_PROJECT": "p1", "GCLOUD_PROJECT": "p2"}, wantProject: "p1", wantStore: "firestore"},
		{name: "GCLOUD_PROJECT", env: map[string]string{"GCLOUD_PROJECT": "p2"}, wantProject: "p2", wantStore: "firestore"},
		{name: "FIREBASE_CONFIG JSON", env: map[string]string{"FIREBASE_CONFIG": `{"projectId":"p3"}`}, wantProject: "p3", wantStore: "firestore"},
		{name: "FIREBASE_CONFIG file", env: map[string]string{"FIREBASE_CONFIG": file}, wantProject: "from-file", wantStore: "firestore"},
		{name: "FIREBASE_CONFIG without projectId", env: map[string]string{"FIREBASE_CONFIG": `{}`}, wantErr: ErrNoProject},
		{name: "FIREBASE_CONFIG missing file", env: map[string]string{"FIREBASE_CONFIG": "/nonexistent/fb.json"}, wantAnyErr: true},
		{name: "nothing", env: map[string]string{}, wantErr: ErrNoProject},
		{name: "named database", env: map[string]string{"GCLOUD_PROJECT": "p", "FIREONCE_DATABASE": "eu-db"}, wantProject: "p", wantStore: "firestore", wantDatabase: "eu-db"},
		{name: "redis store", env: map[string]string{"GCLOUD_PROJECT": "p", "FIREONCE_STORE": "Redis", "REDIS_URL": "redis://127.0.0.1:6379/0"}, wantProject: "p", wantStore: "redis"},
		{name: "redis store without URL", env: map[string]string{"GCLOUD_PROJECT": "p", "FIREONCE_STORE": "redis"}, wantAnyErr: true},
		{name: "unknown store", env: map[string]string{"GCLOUD_PROJECT": "p", "FIREONCE_STORE": "memcached"}, wantAnyErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ConfigFromEnv(func(k string) string { return tt.env[k] })
			switch {
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
			case tt.wantAnyErr:
				if err == nil {
					t.Fatalf("no error, cfg = %+v", cfg)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				wantDB := tt.wantDatabase
				if wantDB == "" {
					wantDB = DefaultDatabase
				}
				if cfg.ProjectID != tt.wantProject || cfg.Store != tt.wantStore || cfg.Database != wantDB {
					t.Fatalf("cfg = %+v, want project %q store %q database %q", cfg, tt.wantProject, tt.wantStore, wantDB)
				}
			}
		})
	}
}
