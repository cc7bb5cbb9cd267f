package firestoreevent

import (
	"errors"
	"fmt"
	"mime"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/googleapis/google-cloudevents-go/cloud/firestoredata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// ErrMalformed is wrapped by every error Decode returns: the event can never
// be processed, so retrying it is pointless.
var ErrMalformed = errors.New("firestoreevent: malformed event")

// Kind is the kind of document change, the part of the event type after
// "google.cloud.firestore.document.v1.".
type Kind string

// The kinds of document change.
const (
	Created Kind = "created"
	Updated Kind = "updated"
	Deleted Kind = "deleted"
	Written Kind = "written" // any of the three
)

const (
	typePrefix     = "google.cloud.firestore.document.v1."
	authTypeSuffix = ".withAuthContext"
)

// Event is a decoded, validated Firestore document event.
type Event struct {
	ID              string    // ce-id
	Type            string    // the full ce-type
	Kind            Kind      // Type without prefix and ".withAuthContext"
	WithAuthContext bool      // the type ends in ".withAuthContext"
	AuthType        string    // extension "authtype", e.g. "unauthenticated", "api_key", "system", "unknown"
	AuthID          string    // extension "authid"
	Source          string    // ce-source as received
	Subject         string    // ce-subject, "documents/<Document>"
	Time            time.Time // ce-time; zero when absent

	Project   string // extension "project", else parsed from Source or the document name
	Database  string // extension "database", else parsed likewise
	Namespace string // extension "namespace"
	Location  string // extension "location"

	// Document is the path of the changed document relative to the
	// database, e.g. "users/u1/posts/p1".
	Document string

	Before *Document // the document before the change; nil on create
	After  *Document // the document after the change; nil on delete

	// UpdateMask lists the field paths an update changed, when the sender
	// provides them (the emulator never does).
	UpdateMask []string
}

// Params returns the path parameters of e's document under p. A document
// that does not match p is an event this function must never have received:
// the error wraps both ErrNoMatch and ErrMalformed.
func (e *Event) Params(p *Pattern) (map[string]string, error) {
	if e == nil {
		return nil, fmt.Errorf("%w: nil event", ErrMalformed)
	}
	params, err := p.Match(e.Document)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return params, nil
}

// Decode decodes and validates a Firestore document CloudEvent. See the
// package documentation for what it checks; every error wraps ErrMalformed.
func Decode(e event.Event) (*Event, error) {
	if e.Context == nil {
		return nil, malformed("no event context")
	}
	switch c := e.Context.(type) {
	case *event.EventContextV1:
		if c == nil {
			return nil, malformed("no event context")
		}
	case *event.EventContextV03:
		if c == nil {
			return nil, malformed("no event context")
		}
	}

	out := &Event{
		ID:      e.ID(),
		Type:    e.Type(),
		Source:  e.Source(),
		Subject: e.Subject(),
		Time:    e.Time(),
	}
	if out.ID == "" {
		return nil, malformed("missing id")
	}
	kind, auth, ok := parseType(out.Type)
	if !ok {
		return nil, malformed("unknown event type %q", out.Type)
	}
	out.Kind, out.WithAuthContext = kind, auth

	if out.Subject == "" {
		return nil, malformed("missing subject")
	}
	docPath, ok := strings.CutPrefix(out.Subject, "documents/")
	if !ok {
		return nil, malformed("subject %q does not start with \"documents/\"", out.Subject)
	}
	if err := checkDocPath(docPath); err != nil {
		return nil, malformed("subject %q: %v", out.Subject, err)
	}
	out.Document = docPath

	ext := e.Extensions()
	if doc, ok := extString(ext, "document"); ok && doc != docPath {
		return nil, malformed("document extension %q disagrees with subject %q", doc, out.Subject)
	}
	out.AuthType, _ = extString(ext, "authtype")
	out.AuthID, _ = extString(ext, "authid")
	out.Namespace, _ = extString(ext, "namespace")
	out.Location, _ = extString(ext, "location")
	out.Project, _ = extString(ext, "project")
	out.Database, _ = extString(ext, "database")

	data, err := unmarshalData(e.DataContentType(), e.Data())
	if err != nil {
		return nil, err
	}
	if out.After, err = newDocument("value", data.GetValue(), docPath); err != nil {
		return nil, err
	}
	if out.Before, err = newDocument("oldValue", data.GetOldValue(), docPath); err != nil {
		return nil, err
	}
	out.UpdateMask = data.GetUpdateMask().GetFieldPaths()

	switch {
	case kind == Created && out.After == nil:
		return nil, malformed("created event without a value")
	case kind == Deleted && out.Before == nil:
		return nil, malformed("deleted event without an oldValue")
	case kind == Updated && (out.Before == nil || out.After == nil):
		return nil, malformed("updated event without both value and oldValue")
	case kind == Written && out.Before == nil && out.After == nil:
		return nil, malformed("written event without value or oldValue")
	}

	fillProjectDatabase(out)
	return out, nil
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
}

func parseType(t string) (kind Kind, withAuth bool, ok bool) {
	rest, ok := strings.CutPrefix(t, typePrefix)
	if !ok {
		return "", false, false
	}
	rest, withAuth = strings.CutSuffix(rest, authTypeSuffix)
	switch k := Kind(rest); k {
	case Created, Updated, Deleted, Written:
		return k, withAuth, true
	}
	return "", false, false
}

// checkDocPath accepts a document path: an even, non-zero number of
// non-empty segments.
func checkDocPath(p string) error {
	if p == "" {
		return errors.New("empty document path")
	}
	n := 0
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "" {
			return errors.New("empty path segment")
		}
		n++
	}
	if n%2 != 0 {
		return fmt.Errorf("odd number of segments (%d): names a collection, not a document", n)
	}
	return nil
}

