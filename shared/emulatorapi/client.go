// Package emulatorapi is a small client for the Firestore emulator's REST API:
// its admin endpoints (triggers, rules, clearing data) and document reads and
// writes as a chosen identity, so security rules can be exercised the way a
// mobile or web client meets them.
//
// Guarantees:
//   - Every admin call that the emulator answers with a non-2xx status returns
//     an error that carries the emulator's own message (a rules compile error
//     names the line and column).
//   - Document operations return an error only when the request could not be
//     made or answered (transport failures, bad input). A rules denial, a
//     missing document or a failed precondition is a *Response with its
//     status code, never an error, so tests assert on it directly.
//   - RegisterTrigger always sends the database ("(default)" when empty): the
//     emulator answers every later write with 500 when it is missing.
//   - Identities are unsigned JWTs the emulator accepts (and production never
//     would); Admin uses "Bearer owner", which bypasses rules like the Admin SDK.
//
// Only the (default) database is addressed.
package emulatorapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// DefaultDatabase is the database every call addresses.
const DefaultDatabase = "(default)"

// Client talks to one project on one Firestore emulator. It is safe for
// concurrent use.
type Client struct {
	host    string
	project string
	hc      *http.Client
}

// New returns a Client for projectID on the emulator at host ("host:port",
// as in FIRESTORE_EMULATOR_HOST).
func New(host, projectID string) *Client {
	return &Client{host: host, project: projectID, hc: &http.Client{}}
}

// ProjectID returns the project the Client addresses.
func (c *Client) ProjectID() string { return c.project }

// Host returns the emulator's host:port.
func (c *Client) Host() string { return c.host }

// Trigger describes an Eventarc-style Firestore trigger registered with the
// emulator. Deliveries go to the emulator's --functions_emulator address.
type Trigger struct {
	// EventType is e.g. "google.cloud.firestore.document.v1.created".
	EventType string
	// Database defaults to "(default)". It is always sent.
	Database string
	// Namespace defaults to "(default)".
	Namespace string
	// DocumentPattern is a path pattern such as "users/{userID}/posts/{postID}".
	DocumentPattern string
}

// RegisterTrigger registers t under id; registering the same id again
// replaces the earlier trigger.
func (c *Client) RegisterTrigger(ctx context.Context, id string, t Trigger) error {
	if id == "" || t.EventType == "" || t.DocumentPattern == "" {
		return fmt.Errorf("emulatorapi: register trigger %q: id, event type and document pattern are required", id)
	}
	if t.Database == "" {
		t.Database = DefaultDatabase
	}
	if t.Namespace == "" {
		t.Namespace = DefaultDatabase
	}
	body := map[string]any{
		"eventType": t.EventType,
		"database":  t.Database,
		"namespace": t.Namespace,
		"document":  map[string]string{"value": t.DocumentPattern, "matchType": "PATH_PATTERN"},
	}
	u := c.base() + "/emulator/v1/projects/" + url.PathEscape(c.project) +
		"/eventarcTrigger?eventarcTriggerId=" + url.QueryEscape(id)
	return c.admin(ctx, "register trigger "+id, http.MethodPost, u, body)
}

// ClearDocuments deletes every document of the project. The emulator fires
// delete events to registered triggers for them.
func (c *Client) ClearDocuments(ctx context.Context) error {
	return c.admin(ctx, "clear documents", http.MethodDelete, c.emulatorDocsURL(), nil)
}

// Reset clears the data and triggers of EVERY project on the emulator, not
// only this Client's. Never call it on an emulator that other tests share;
// prefer a fresh project ID and ClearDocuments.
func (c *Client) Reset(ctx context.Context) error {
	return c.admin(ctx, "reset", http.MethodPost, c.base()+"/reset", nil)
}

// LoadRules replaces the project's security rules with source. A source that
// does not compile is rejected with the emulator's message.
func (c *Client) LoadRules(ctx context.Context, source string) error {
	body := map[string]any{"rules": map[string]any{
		"files": []map[string]string{{"name": "firestore.rules", "content": source}},
	}}
	u := c.base() + "/emulator/v1/projects/" + url.PathEscape(c.project) + ":securityRules"
	return c.admin(ctx, "load rules", http.MethodPut, u, body)
}

func (c *Client) base() string { return "http://" + c.host }

func (c *Client) emulatorDocsURL() string {
	return c.base() + "/emulator/v1/projects/" + url.PathEscape(c.project) + "/databases/" + DefaultDatabase + "/documents"
}

// admin sends an emulator admin request and turns a non-2xx answer into an
// error carrying the emulator's message.
func (c *Client) admin(ctx context.Context, op, method, u string, body any) error {
	resp, err := c.do(ctx, method, u, "", body)
	if err != nil {
		return fmt.Errorf("emulatorapi: %s: %w", op, err)
	}
	if err := resp.Err(); err != nil {
		return fmt.Errorf("emulatorapi: %s: %w", op, err)
	}
	return nil
}

// do sends one request. auth is the Authorization header value ("" for none).
// Every request has a JSON content type: the emulator answers
// PUT :securityRules without one with 404.
func (c *Client) do(ctx context.Context, method, u, auth string, body any) (*Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	hr, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer hr.Body.Close()
	b, err := io.ReadAll(hr.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: read body: %w", method, u, err)
	}
	return newResponse(hr.StatusCode, b), nil
}
