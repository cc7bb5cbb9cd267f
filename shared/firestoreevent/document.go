package firestoreevent

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/googleapis/google-cloudevents-go/cloud/firestoredata"
	"google.golang.org/genproto/googleapis/type/latlng"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Document is a Firestore document as an event carries it. Its fields are
// validated by Decode; it is safe for concurrent reads.
type Document struct {
	Name       string    // full resource name, "projects/P/databases/D/documents/<Path>"
	Path       string    // relative to the database, e.g. "users/u1/posts/p1"
	ID         string    // the last segment of Path
	CreateTime time.Time // zero when the event does not carry it
	UpdateTime time.Time // zero when the event does not carry it

	fields map[string]*firestoredata.Value
}

// Reference is the value of a reference field: a pointer to another
// document. Data returns it as a Reference (not a string) so a reference
// cannot be mistaken for a string field.
type Reference struct {
	Name string // full resource name, "projects/P/databases/D/documents/<Path>"
	Path string // relative to the database, e.g. "users/u1"
}

// Data returns the document's fields as Go values: nil, bool, int64,
// float64, string, []byte, time.Time (UTC), Reference, *latlng.LatLng,
// []any and map[string]any. The result is a fresh copy the caller may
// modify. Data of a nil Document is nil.
func (d *Document) Data() map[string]any {
	if d == nil {
		return nil
	}
	return toGoMap(d.fields)
}

// newDocument converts and validates the document named field of the event
// data; a nil pb gives a nil Document.
func newDocument(field string, pb *firestoredata.Document, docPath string) (*Document, error) {
	if pb == nil {
		return nil, nil
	}
	name := pb.GetName()
	if name == "" {
		return nil, malformed("%s has no name", field)
	}
	if !strings.HasSuffix(name, "/documents/"+docPath) {
		return nil, malformed("%s name %q is not the subject's document %q", field, name, docPath)
	}
	d := &Document{
		Name:   name,
		Path:   docPath,
		ID:     docPath[strings.LastIndexByte(docPath, '/')+1:],
		fields: pb.GetFields(),
	}
	var err error
	if d.CreateTime, err = optionalTime(pb.GetCreateTime()); err != nil {
		return nil, malformed("%s createTime: %v", field, err)
	}
	if d.UpdateTime, err = optionalTime(pb.GetUpdateTime()); err != nil {
		return nil, malformed("%s updateTime: %v", field, err)
	}
	for k, v := range d.fields {
		if err := checkValue(v, fieldPath("", k)); err != nil {
			return nil, malformed("%s %v", field, err)
		}
	}
	return d, nil
}

func optionalTime(ts *timestamppb.Timestamp) (time.Time, error) {
	if ts == nil {
		return time.Time{}, nil
	}
	if err := checkTime(ts); err != nil {
		return time.Time{}, err
	}
	return ts.AsTime(), nil
}

// checkTime accepts the timestamps Firestore stores, 0001-01-01 to
// 9999-12-31. Protobuf's own error text is deliberately unstable.
func checkTime(ts *timestamppb.Timestamp) error {
	const minSeconds, maxSeconds = -62135596800, 253402300799
	s, n := ts.GetSeconds(), ts.GetNanos()
	if s < minSeconds || s > maxSeconds || n < 0 || n >= 1e9 {
		return fmt.Errorf("timestamp out of range (seconds %d, nanos %d)", s, n)
	}
	return nil
}

// checkValue makes sure toGo can convert v: every value has a type,
// timestamps are in range and references name a document.
func checkValue(v *firestoredata.Value, path string) error {
	switch x := v.GetValueType().(type) {
	case nil:
		return fmt.Errorf("field %s: value has no type", path)
	case *firestoredata.Value_TimestampValue:
		if err := checkTime(x.TimestampValue); err != nil {
			return fmt.Errorf("field %s: %v", path, err)
		}
	case *firestoredata.Value_ReferenceValue:
		if _, err := parseReference(x.ReferenceValue); err != nil {
			return fmt.Errorf("field %s: %v", path, err)
		}
	case *firestoredata.Value_ArrayValue:
		for i, e := range x.ArrayValue.GetValues() {
			if err := checkValue(e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case *firestoredata.Value_MapValue:
		for k, e := range x.MapValue.GetFields() {
			if err := checkValue(e, fieldPath(path, k)); err != nil {
				return err
			}
		}
	}
	return nil
}

// fieldPath names a map key under parent for error messages, quoting keys
// that are not simple names.
func fieldPath(parent, key string) string {
	simple := key != ""
	for _, r := range key {
		if !(r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			simple = false
			break
		}
	}
	if !simple {
		key = strconv.Quote(key)
	}
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// parseReference accepts "projects/P/databases/D/documents/<document path>".
func parseReference(name string) (Reference, error) {
	segs := strings.SplitN(name, "/", 6)
	if len(segs) < 6 || segs[0] != "projects" || segs[1] == "" || segs[2] != "databases" || segs[3] == "" || segs[4] != "documents" {
		return Reference{}, fmt.Errorf("reference %q is not projects/P/databases/D/documents/<path>", name)
	}
	if err := checkDocPath(segs[5]); err != nil {
		return Reference{}, fmt.Errorf("reference %q: %v", name, err)
	}
	return Reference{Name: name, Path: segs[5]}, nil
}

// toGo converts a value checked by checkValue.
func toGo(v *firestoredata.Value) any {
	switch x := v.GetValueType().(type) {
	case *firestoredata.Value_BooleanValue:
		return x.BooleanValue
	case *firestoredata.Value_IntegerValue:
		return x.IntegerValue
	case *firestoredata.Value_DoubleValue:
		return x.DoubleValue
	case *firestoredata.Value_TimestampValue:
		return x.TimestampValue.AsTime()
	case *firestoredata.Value_StringValue:
		return x.StringValue
	case *firestoredata.Value_BytesValue:
		return bytes.Clone(x.BytesValue)
	case *firestoredata.Value_ReferenceValue:
		r, _ := parseReference(x.ReferenceValue)
		return r
	case *firestoredata.Value_GeoPointValue:
		return newLatLng(x.GeoPointValue)
	case *firestoredata.Value_ArrayValue:
		vals := x.ArrayValue.GetValues()
		out := make([]any, len(vals))
		for i, e := range vals {
			out[i] = toGo(e)
		}
		return out
	case *firestoredata.Value_MapValue:
		return toGoMap(x.MapValue.GetFields())
	}
	return nil // null, or no type (rejected by checkValue)
}

func toGoMap(fields map[string]*firestoredata.Value) map[string]any {
	out := make(map[string]any, len(fields))
	for k, v := range fields {
		out[k] = toGo(v)
	}
	return out
}

func newLatLng(g *latlng.LatLng) *latlng.LatLng {
	return &latlng.LatLng{Latitude: g.GetLatitude(), Longitude: g.GetLongitude()}
}
