package firestoreevent_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	fd "github.com/googleapis/google-cloudevents-go/cloud/firestoredata"
	"google.golang.org/protobuf/types/known/timestamppb"

	fe "github.com/fireonce/fireonce/shared/firestoreevent"
)

// fuzzSeeds are real payloads, built with the protobuf types: every event
// kind and every value type, nested.
func fuzzSeeds() []*fd.DocumentEventData {
	all := map[string]*fd.Value{
		"null": nullV(), "bool": boolV(true), "int": intV(-7), "double": dblV(0.5),
		"time": timeV(when), "string": strV("s"), "bytes": bytesV([]byte{1, 2}),
		"ref": refV(userRef), "geo": geoV(1, 2),
		"array": arrV(intV(1), arrV(strV("x")), mapV(map[string]*fd.Value{"k": nullV()})),
		"map":   mapV(map[string]*fd.Value{"a": mapV(map[string]*fd.Value{"b": timeV(when)})}),
	}
	return []*fd.DocumentEventData{
		dataFor(typeCreated),
		dataFor(typeUpdated),
		dataFor(typeDeleted),
		{Value: doc(postPath, all)},
		{Value: doc(postPath, all), OldValue: doc(postPath, nil), UpdateMask: &fd.DocumentMask{FieldPaths: []string{"a.b"}}},
		{Value: &fd.Document{Name: dbPrefix + postPath, UpdateTime: &timestamppb.Timestamp{Seconds: -1}}},
	}
}

var fuzzTypes = []string{
	typeCreated, typeUpdated, typeDeleted, typeWritten,
	typeCreated + authSuffix, typeUpdated + authSuffix, typeDeleted + authSuffix, typeWritten + authSuffix,
	"google.cloud.storage.object.v1.finalized",
}

// FuzzDecode feeds Decode arbitrary bodies, content types, event types and
// subjects: it must never panic, every error must wrap ErrMalformed, and
// what it accepts must keep the package's promises.
func FuzzDecode(f *testing.F) {
	for i, d := range fuzzSeeds() {
		typ := uint8(i % len(fuzzTypes))
		f.Add(protoBytes(f, d), "application/protobuf", typ, "documents/"+postPath)
		f.Add(protoBytes(f, d), "", typ+3, "documents/"+postPath)
		f.Add(jsonBytes(f, d), "application/json; charset=utf-8", typ, "documents/"+postPath)
	}
	f.Add([]byte{}, "application/protobuf", uint8(0), "documents/users/u1")
	f.Add([]byte("\x0a\x02\x0a"), "application/x-protobuf", uint8(1), "documents/a/b/c")
	f.Add([]byte(`{"value":{"name":"x/documents/a/b"}}`), "application/json", uint8(0), "documents/a/b")
	f.Add([]byte("garbage"), "text/plain", uint8(8), "objects/x")

	wildcard := fe.MustParsePattern("{all=**}")
	f.Fuzz(func(t *testing.T, body []byte, contentType string, typ uint8, subject string) {
		e := event.New()
		e.SetID("fuzz")
		e.SetType(fuzzTypes[int(typ)%len(fuzzTypes)])
		e.SetSource(source)
		e.SetSubject(subject)
		if typ >= 128 {
			e.SetExtension("document", strings.TrimPrefix(subject, "documents/"))
		}
		if err := e.SetData(contentType, body); err != nil {
			t.Skip()
		}
		ev, err := fe.Decode(e)
		if err != nil {
			if !errors.Is(err, fe.ErrMalformed) {
				t.Fatalf("error %q does not wrap ErrMalformed", err)
			}
			if ev != nil {
				t.Fatalf("Decode returned an event with its error %v", err)
			}
			return
		}
		if "documents/"+ev.Document != ev.Subject {
			t.Fatalf("Document %q, Subject %q", ev.Document, ev.Subject)
		}
		switch {
		case ev.Kind == fe.Created && ev.After == nil,
			ev.Kind == fe.Deleted && ev.Before == nil,
			ev.Kind == fe.Updated && (ev.Before == nil || ev.After == nil),
			ev.Before == nil && ev.After == nil:
			t.Fatalf("%s event with Before %v, After %v", ev.Kind, ev.Before, ev.After)
		}
		if params, err := ev.Params(wildcard); err != nil || params["all"] != ev.Document {
			t.Fatalf("Params({all=**}) = %v, %v", params, err)
		}
		for _, d := range []*fe.Document{ev.Before, ev.After} {
			if d == nil {
				continue
			}
			if d.Path != ev.Document || !strings.HasSuffix(d.Name, "/documents/"+d.Path) {
				t.Fatalf("document Name %q, Path %q for %q", d.Name, d.Path, ev.Document)
			}
			_ = d.Data()
			var m map[string]any
			if err := d.DataTo(&m); err != nil {
				t.Fatalf("DataTo(map[string]any) of an accepted event: %v", err)
			}
			var s struct {
				Title string
				N     int8
				T     []string
			}
			if err := d.DataTo(&s); err != nil && !errors.Is(err, fe.ErrDataTo) {
				t.Fatalf("DataTo error %q does not wrap ErrDataTo", err)
			}
		}
	})
}
