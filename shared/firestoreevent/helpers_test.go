package firestoreevent_test

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	fd "github.com/googleapis/google-cloudevents-go/cloud/firestoredata"
	"google.golang.org/genproto/googleapis/type/latlng"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Builders for the payloads Eventarc sends, made with the protobuf types.

const (
	typeCreated = "google.cloud.firestore.document.v1.created"
	typeUpdated = "google.cloud.firestore.document.v1.updated"
	typeDeleted = "google.cloud.firestore.document.v1.deleted"
	typeWritten = "google.cloud.firestore.document.v1.written"
	authSuffix  = ".withAuthContext"
	source      = "//firestore.googleapis.com/projects/demo-x/databases/(default)"
	dbPrefix    = "projects/demo-x/databases/(default)/documents/"
	postPath    = "users/u1/posts/p1"
)

var (
	createTime = time.Date(2025, 3, 1, 10, 0, 0, 123456789, time.UTC)
	updateTime = time.Date(2025, 3, 1, 10, 5, 0, 0, time.UTC)
	eventTime  = time.Date(2025, 3, 1, 10, 5, 0, 500, time.UTC)
)

func nullV() *fd.Value {
	return &fd.Value{ValueType: &fd.Value_NullValue{NullValue: structpb.NullValue_NULL_VALUE}}
}
func boolV(b bool) *fd.Value {
	return &fd.Value{ValueType: &fd.Value_BooleanValue{BooleanValue: b}}
}
func intV(i int64) *fd.Value { return &fd.Value{ValueType: &fd.Value_IntegerValue{IntegerValue: i}} }
func dblV(f float64) *fd.Value {
	return &fd.Value{ValueType: &fd.Value_DoubleValue{DoubleValue: f}}
}
func strV(s string) *fd.Value { return &fd.Value{ValueType: &fd.Value_StringValue{StringValue: s}} }
func bytesV(b []byte) *fd.Value {
	return &fd.Value{ValueType: &fd.Value_BytesValue{BytesValue: b}}
}
func timeV(t time.Time) *fd.Value {
	return &fd.Value{ValueType: &fd.Value_TimestampValue{TimestampValue: timestamppb.New(t)}}
}
func refV(name string) *fd.Value {
	return &fd.Value{ValueType: &fd.Value_ReferenceValue{ReferenceValue: name}}
}
func geoV(lat, lng float64) *fd.Value {
	return &fd.Value{ValueType: &fd.Value_GeoPointValue{GeoPointValue: &latlng.LatLng{Latitude: lat, Longitude: lng}}}
}
func arrV(vs ...*fd.Value) *fd.Value {
	return &fd.Value{ValueType: &fd.Value_ArrayValue{ArrayValue: &fd.ArrayValue{Values: vs}}}
}
func mapV(fields map[string]*fd.Value) *fd.Value {
	return &fd.Value{ValueType: &fd.Value_MapValue{MapValue: &fd.MapValue{Fields: fields}}}
}

func doc(path string, fields map[string]*fd.Value) *fd.Document {
	return &fd.Document{
		Name:       dbPrefix + path,
		Fields:     fields,
		CreateTime: timestamppb.New(createTime),
		UpdateTime: timestamppb.New(updateTime),
	}
}

func post(title string) map[string]*fd.Value {
	return map[string]*fd.Value{"title": strV(title), "body": strV("hello"), "createdAt": timeV(createTime)}
}

// dataFor returns event data of the right shape for typ.
func dataFor(typ string) *fd.DocumentEventData {
	switch typ {
	case typeCreated, typeCreated + authSuffix, typeWritten, typeWritten + authSuffix:
		return &fd.DocumentEventData{Value: doc(postPath, post("new"))}
	case typeDeleted, typeDeleted + authSuffix:
		return &fd.DocumentEventData{OldValue: doc(postPath, post("old"))}
	default:
		return &fd.DocumentEventData{
			Value:      doc(postPath, post("new")),
			OldValue:   doc(postPath, post("old")),
			UpdateMask: &fd.DocumentMask{FieldPaths: []string{"title"}},
		}
	}
}

func protoBytes(tb testing.TB, m proto.Message) []byte {
	tb.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func jsonBytes(tb testing.TB, m proto.Message) []byte {
	tb.Helper()
	b, err := protojson.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// newEvent builds the event Eventarc would deliver for a change of postPath.
func newEvent(tb testing.TB, typ, contentType string, body []byte) event.Event {
	tb.Helper()
	e := event.New()
	e.SetID("evt-1")
	e.SetType(typ)
	e.SetSource(source)
	e.SetSubject("documents/" + postPath)
	e.SetTime(eventTime)
	for k, v := range map[string]string{
		"document": postPath, "database": "(default)", "namespace": "(default)",
		"project": "demo-x", "location": "nam5",
	} {
		e.SetExtension(k, v)
	}
	if err := e.SetData(contentType, body); err != nil {
		tb.Fatal(err)
	}
	return e
}

// equal is reflect.DeepEqual that compares geo points by value.
func equal(a, b any) bool {
	switch a := a.(type) {
	case *latlng.LatLng:
		b, ok := b.(*latlng.LatLng)
		return ok && proto.Equal(a, b)
	case float64:
		b, ok := b.(float64)
		return ok && (a == b || math.IsNaN(a) && math.IsNaN(b))
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) || (a == nil) != (b == nil) {
			return false
		}
		for i := range a {
			if !equal(a[i], b[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, v := range a {
			w, ok := b[k]
			if !ok || !equal(v, w) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}
