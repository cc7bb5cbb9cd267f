package firestoreevent

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrNoMatch is wrapped by the error Pattern.Match returns when the
// document path does not match the pattern.
var ErrNoMatch = errors.New("firestoreevent: document does not match pattern")

// A Pattern is a document path pattern as Eventarc's path-pattern filter
// takes it: segments separated by "/", each a literal ID, a parameter
// "{name}" (one segment), "*" (one unnamed segment), or, as the last
// segment only, "{name=**}" or "**" (one or more segments). A Pattern is
// immutable and safe for concurrent use.
type Pattern struct {
	raw  string
	segs []patternSeg
}

type patternSeg struct {
	literal string // when neither wildcard
	param   string // the parameter name, "" for an unnamed wildcard
	one     bool   // matches one segment
	rest    bool   // matches one or more segments
}

// ParsePattern parses a document path pattern such as
// "users/{userID}/posts/{postID}" or "users/{userID}/{rest=**}".
func ParsePattern(s string) (*Pattern, error) {
	bad := func(format string, args ...any) (*Pattern, error) {
		return nil, fmt.Errorf("firestoreevent: invalid pattern %q: %s", s, fmt.Sprintf(format, args...))
	}
	if s == "" {
		return bad("empty")
	}
	p := &Pattern{raw: s}
	seen := map[string]bool{}
	raw := strings.Split(s, "/")
	for i, r := range raw {
		var seg patternSeg
		switch {
		case r == "":
			return bad("empty segment %d", i+1)
		case r == "*":
			seg.one = true
		case r == "**":
			seg.rest = true
		case strings.HasPrefix(r, "{") && strings.HasSuffix(r, "}"):
			name, wild, hasWild := strings.Cut(r[1:len(r)-1], "=")
			switch {
			case !hasWild || wild == "*":
				seg.one = true
			case wild == "**":
				seg.rest = true
			default:
				return bad("segment %q: want {name}, {name=*} or {name=**}", r)
			}
			if name == "" || strings.ContainsAny(name, "{}=*") {
				return bad("segment %q: bad parameter name", r)
			}
			if seen[name] {
				return bad("parameter %q appears twice", name)
			}
			seen[name] = true
			seg.param = name
		case strings.ContainsAny(r, "{}*"):
			return bad("segment %q: braces and * are only allowed as a whole segment", r)
		default:
			seg.literal = r
		}
		if seg.rest && i != len(raw)-1 {
			return bad("segment %q: a ** wildcard must be the last segment", r)
		}
		p.segs = append(p.segs, seg)
	}
	if !p.segs[len(p.segs)-1].rest && len(p.segs)%2 != 0 {
		return bad("odd number of segments: names a collection, not a document")
	}
	return p, nil
}

// MustParsePattern is like ParsePattern but panics on an invalid pattern;
// it is meant for package-level variables.
func MustParsePattern(s string) *Pattern {
	p, err := ParsePattern(s)
	if err != nil {
		panic(err)
	}
	return p
}

// String returns the pattern as it was parsed.
func (p *Pattern) String() string {
	if p == nil {
		return ""
	}
	return p.raw
}

// Match returns the parameters of docPath (a document path relative to the
// database, e.g. "users/u1/posts/p1") under p, or an error wrapping
// ErrNoMatch that names the pattern, the path and why.
func (p *Pattern) Match(docPath string) (map[string]string, error) {
	noMatch := func(format string, args ...any) (map[string]string, error) {
		return nil, fmt.Errorf("%w: pattern %q, path %q: %s", ErrNoMatch, p.String(), docPath, fmt.Sprintf(format, args...))
	}
	if p == nil || len(p.segs) == 0 {
		return noMatch("no pattern")
	}
	segs := strings.Split(docPath, "/")
	if i := slices.Index(segs, ""); i >= 0 {
		return noMatch("segment %d is empty", i+1)
	}
	params := map[string]string{}
	for i, seg := range p.segs {
		if i >= len(segs) {
			return noMatch("path has %d segments, the pattern needs at least %d", len(segs), i+1)
		}
		switch {
		case seg.rest:
			if seg.param != "" {
				params[seg.param] = strings.Join(segs[i:], "/")
			}
			return params, nil
		case seg.one:
			if seg.param != "" {
				params[seg.param] = segs[i]
			}
		case segs[i] != seg.literal:
			return noMatch("segment %d is %q, want %q", i+1, segs[i], seg.literal)
		}
	}
	if len(segs) > len(p.segs) {
		return noMatch("path has %d segments, the pattern %d", len(segs), len(p.segs))
	}
	return params, nil
}
