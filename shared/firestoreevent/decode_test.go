package firestoreevent_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	fd "github.com/googleapis/google-cloudevents-go/cloud/firestoredata"
	"google.golang.org/protobuf/types/known/timestamppb"

	fe "github.com/fireonce/fireonce/shared/firestoreevent"
)

func TestDecodeKinds(t *testing.T) {
	tests := []struct {
		typ                   string
		kind                  fe.Kind
		auth                  bool
		wantBefore, wantAfter bool
	}{
		{typeCreated, fe.Created, false, false, true},
		{typeUpdated, fe.Updated, false, true, true},
		{typeDeleted, fe.Deleted, false, true, false},
		{typeWritten, fe.Written, false, false, true},
		{typeCreated + authSuffix, fe.Created, true, false, true},
		{typeUpdated + authSuffix, fe.Updated, true, true, true},
		{typeDeleted + authSuffix, fe.Deleted, true, true, false},
		{typeWritten + authSuffix, fe.Written, true, false, true},
	}
	for _, tt := range tests {
		for _, ct := range []string{"application/protobuf", "application/json"} {
			t.Run(tt.typ+"/"+ct, func(t *testing.T) {
				var body []byte
				if ct == "application/json" {
					body = jsonBytes(t, dataFor(tt.typ))
				} else {
					body = protoBytes(t, dataFor(tt.typ))
				}
				ce := newEvent(t, tt.typ, ct, body)
				if tt.auth {
					ce.SetExtension("authtype", "unauthenticated")
					ce.SetExtension("authid", "uid-7")
				}
				got, err := fe.Decode(ce)
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if got.ID != "evt-1" || got.Type != tt.typ || got.Kind != tt.kind || got.WithAuthContext != tt.auth {
					t.Errorf("ID, Type, Kind, WithAuthContext = %q, %q, %q, %v", got.ID, got.Type, got.Kind, got.WithAuthContext)
				}
				if tt.auth && (got.AuthType != "unauthenticated" || got.AuthID != "uid-7") {
					t.Errorf("AuthType, AuthID = %q, %q", got.AuthType, got.AuthID)
				}
				if got.Document != postPath || got.Subject != "documents/"+postPath || got.Source != source {
					t.Errorf("Document, Subject, Source = %q, %q, %q", got.Document, got.Subject, got.Source)
				}
				if got.Project != "demo-x" || got.Database != "(default)" || got.Namespace != "(default)" || got.Location != "nam5" {
					t.Errorf("Project, Database, Namespace, Location = %q, %q, %q, %q", got.Project, got.Database, got.Namespace, got.Location)
				}
				if !got.Time.Equal(eventTime) {
					t.Errorf("Time = %v, want %v", got.Time, eventTime)
				}
				if (got.Before != nil) != tt.wantBefore || (got.After != nil) != tt.wantAfter {
					t.Fatalf("Before, After = %v, %v; want present %v, %v", got.Before, got.After, tt.wantBefore, tt.wantAfter)
				}
				for _, d := range []*fe.Document{got.Before, got.After} {
					if d == nil {
						continue
					}
					if d.Name != dbPrefix+postPath || d.Path != postPath || d.ID != "p1" {
						t.Errorf("Name, Path, ID = %q, %q, %q", d.Name, d.Path, d.ID)
					}
					if !d.CreateTime.Equal(createTime) || !d.UpdateTime.Equal(updateTime) {
						t.Errorf("CreateTime, UpdateTime = %v, %v", d.CreateTime, d.UpdateTime)
					}
				}
				if tt.kind == fe.Updated {
					if got.Before.Data()["title"] != "old" || got.After.Data()["title"] != "new" {
						t.Errorf("titles before, after = %v, %v", got.Before.Data()["title"], got.After.Data()["title"])
					}
					if !slices.Equal(got.UpdateMask, []string{"title"}) {
						t.Errorf("UpdateMask = %q", got.UpdateMask)
					}
				}
			})
		}
	}
}

