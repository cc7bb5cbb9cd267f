package firestoreevent_test

import (
	"errors"
	"maps"
	"strings"
	"testing"

	fe "github.com/fireonce/fireonce/shared/firestoreevent"
)

func TestParsePatternInvalid(t *testing.T) {
	tests := []struct {
		pattern, want string
	}{
		{"", "empty"},
		{"/users/{id}", "empty segment 1"},
		{"users/{id}/", "empty segment 3"},
		{"users//{id}", "empty segment 2"},
		{"users", "odd number of segments"},
		{"users/{userID}/posts", "odd number of segments"},
		{"users/{}", `segment "{}": bad parameter name`},
		{"users/{a*b}", `segment "{a*b}": bad parameter name`},
		{"users/{id=?}", `segment "{id=?}": want {name}, {name=*} or {name=**}`},
		{"users/{id", `segment "{id": braces and * are only allowed as a whole segment`},
		{"users/u*", `segment "u*": braces and * are only allowed as a whole segment`},
		{"{rest=**}/posts", `segment "{rest=**}": a ** wildcard must be the last segment`},
		{"**/x", "a ** wildcard must be the last segment"},
		{"users/{id}/posts/{id}", `parameter "id" appears twice`},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			p, err := fe.ParsePattern(tt.pattern)
			if err == nil {
				t.Fatalf("ParsePattern = %v, want an error", p)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), `"`+tt.pattern+`"`) {
				t.Errorf("error %q does not name the pattern and say %q", err, tt.want)
			}
		})
	}
}

func TestPatternMatch(t *testing.T) {
	tests := []struct {
		pattern, path string
		want          map[string]string // nil: no match
		why           string            // for a non-match
	}{
		{"users/{userID}/posts/{postID}", "users/u1/posts/p1", map[string]string{"userID": "u1", "postID": "p1"}, ""},
		{"users/{userID}", "users/ab%20c", map[string]string{"userID": "ab%20c"}, ""},
		{"users/u1", "users/u1", map[string]string{}, ""},
		{"users/*/posts/{postID=*}", "users/u1/posts/p1", map[string]string{"postID": "p1"}, ""},
		{"users/{userID}/{rest=**}", "users/u1/posts/p1", map[string]string{"userID": "u1", "rest": "posts/p1"}, ""},
		{"users/{userID}/{rest=**}", "users/u1/posts/p1/likes/l1", map[string]string{"userID": "u1", "rest": "posts/p1/likes/l1"}, ""},
		{"users/{rest=**}", "users/u1", map[string]string{"rest": "u1"}, ""},
		{"{all=**}", "a/b", map[string]string{"all": "a/b"}, ""},
		{"users/**", "users/u1/posts/p1", map[string]string{}, ""},

		{"users/{userID}/posts/{postID}", "users/u1", nil, "path has 2 segments, the pattern needs at least 3"},
		{"users/{userID}/posts/{postID}", "users/u1/posts/p1/likes/l1", nil, "path has 6 segments, the pattern 4"},
		{"users/{userID}/posts/{postID}", "users/u1/comments/c1", nil, `segment 3 is "comments", want "posts"`},
		{"users/{userID}/posts/{postID}", "groups/g1/posts/p1", nil, `segment 1 is "groups", want "users"`},
		{"users/{userID}/posts/{postID}", "", nil, "segment 1 is empty"},
		{"users/{userID}/posts/{postID}", "users//posts/p1", nil, "segment 2 is empty"},
		{"users/{userID}/{rest=**}", "users/u1", nil, "path has 2 segments, the pattern needs at least 3"},
		{"users/{userID}/{rest=**}", "users/u1/posts/", nil, "segment 4 is empty"},
		{"users/{rest=**}", "groups/g1", nil, `segment 1 is "groups", want "users"`},
	}
	for _, tt := range tests {
		t.Run(tt.pattern+" "+tt.path, func(t *testing.T) {
			p := fe.MustParsePattern(tt.pattern)
			if p.String() != tt.pattern {
				t.Errorf("String() = %q, want %q", p.String(), tt.pattern)
			}
			got, err := p.Match(tt.path)
			if tt.want != nil {
				if err != nil || !maps.Equal(got, tt.want) {
					t.Errorf("Match = %v, %v; want %v", got, err, tt.want)
				}
				return
			}
			if !errors.Is(err, fe.ErrNoMatch) {
				t.Fatalf("Match = %v, %v; want an error wrapping ErrNoMatch", got, err)
			}
			for _, s := range []string{tt.why, `pattern "` + tt.pattern + `"`, `path "` + tt.path + `"`} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
}

func TestNilPattern(t *testing.T) {
	var p *fe.Pattern
	if _, err := p.Match("users/u1"); !errors.Is(err, fe.ErrNoMatch) {
		t.Errorf("nil Pattern's Match error = %v, want ErrNoMatch", err)
	}
	if p.String() != "" {
		t.Errorf("nil Pattern's String() = %q", p.String())
	}
}

func TestMustParsePatternPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Error("MustParsePattern of an invalid pattern did not panic")
		}
	}()
	fe.MustParsePattern("users/{userID}/posts")
}

func TestEventParams(t *testing.T) {
	ev, err := fe.Decode(newEvent(t, typeCreated, "application/protobuf", protoBytes(t, dataFor(typeCreated))))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ev.Params(fe.MustParsePattern("users/{userID}/posts/{postID}"))
	if err != nil || !maps.Equal(got, map[string]string{"userID": "u1", "postID": "p1"}) {
		t.Errorf("Params = %v, %v", got, err)
	}

	// An event for a document outside the function's pattern must not be
	// processed: it is malformed for this function.
	_, err = ev.Params(fe.MustParsePattern("users/{userID}/followers/{followerID}"))
	if !errors.Is(err, fe.ErrNoMatch) || !errors.Is(err, fe.ErrMalformed) {
		t.Errorf("Params error = %v, want one wrapping ErrNoMatch and ErrMalformed", err)
	}
	var nilEvent *fe.Event
	if _, err := nilEvent.Params(fe.MustParsePattern("a/b")); !errors.Is(err, fe.ErrMalformed) {
		t.Errorf("nil Event's Params error = %v, want ErrMalformed", err)
	}
}
