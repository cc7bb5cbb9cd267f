package emulatorapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

// nowFunc is the clock for token issue times; tests may replace it.
var nowFunc = time.Now

// User reads and writes documents as one identity. It is safe for
// concurrent use.
type User struct {
	c    *Client
	uid  string
	auth string // Authorization header value; "" when unauthenticated
}

// As returns a User acting as the Firebase Auth user uid, or as an
// unauthenticated client when uid is "". Requests carry an unsigned JWT,
// which only the emulator accepts.
func (c *Client) As(uid string) *User {
	u := &User{c: c, uid: uid}
	if uid != "" {
		u.auth = "Bearer " + UnsignedIDToken(c.project, uid)
	}
	return u
}

// Admin returns a User that bypasses security rules, as the Admin SDK (and
// so every Cloud Function) does.
func (c *Client) Admin() *User {
	return &User{c: c, auth: "Bearer owner"}
}

// UID returns the user's ID; "" for an unauthenticated user or Admin.
func (u *User) UID() string { return u.uid }

// UnsignedIDToken returns a Firebase ID token for uid in project with the
// "none" algorithm and an empty signature. Rules see request.auth.uid ==
// uid and request.auth.token.firebase.sign_in_provider == "password".
func UnsignedIDToken(project, uid string) string {
	now := nowFunc().Unix()
	enc := func(v any) string {
		b, _ := json.Marshal(v) // maps of strings and ints always marshal
		return base64.RawURLEncoding.EncodeToString(b)
	}
	header := map[string]string{"alg": "none", "typ": "JWT"}
	payload := map[string]any{
		"iss":       "https://securetoken.google.com/" + project,
		"aud":       project,
		"sub":       uid,
		"user_id":   uid,
		"iat":       now,
		"auth_time": now,
		"exp":       now + 3600,
		"firebase":  map[string]any{"sign_in_provider": "password", "identities": map[string]any{}},
	}
	return enc(header) + "." + enc(payload) + "."
}

// Precondition constrains a write on the document's existence. The
// emulator evaluates rules before the precondition and picks the rules
// method from it: exists=false is checked as a "create" and exists=true as
// an "update" whatever the document's state, so a denied write answers 403
// even when the precondition would also fail.
type Precondition int

const (
	// NoPrecondition writes whether or not the document exists.
	NoPrecondition Precondition = iota
	// MustExist fails the write (404 NOT_FOUND) when the document is missing.
	MustExist
	// MustNotExist fails the write (409 ALREADY_EXISTS) when it exists.
	MustNotExist
)

// WriteOptions adjust Set and Patch. A nil *WriteOptions means defaults.
type WriteOptions struct {
	// UpdateMask lists the field paths to write; other fields are kept.
	// A path in the mask that is absent from fields is deleted. Set with no
	// mask replaces the whole document; Patch defaults to the top-level keys
	// of fields (ServerTime fields excluded: transforms apply on their own).
	UpdateMask []string
	// Precondition defaults to NoPrecondition for Set, MustExist for Patch.
	Precondition Precondition
}

// errBadPath is returned for an empty or malformed document path.
var errBadPath = errors.New("emulatorapi: bad path")

// Get reads the document at path ("users/u1/posts/p1").
func (u *User) Get(ctx context.Context, path string) (*Response, error) {
	if err := checkPath(path, true); err != nil {
		return nil, err
	}
	return u.c.do(ctx, http.MethodGet, u.c.docsURL()+"/"+escapePath(path), u.auth, nil)
}

// List reads up to 300 documents of the collection at collectionPath
// ("users/u1/posts"). Rules evaluate it as a "list".
func (u *User) List(ctx context.Context, collectionPath string) (*Response, error) {
	if err := checkPath(collectionPath, false); err != nil {
		return nil, err
	}
	return u.c.do(ctx, http.MethodGet, u.c.docsURL()+"/"+escapePath(collectionPath)+"?pageSize=300", u.auth, nil)
}

