package functions

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
)

// ErrNoProject is returned when no project ID can be found in the
// environment. It surfaces on the first invocation, not at start-up, so a
// misconfigured deployment logs a clear error instead of crashing in init.
var ErrNoProject = errors.New("functions: no project ID: set GOOGLE_CLOUD_PROJECT (or GCLOUD_PROJECT, or FIREBASE_CONFIG with projectId)")

// DefaultDatabase is the ID of a project's default Firestore database.
const DefaultDatabase = "(default)"

// Config is what the functions read from the environment.
type Config struct {
	// ProjectID is the Google Cloud project that holds Firestore.
	ProjectID string
	// Database is the Firestore database the functions' triggers listen on
	// and their effects write to: FIREONCE_DATABASE, default "(default)".
	// Events from any other database are rejected.
	Database string
	// FCMEndpoint, when set, is the base URL of the FCM API (for example
	// http://127.0.0.1:9099/v1), for the local dev loop and tests.
	FCMEndpoint string
	// Store selects the guard's store for sendPostNotification: "firestore"
	// (default) or "redis".
	Store string
	// RedisURL is the Redis URL when Store is "redis" (redis://host:port/0).
	RedisURL string
}

// ConfigFromEnv reads the Config with getenv (os.Getenv when nil).
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	project, err := projectID(getenv)
	if err != nil {
		return Config{}, err
	}
	cfg := Config{
		ProjectID:   project,
		Database:    strings.TrimSpace(getenv("FIREONCE_DATABASE")),
		FCMEndpoint: strings.TrimRight(getenv("FCM_ENDPOINT"), "/"),
		Store:       strings.ToLower(strings.TrimSpace(getenv("FIREONCE_STORE"))),
		RedisURL:    getenv("REDIS_URL"),
	}
	if cfg.Database == "" {
		cfg.Database = DefaultDatabase
	}
	switch cfg.Store {
	case "", "firestore":
		cfg.Store = "firestore"
	case "redis":
		if cfg.RedisURL == "" {
			return Config{}, errors.New("functions: FIREONCE_STORE=redis needs REDIS_URL (redis://host:port/0)")
		}
	default:
		return Config{}, fmt.Errorf("functions: FIREONCE_STORE=%q: want firestore or redis", cfg.Store)
	}
	return cfg, nil
}

func projectID(getenv func(string) string) (string, error) {
	for _, name := range []string{"GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT"} {
		if p := strings.TrimSpace(getenv(name)); p != "" {
			return p, nil
		}
	}
	raw := strings.TrimSpace(getenv("FIREBASE_CONFIG"))
	if raw == "" {
		return "", ErrNoProject
	}
	// As in the Admin SDKs: JSON when it starts with '{', else a file path.
	if !strings.HasPrefix(raw, "{") {
		b, err := os.ReadFile(raw)
		if err != nil {
			return "", fmt.Errorf("functions: read FIREBASE_CONFIG file: %w", err)
		}
		raw = string(b)
	}
	var fc struct {
		ProjectID string `json:"projectId"`
	}
	if err := json.Unmarshal([]byte(raw), &fc); err != nil {
		return "", fmt.Errorf("functions: parse FIREBASE_CONFIG: %w", err)
	}
	if fc.ProjectID == "" {
		return "", fmt.Errorf("functions: FIREBASE_CONFIG has no projectId: %w", ErrNoProject)
	}
	return fc.ProjectID, nil
}
