package rulestest_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fireonce/fireonce/shared/emulatorapi"
	"github.com/fireonce/fireonce/shared/rulestest"
)

// Identities: alice owns the seeded profile, post and device token; bob
// follows alice; carol is any other signed-in user (with no profile); dave
// has a profile the functions created (postCount only); "" is signed out.
const (
	alice = "alice"
	bob   = "bob"
	carol = "carol"
	anon  = ""
)

const (
	allowed = http.StatusOK
	denied  = http.StatusForbidden
)

const (
	aliceProfile  = "users/alice"
	alicePost     = "users/alice/posts/p1"
	alicePosts    = "users/alice/posts"
	bobFollows    = "users/alice/followers/bob"
	aliceFollower = "users/alice/followers"
	aliceToken    = "users/alice/fcmTokens/dev1:APA91b-token"
	aliceTokens   = "users/alice/fcmTokens"
	marker        = "triggerEvents/e1-incrementPostCount"
)

// seed writes the fixture with admin rights (as the functions would).
func seed(t *testing.T, admin *emulatorapi.User) {
	t.Helper()
	ctx := context.Background()
	docs := []struct {
		path   string
		fields map[string]any
	}{
		{aliceProfile, map[string]any{"displayName": "Alice", "postCount": 1}},
		{"users/bob", map[string]any{"displayName": "Bob", "postCount": 0}},
		// A profile that incrementPostCount created before its owner wrote one.
		{"users/dave", map[string]any{"postCount": 2}},
		{alicePost, map[string]any{"title": "Hello", "body": "First", "createdAt": emulatorapi.ServerTime}},
		{bobFollows, map[string]any{"createdAt": emulatorapi.ServerTime}},
		{aliceToken, map[string]any{"createdAt": emulatorapi.ServerTime}},
		{marker, map[string]any{"state": "done"}},
		{"other/x", map[string]any{"a": 1}},
	}
	for _, d := range docs {
		if r, err := admin.Set(ctx, d.path, d.fields, nil); err != nil || !r.OK() {
			t.Fatalf("seed %s: %v %v", d.path, r, err)
		}
	}
}

type op func(ctx context.Context, u *emulatorapi.User) (*emulatorapi.Response, error)

func get(path string) op {
	return func(ctx context.Context, u *emulatorapi.User) (*emulatorapi.Response, error) { return u.Get(ctx, path) }
}

func list(path string) op {
	return func(ctx context.Context, u *emulatorapi.User) (*emulatorapi.Response, error) {
		return u.List(ctx, path)
	}
}

func create(path string, fields map[string]any) op {
	return func(ctx context.Context, u *emulatorapi.User) (*emulatorapi.Response, error) {
		i := strings.LastIndex(path, "/")
		return u.Create(ctx, path[:i], path[i+1:], fields)
	}
}

// set replaces the whole document, creating it if needed.
func set(path string, fields map[string]any) op {
	return func(ctx context.Context, u *emulatorapi.User) (*emulatorapi.Response, error) {
		return u.Set(ctx, path, fields, nil)
	}
}

// patch updates only the given fields of an existing document.
func patch(path string, fields map[string]any) op {
	return func(ctx context.Context, u *emulatorapi.User) (*emulatorapi.Response, error) {
		return u.Patch(ctx, path, fields, nil)
	}
}

func del(path string) op {
	return func(ctx context.Context, u *emulatorapi.User) (*emulatorapi.Response, error) {
		return u.Delete(ctx, path)
	}
}

func post(title, body string) map[string]any {
	return map[string]any{"title": title, "body": body, "createdAt": emulatorapi.ServerTime}
}

func with(m map[string]any, k string, v any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for mk, mv := range m {
		out[mk] = mv
	}
	out[k] = v
	return out
}

func without(m map[string]any, k string) map[string]any {
	out := with(m, k, nil)
	delete(out, k)
	return out
}

var (
	newPost   = post("Title", "Body")
	now       = map[string]any{"createdAt": emulatorapi.ServerTime}
	longTitle = strings.Repeat("t", 201)
	longBody  = strings.Repeat("b", 10001)
)