// extString reads an extension whatever type the transport gave it.
func extString(ext map[string]any, name string) (string, bool) {
	v, ok := ext[name]
	if !ok || v == nil {
		return "", false
	}
	if s, err := types.Format(v); err == nil {
		return s, true
	}
	return fmt.Sprint(v), true
}

func unmarshalData(contentType string, body []byte) (*firestoredata.DocumentEventData, error) {
	if len(body) == 0 {
		return nil, malformed("empty data")
	}
	mediaType := contentType
	if mt, _, err := mime.ParseMediaType(contentType); err == nil {
		mediaType = mt
	} else {
		mediaType, _, _ = strings.Cut(mediaType, ";")
	}
	mediaType = strings.ToLower(strings.TrimSpace(mediaType))

	var data firestoredata.DocumentEventData
	switch mediaType {
	case "", "application/protobuf", "application/x-protobuf":
		if err := (proto.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, &data); err != nil {
			return nil, malformed("data is not a protobuf DocumentEventData (content type %q): %v", contentType, err)
		}
	case "application/json":
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, &data); err != nil {
			return nil, malformed("data is not a JSON DocumentEventData: %v", err)
		}
	default:
		return nil, malformed("unsupported data content type %q", contentType)
	}
	return &data, nil
}

// fillProjectDatabase fills what the extensions left empty from the source
// ("//firestore.googleapis.com/projects/P/databases/D", the emulator doubles
// "projects/") and then from a document name.
func fillProjectDatabase(e *Event) {
	if e.Project != "" && e.Database != "" {
		return
	}
	names := []string{e.Source}
	for _, d := range []*Document{e.After, e.Before} {
		if d != nil {
			names = append(names, d.Name)
		}
	}
	for _, name := range names {
		p, d := projectDatabase(name)
		if e.Project == "" {
			e.Project = p
		}
		if e.Database == "" {
			e.Database = d
		}
	}
}

// projectDatabase finds ".../projects/P/databases/D/..." in s.
func projectDatabase(s string) (project, database string) {
	segs := strings.Split(s, "/")
	for i, seg := range segs {
		if seg != "databases" || i+1 >= len(segs) {
			continue
		}
		database = segs[i+1]
		if i >= 2 && segs[i-2] == "projects" {
			project = segs[i-1]
		}
		return project, database
	}
	return "", ""
}