func TestDecodeMalformed(t *testing.T) {
	created := func(t *testing.T) []byte { return protoBytes(t, dataFor(typeCreated)) }
	withData := func(d *fd.DocumentEventData) func(*testing.T, *event.Event) {
		return func(t *testing.T, e *event.Event) { e.SetData("application/protobuf", protoBytes(t, d)) }
	}
	createdWith := func(name string, fields map[string]*fd.Value) func(*testing.T, *event.Event) {
		d := doc(postPath, fields)
		d.Name = name
		return withData(&fd.DocumentEventData{Value: d})
	}
	tests := []struct {
		name   string
		mutate func(*testing.T, *event.Event)
		want   string
	}{
		{"garbage bytes", func(t *testing.T, e *event.Event) {
			e.SetData("application/protobuf", []byte("\xff\xfe\xfd not a protobuf"))
		}, "data is not a protobuf DocumentEventData"},
		{"truncated protobuf", func(t *testing.T, e *event.Event) {
			b := created(t)
			e.SetData("application/protobuf", b[:len(b)-1])
		}, "data is not a protobuf DocumentEventData"},
		{"JSON where protobuf is declared", func(t *testing.T, e *event.Event) {
			e.SetData("application/protobuf", jsonBytes(t, dataFor(typeCreated)))
		}, "data is not a protobuf DocumentEventData"},
		{"JSON where protobuf is implied", func(t *testing.T, e *event.Event) {
			e.SetData("", jsonBytes(t, dataFor(typeCreated)))
		}, "data is not a protobuf DocumentEventData"},
		{"protobuf where JSON is declared", func(t *testing.T, e *event.Event) {
			e.SetData("application/json", created(t))
		}, "data is not a JSON DocumentEventData"},
		{"JSON with the wrong shape", func(t *testing.T, e *event.Event) {
			e.SetData("application/json", []byte(`{"value": 42}`))
		}, "data is not a JSON DocumentEventData"},
		{"unsupported content type", func(t *testing.T, e *event.Event) {
			e.SetData("text/plain", created(t))
		}, `unsupported data content type "text/plain"`},
		{"empty body", func(t *testing.T, e *event.Event) {
			e.SetData("application/protobuf", []byte{})
		}, "empty data"},
		{"no body", func(t *testing.T, e *event.Event) {
			e.DataEncoded = nil
		}, "empty data"},
		{"no event context", func(t *testing.T, e *event.Event) {
			*e = event.Event{}
		}, "no event context"},
		{"missing id", func(t *testing.T, e *event.Event) {
			e.Context.(*event.EventContextV1).ID = ""
		}, "missing id"},
		{"missing subject", func(t *testing.T, e *event.Event) {
			e.SetSubject("")
		}, "missing subject"},
		{"foreign subject", func(t *testing.T, e *event.Event) {
			e.SetSubject("objects/bucket/file.txt")
		}, `subject "objects/bucket/file.txt" does not start with "documents/"`},
		{"subject names a collection", func(t *testing.T, e *event.Event) {
			e.SetSubject("documents/users/u1/posts")
		}, "odd number of segments"},
		{"subject with an empty segment", func(t *testing.T, e *event.Event) {
			e.SetSubject("documents/users//posts/p1")
		}, "empty path segment"},
		{"subject without a path", func(t *testing.T, e *event.Event) {
			e.SetSubject("documents/")
		}, "empty document path"},
		{"unknown event type", func(t *testing.T, e *event.Event) {
			e.SetType("google.cloud.storage.object.v1.finalized")
		}, `unknown event type "google.cloud.storage.object.v1.finalized"`},
		{"unknown firestore kind", func(t *testing.T, e *event.Event) {
			e.SetType("google.cloud.firestore.document.v1.touched")
		}, "unknown event type"},
		{"event type with a trailing suffix", func(t *testing.T, e *event.Event) {
			e.SetType(typeCreated + ".withAuthContext.x")
		}, "unknown event type"},
		{"document extension disagrees with subject", func(t *testing.T, e *event.Event) {
			e.SetExtension("document", "users/u2/posts/p1")
		}, `document extension "users/u2/posts/p1" disagrees with subject "documents/users/u1/posts/p1"`},
		{"created without value", withData(&fd.DocumentEventData{OldValue: doc(postPath, nil)}),
			"created event without a value"},
		{"deleted without oldValue", func(t *testing.T, e *event.Event) {
			e.SetType(typeDeleted)
			withData(&fd.DocumentEventData{Value: doc(postPath, nil)})(t, e)
		}, "deleted event without an oldValue"},
		{"updated without oldValue", func(t *testing.T, e *event.Event) {
			e.SetType(typeUpdated + authSuffix)
		}, "updated event without both value and oldValue"},
		{"written without either", func(t *testing.T, e *event.Event) {
			e.SetType(typeWritten)
			withData(&fd.DocumentEventData{UpdateMask: &fd.DocumentMask{FieldPaths: []string{"a"}}})(t, e)
		}, "written event without value or oldValue"},
		{"value of another document", createdWith(dbPrefix+"users/u1/posts/p2", nil),
			`value name "projects/demo-x/databases/(default)/documents/users/u1/posts/p2" is not the subject's document "users/u1/posts/p1"`},
		{"value without name", createdWith("", nil), "value has no name"},
		{"oldValue of another document", withData(&fd.DocumentEventData{
			Value: doc(postPath, nil), OldValue: doc("users/u9", nil),
		}), "oldValue name"},
		{"field without a type", createdWith(dbPrefix+postPath, map[string]*fd.Value{"a": mapV(map[string]*fd.Value{"b c": {}})}),
			`value field a."b c": value has no type`},
		{"timestamp out of range", createdWith(dbPrefix+postPath, map[string]*fd.Value{
			"at": arrV(intV(1), &fd.Value{ValueType: &fd.Value_TimestampValue{TimestampValue: &timestamppb.Timestamp{Seconds: 1 << 60}}}),
		}), "value field at[1]: timestamp out of range (seconds 1152921504606846976, nanos 0)"},
		{"reference to a collection", createdWith(dbPrefix+postPath, map[string]*fd.Value{"r": refV(dbPrefix + "users")}),
			`value field r: reference "projects/demo-x/databases/(default)/documents/users": odd number of segments`},
		{"reference that is not a resource name", createdWith(dbPrefix+postPath, map[string]*fd.Value{"r": refV("users/u1")}),
			`value field r: reference "users/u1" is not projects/P/databases/D/documents/<path>`},
		{"createTime out of range", func(t *testing.T, e *event.Event) {
			d := doc(postPath, nil)
			d.CreateTime = &timestamppb.Timestamp{Nanos: -1}
			withData(&fd.DocumentEventData{Value: d})(t, e)
		}, "value createTime: timestamp out of range (seconds 0, nanos -1)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEvent(t, typeCreated, "application/protobuf", created(t))
			tt.mutate(t, &e)
			got, err := fe.Decode(e)
			if err == nil {
				t.Fatalf("Decode = %+v, want an error", got)
			}
			if !errors.Is(err, fe.ErrMalformed) {
				t.Errorf("error %q does not wrap ErrMalformed", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
			if got != nil {
				t.Errorf("Decode returned %+v with its error", got)
			}
		})
	}
}

func TestDecodeContentTypes(t *testing.T) {
	pb := protoBytes(t, dataFor(typeCreated))
	js := jsonBytes(t, dataFor(typeCreated))
	tests := []struct {
		contentType string
		body        []byte
	}{
		{"application/protobuf", pb},
		{"", pb},
		{"APPLICATION/PROTOBUF", pb},
		{"application/x-protobuf", pb},
		{"application/protobuf; proto=google.events.cloud.firestore.v1.DocumentEventData", pb},
		{"application/json", js},
		{"application/json; charset=utf-8", js},
		{"application/json;charset=UTF-8", js},
	}
	for _, tt := range tests {
		t.Run(tt.contentType, func(t *testing.T) {
			got, err := fe.Decode(newEvent(t, typeCreated, tt.contentType, tt.body))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if title := got.After.Data()["title"]; title != "new" {
				t.Errorf("title = %v, want new", title)
			}
		})
	}
}

// stringer is an extension value of a type the CloudEvents SDK does not know.
type stringer struct{ s string }

func (s stringer) String() string { return s.s }

func TestDecodeProjectAndDatabase(t *testing.T) {
	tests := []struct {
		name                      string
		source                    string
		ext                       map[string]any // nil deletes the extension
		valueName                 string
		wantProject, wantDatabase string
	}{
		{"extensions win", source, map[string]any{"project": "p-ext", "database": "db-ext"}, "",
			"p-ext", "db-ext"},
		{"extension of another type", source, map[string]any{"project": stringer{"p-str"}, "database": int32(7)}, "",
			"p-str", "7"},
		{"from the source", source, map[string]any{"project": nil, "database": nil}, "",
			"demo-x", "(default)"},
		{"from the emulator's doubled source", "//firestore.googleapis.com/projects/projects/demo-y/databases/(default)",
			map[string]any{"project": nil, "database": nil}, "", "demo-y", "(default)"},
		{"from the document name", "//somewhere/else", map[string]any{"project": nil, "database": nil},
			"projects/p-doc/databases/db-doc/documents/" + postPath, "p-doc", "db-doc"},
		{"nowhere", "//somewhere/else", map[string]any{"project": nil, "database": nil},
			"/documents/" + postPath, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := dataFor(typeCreated)
			if tt.valueName != "" {
				d.Value.Name = tt.valueName
			}
			e := newEvent(t, typeCreated, "application/protobuf", protoBytes(t, d))
			e.SetSource(tt.source)
			ext := e.Context.(*event.EventContextV1).Extensions
			for k, v := range tt.ext {
				if v == nil {
					delete(ext, k)
				} else {
					ext[k] = v
				}
			}
			got, err := fe.Decode(e)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if got.Project != tt.wantProject || got.Database != tt.wantDatabase {
				t.Errorf("Project, Database = %q, %q; want %q, %q", got.Project, got.Database, tt.wantProject, tt.wantDatabase)
			}
		})
	}
}

func TestDecodeWithoutDocumentExtension(t *testing.T) {
	e := newEvent(t, typeDeleted, "application/protobuf", protoBytes(t, dataFor(typeDeleted)))
	delete(e.Context.(*event.EventContextV1).Extensions, "document")
	got, err := fe.Decode(e)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if got.Document != postPath || got.After != nil || got.Before.Data()["title"] != "old" {
		t.Errorf("Document, After, Before = %q, %v, %v", got.Document, got.After, got.Before.Data())
	}
}