func TestRules(t *testing.T) {
	tests := []struct {
		name string
		as   string
		do   op
		want int
	}{
		// Profiles: users/{userID}.
		{"profile: signed-in user reads another's profile", carol, get(aliceProfile), allowed},
		{"profile: signed-out read denied", anon, get(aliceProfile), denied},
		{"profile: owner creates own profile", carol, create("users/carol", map[string]any{"displayName": "Carol"}), allowed},
		{"profile: create for another user denied", carol, create("users/erin", map[string]any{"displayName": "Erin"}), denied},
		{"profile: signed-out create denied", anon, create("users/carol", map[string]any{"displayName": "Carol"}), denied},
		{"profile: create with postCount denied", carol, create("users/carol", map[string]any{"displayName": "Carol", "postCount": 0}), denied},
		{"profile: create with extra field denied", carol, create("users/carol", map[string]any{"displayName": "Carol", "admin": true}), denied},
		{"profile: create with non-string displayName denied", carol, create("users/carol", map[string]any{"displayName": 7}), denied},
		{"profile: create with empty displayName denied", carol, create("users/carol", map[string]any{"displayName": ""}), denied},
		{"profile: create with 101-char displayName denied", carol, create("users/carol", map[string]any{"displayName": strings.Repeat("d", 101)}), denied},
		{"profile: owner updates displayName", alice, patch(aliceProfile, map[string]any{"displayName": "Alice B."}), allowed},
		{"profile: owner names a profile the functions created", "dave", patch("users/dave", map[string]any{"displayName": "Dave"}), allowed},
		{"profile: owner changes postCount denied", alice, patch(aliceProfile, map[string]any{"postCount": 99}), denied},
		{"profile: owner replacing profile drops postCount, denied", alice, set(aliceProfile, map[string]any{"displayName": "Alice"}), denied},
		{"profile: other user updates profile denied", carol, patch(aliceProfile, map[string]any{"displayName": "pwned"}), denied},
		{"profile: owner deletes profile denied", alice, del(aliceProfile), denied},

		// Posts: users/{userID}/posts/{postID}.
		{"post: signed-in user reads another's post", carol, get(alicePost), allowed},
		{"post: signed-in user lists another's posts", carol, list(alicePosts), allowed},
		{"post: signed-out read denied", anon, get(alicePost), denied},
		{"post: signed-out list denied", anon, list(alicePosts), denied},
		{"post: owner creates post", alice, create("users/alice/posts/p2", newPost), allowed},
		{"post: 200-char title and 10,000-char body allowed", alice, create("users/alice/posts/p2", post(longTitle[:200], longBody[:10000])), allowed},
		{"post: empty body allowed", alice, create("users/alice/posts/p2", post("Title", "")), allowed},
		{"post: other user creates under owner denied", carol, create("users/alice/posts/p2", newPost), denied},
		{"post: signed-out create denied", anon, create("users/alice/posts/p2", newPost), denied},
		{"post: extra field denied", alice, create("users/alice/posts/p2", with(newPost, "likes", 0)), denied},
		{"post: missing body denied", alice, create("users/alice/posts/p2", without(newPost, "body")), denied},
		{"post: empty title denied", alice, create("users/alice/posts/p2", post("", "Body")), denied},
		{"post: 201-char title denied", alice, create("users/alice/posts/p2", post(longTitle, "Body")), denied},
		{"post: non-string title denied", alice, create("users/alice/posts/p2", with(newPost, "title", 42)), denied},
		{"post: 10,001-char body denied", alice, create("users/alice/posts/p2", post("Title", longBody)), denied},
		{"post: createdAt not request.time denied", alice, create("users/alice/posts/p2", with(newPost, "createdAt", time.Now().Add(-time.Hour))), denied},
		{"post: missing createdAt denied", alice, create("users/alice/posts/p2", without(newPost, "createdAt")), denied},
		{"post: owner edits title and body", alice, patch(alicePost, map[string]any{"title": "Edited", "body": "New"}), allowed},
		{"post: owner changes createdAt denied", alice, patch(alicePost, map[string]any{"createdAt": emulatorapi.ServerTime}), denied},
		{"post: owner adds a field on update denied", alice, patch(alicePost, map[string]any{"likes": 1}), denied},
		{"post: owner empties title on update denied", alice, patch(alicePost, map[string]any{"title": ""}), denied},
		{"post: other user updates denied", carol, patch(alicePost, map[string]any{"title": "pwned"}), denied},
		{"post: owner deletes post", alice, del(alicePost), allowed},
		{"post: other user deletes denied", carol, del(alicePost), denied},
		{"post: signed-out delete denied", anon, del(alicePost), denied},

		// Followers: users/{userID}/followers/{followerID}.
		{"follower: signed-in user lists followers", carol, list(aliceFollower), allowed},
		{"follower: signed-out read denied", anon, get(bobFollows), denied},
		{"follower: user follows another", carol, create("users/alice/followers/carol", now), allowed},
		{"follower: follow on someone else's behalf denied", carol, create("users/alice/followers/dave", now), denied},
		{"follower: self-follow denied", alice, create("users/alice/followers/alice", now), denied},
		{"follower: client-chosen createdAt denied", carol, create("users/alice/followers/carol", map[string]any{"createdAt": time.Now()}), denied},
		{"follower: extra field denied", carol, create("users/alice/followers/carol", with(now, "note", "hi")), denied},
		{"follower: update denied", bob, patch(bobFollows, now), denied},
		{"follower: follower unfollows", bob, del(bobFollows), allowed},
		{"follower: followed user removes follower", alice, del(bobFollows), allowed},
		{"follower: other user deletes follower denied", carol, del(bobFollows), denied},

		// Device tokens: users/{userID}/fcmTokens/{token}.
		{"fcmToken: owner reads token", alice, get(aliceToken), allowed},
		{"fcmToken: owner lists tokens", alice, list(aliceTokens), allowed},
		{"fcmToken: other user reads token denied", carol, get(aliceToken), denied},
		{"fcmToken: other user lists tokens denied", carol, list(aliceTokens), denied},
		{"fcmToken: owner registers token", alice, create("users/alice/fcmTokens/dev2:APA91b-new", now), allowed},
		{"fcmToken: owner re-registers token", alice, set(aliceToken, now), allowed},
		{"fcmToken: other user registers token for owner denied", carol, create("users/alice/fcmTokens/dev2:APA91b-new", now), denied},
		{"fcmToken: extra field denied", alice, create("users/alice/fcmTokens/dev2:APA91b-new", with(now, "platform", "ios")), denied},
		{"fcmToken: non-timestamp createdAt denied", alice, create("users/alice/fcmTokens/dev2:APA91b-new", map[string]any{"createdAt": "today"}), denied},
		{"fcmToken: owner deletes token", alice, del(aliceToken), allowed},
		{"fcmToken: other user deletes token denied", carol, del(aliceToken), denied},

		// Guard markers and everything else.
		{"triggerEvents: read by a signed-in user denied", alice, get(marker), denied},
		{"triggerEvents: list by a signed-in user denied", alice, list("triggerEvents"), denied},
		{"triggerEvents: create by a signed-in user denied", alice, create("triggerEvents/e2-incrementPostCount", map[string]any{"state": "done"}), denied},
		{"triggerEvents: delete by a signed-in user denied", alice, del(marker), denied},
		{"triggerEvents: signed-out read denied", anon, get(marker), denied},
		{"postLedger: the author reads her own denied", alice, get("users/alice/postLedger/p1"), denied},
		{"postLedger: the author writes her own denied", alice, set("users/alice/postLedger/p1", map[string]any{"creates": 0, "debt": 5}), denied},
		{"unknown collection: read denied", alice, get("other/x"), denied},
		{"unknown collection: write denied", alice, set("other/y", map[string]any{"a": 1}), denied},
		{"unknown subcollection of a profile: write denied", alice, set("users/alice/private/x", map[string]any{"a": 1}), denied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := rulestest.New(t)
			seed(t, c.Admin())
			r, err := tt.do(context.Background(), c.As(tt.as))
			if err != nil {
				t.Fatal(err)
			}
			if r.StatusCode != tt.want {
				t.Fatalf("as %q: got %v, want %d", tt.as, r, tt.want)
			}
			if tt.want == denied && r.Status != "PERMISSION_DENIED" {
				t.Fatalf("as %q: denial status %q, want PERMISSION_DENIED", tt.as, r.Status)
			}
		})
	}
}

// TestAdminBypassesRules shows the functions' view: the Admin identity
// reads and writes what every client is denied.
func TestAdminBypassesRules(t *testing.T) {
	ctx := context.Background()
	c := rulestest.New(t)
	admin := c.Admin()
	seed(t, admin)
	for _, o := range []op{get(marker), patch(aliceProfile, map[string]any{"postCount": 2}), del(marker)} {
		if r, err := o(ctx, admin); err != nil || r.StatusCode != allowed {
			t.Fatalf("admin: %v %v, want 200", r, err)
		}
	}
}

func TestRulesPath(t *testing.T) {
	p, err := rulestest.RulesPath()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(p, "/firestore.rules") {
		t.Fatalf("RulesPath() = %q", p)
	}
}