// Create writes a new document docID in collectionPath; it fails with 409
// when the document exists. ServerTime values become request-time
// transforms.
func (u *User) Create(ctx context.Context, collectionPath, docID string, fields map[string]any) (*Response, error) {
	if docID == "" || strings.Contains(docID, "/") {
		return nil, fmt.Errorf("%w: document ID %q", errBadPath, docID)
	}
	return u.Set(ctx, collectionPath+"/"+docID, fields, &WriteOptions{Precondition: MustNotExist})
}

// Set writes fields to the document at path, replacing it unless
// opts.UpdateMask is given.
func (u *User) Set(ctx context.Context, path string, fields map[string]any, opts *WriteOptions) (*Response, error) {
	if opts == nil {
		opts = &WriteOptions{}
	}
	return u.write(ctx, path, fields, opts.UpdateMask, opts.UpdateMask != nil, opts.Precondition)
}

// Patch updates fields of the existing document at path, leaving other
// fields as they are (see WriteOptions for the defaults).
func (u *User) Patch(ctx context.Context, path string, fields map[string]any, opts *WriteOptions) (*Response, error) {
	pre, mask := MustExist, []string(nil)
	if opts != nil {
		pre, mask = opts.Precondition, opts.UpdateMask
	}
	if mask == nil {
		for k, v := range fields {
			if _, ok := v.(serverTime); !ok {
				mask = append(mask, quoteFieldPath(k))
			}
		}
		sort.Strings(mask)
		if mask == nil {
			mask = []string{}
		}
	}
	return u.write(ctx, path, fields, mask, true, pre)
}

// Delete deletes the document at path. Deleting a missing document
// succeeds, as in Firestore.
func (u *User) Delete(ctx context.Context, path string) (*Response, error) {
	if err := checkPath(path, true); err != nil {
		return nil, err
	}
	return u.commit(ctx, map[string]any{"delete": u.c.docName(path)})
}

func (u *User) write(ctx context.Context, path string, fields map[string]any, mask []string, useMask bool, pre Precondition) (*Response, error) {
	if err := checkPath(path, true); err != nil {
		return nil, err
	}
	enc, transforms, err := encodeFields(fields)
	if err != nil {
		return nil, err
	}
	w := map[string]any{"update": map[string]any{"name": u.c.docName(path), "fields": enc}}
	if useMask {
		w["updateMask"] = map[string]any{"fieldPaths": mask}
	}
	if len(transforms) > 0 {
		ts := make([]map[string]string, len(transforms))
		for i, p := range transforms {
			ts[i] = map[string]string{"fieldPath": p, "setToServerValue": "REQUEST_TIME"}
		}
		w["updateTransforms"] = ts
	}
	switch pre {
	case MustExist:
		w["currentDocument"] = map[string]bool{"exists": true}
	case MustNotExist:
		w["currentDocument"] = map[string]bool{"exists": false}
	}
	return u.commit(ctx, w)
}

// commit sends one write in an atomic commit: the one REST call that
// carries transforms and preconditions together.
func (u *User) commit(ctx context.Context, write map[string]any) (*Response, error) {
	return u.c.do(ctx, http.MethodPost, u.c.docsURL()+":commit", u.auth,
		map[string]any{"writes": []any{write}})
}

func (c *Client) docsURL() string {
	return c.base() + "/v1/projects/" + url.PathEscape(c.project) + "/databases/" + DefaultDatabase + "/documents"
}

func (c *Client) docName(path string) string {
	return "projects/" + c.project + "/databases/" + DefaultDatabase + "/documents/" + path
}

// checkPath rejects paths that would address something other than a
// document (even segment count) or a collection (odd).
func checkPath(path string, doc bool) error {
	segs := strings.Split(path, "/")
	for _, s := range segs {
		if s == "" {
			return fmt.Errorf("%w: %q has an empty segment", errBadPath, path)
		}
	}
	if (len(segs)%2 == 0) != doc {
		kind := "collection"
		if doc {
			kind = "document"
		}
		return fmt.Errorf("%w: %q is not a %s path", errBadPath, path, kind)
	}
	return nil
}

// escapePath escapes each segment, ':' included, so that a document ID
// such as an FCM token ("abc:APA91…") is not read as a custom method.
func escapePath(path string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		segs[i] = strings.ReplaceAll(url.PathEscape(s), ":", "%3A")
	}
	return strings.Join(segs, "/")
}
