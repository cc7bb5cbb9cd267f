// Package firestoreeventtest builds Firestore document events as Eventarc
// delivers them (binary-mode CloudEvents with protobuf
// DocumentEventData), for tests, benchmarks and local tools that post events
// to functions.
package firestoreeventtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	fd "github.com/googleapis/google-cloudevents-go/cloud/firestoredata"
	"google.golang.org/genproto/googleapis/type/latlng"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Change is one document change to encode as an event.
type Change struct {
	// ID is the event ID (ce-id); empty means a random one.
	ID string
	// Type is the full event type, e.g.
	// "google.cloud.firestore.document.v1.created".
	Type string
	// Project and Database name the database; Database defaults to
	// "(default)".
	Project  string
	Database string
	// Document is the changed document's path, e.g. "users/u1/posts/p1".
	Document string
	// Before and After are the document's fields before and after the
	// change; nil means the document is absent (Before on a create, After on
	// a delete).
	Before, After map[string]any
}

func (c Change) database() string {
	if c.Database == "" {
		return "(default)"
	}
	return c.Database
}

func (c Change) name() string {
	return fmt.Sprintf("projects/%s/databases/%s/documents/%s", c.Project, c.database(), c.Document)
}

// Data returns the protobuf DocumentEventData of c.
func (c Change) Data() ([]byte, error) {
	var data fd.DocumentEventData
	var err error
	now := timestamppb.New(time.Now())
	if c.After != nil {
		data.Value = &fd.Document{Name: c.name(), CreateTime: now, UpdateTime: now}
		if data.Value.Fields, err = Fields(c.After); err != nil {
			return nil, err
		}
	}
	if c.Before != nil {
		data.OldValue = &fd.Document{Name: c.name(), CreateTime: now, UpdateTime: now}
		if data.OldValue.Fields, err = Fields(c.Before); err != nil {
			return nil, err
		}
	}
	return proto.Marshal(&data)
}

// Event returns c as a CloudEvent with protobuf data, as
// functions-framework hands it to a function.
func (c Change) Event() (event.Event, error) {
	data, err := c.Data()
	if err != nil {
		return event.Event{}, err
	}
	e := event.New()
	e.SetID(c.eventID())
	e.SetType(c.Type)
	e.SetSource(fmt.Sprintf("//firestore.googleapis.com/projects/%s/databases/%s", c.Project, c.database()))
	e.SetSubject("documents/" + c.Document)
	e.SetTime(time.Now())
	for k, v := range c.extensions() {
		e.SetExtension(k, v)
	}
	if err := e.SetData("application/protobuf", data); err != nil {
		return event.Event{}, err
	}
	return e, nil
}

func (c Change) eventID() string {
	if c.ID != "" {
		return c.ID
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (c Change) extensions() map[string]string {
	return map[string]string{
		"database":  c.database(),
		"namespace": "(default)",
		"document":  c.Document,
		"project":   c.Project,
		"location":  "nam5",
	}
}

// Request returns a binary-mode CloudEvent HTTP request for c to url, as
// Eventarc sends it: ce-* headers and Content-Type application/protobuf.
// Its ID is fixed when the request is built, so posting copies of it
// simulates duplicate deliveries.
func (c Change) Request(ctx context.Context, url string) (*http.Request, error) {
	data, err := c.Data()
	if err != nil {
		return nil, err
	}
	if c.ID == "" {
		c.ID = c.eventID()
	}
	return c.RequestWithBody(ctx, url, data)
}

// RequestWithBody is Request with body in place of c's data: for posting
// malformed payloads with well-formed headers.
func (c Change) RequestWithBody(ctx context.Context, url string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	h := req.Header
	h.Set("Content-Type", "application/protobuf")
	h.Set("ce-specversion", "1.0")
	h.Set("ce-id", c.eventID())
	h.Set("ce-type", c.Type)
	h.Set("ce-source", fmt.Sprintf("//firestore.googleapis.com/projects/%s/databases/%s", c.Project, c.database()))
	h.Set("ce-subject", "documents/"+c.Document)
	h.Set("ce-time", time.Now().UTC().Format(time.RFC3339Nano))
	for k, v := range c.extensions() {
		h.Set("ce-"+k, v)
	}
	return req, nil
}

// Fields converts Go values to Firestore values: nil, bool, int, int64,
// float64, string, []byte, time.Time, *latlng.LatLng, []any and
// map[string]any.
func Fields(m map[string]any) (map[string]*fd.Value, error) {
	out := make(map[string]*fd.Value, len(m))
	for k, v := range m {
		fv, err := Value(v)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", k, err)
		}
		out[k] = fv
	}
	return out, nil
}

// Value converts one Go value (see Fields) to a Firestore value.
func Value(v any) (*fd.Value, error) {
	switch v := v.(type) {
	case nil:
		return &fd.Value{ValueType: &fd.Value_NullValue{NullValue: structpb.NullValue_NULL_VALUE}}, nil
	case bool:
		return &fd.Value{ValueType: &fd.Value_BooleanValue{BooleanValue: v}}, nil
	case int:
		return &fd.Value{ValueType: &fd.Value_IntegerValue{IntegerValue: int64(v)}}, nil
	case int64:
		return &fd.Value{ValueType: &fd.Value_IntegerValue{IntegerValue: v}}, nil
	case float64:
		return &fd.Value{ValueType: &fd.Value_DoubleValue{DoubleValue: v}}, nil
	case string:
		return &fd.Value{ValueType: &fd.Value_StringValue{StringValue: v}}, nil
	case []byte:
		return &fd.Value{ValueType: &fd.Value_BytesValue{BytesValue: v}}, nil
	case time.Time:
		return &fd.Value{ValueType: &fd.Value_TimestampValue{TimestampValue: timestamppb.New(v)}}, nil
	case *latlng.LatLng:
		return &fd.Value{ValueType: &fd.Value_GeoPointValue{GeoPointValue: v}}, nil
	case []any:
		arr := &fd.ArrayValue{}
		for i, e := range v {
			fv, err := Value(e)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			arr.Values = append(arr.Values, fv)
		}
		return &fd.Value{ValueType: &fd.Value_ArrayValue{ArrayValue: arr}}, nil
	case map[string]any:
		fields, err := Fields(v)
		if err != nil {
			return nil, err
		}
		return &fd.Value{ValueType: &fd.Value_MapValue{MapValue: &fd.MapValue{Fields: fields}}}, nil
	}
	return nil, fmt.Errorf("firestoreeventtest: unsupported value type %T", v)
}
