package firestoreevent_test

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	fd "github.com/googleapis/google-cloudevents-go/cloud/firestoredata"
	"google.golang.org/genproto/googleapis/type/latlng"

	fe "github.com/fireonce/fireonce/shared/firestoreevent"
)

// decodeFields sends fields as the new document of a created event, encoded
// as contentType, and returns the decoded document.
func decodeFields(t *testing.T, contentType string, fields map[string]*fd.Value) *fe.Document {
	t.Helper()
	data := &fd.DocumentEventData{Value: doc(postPath, fields)}
	body := protoBytes(t, data)
	if contentType == "application/json" {
		body = jsonBytes(t, data)
	}
	ev, err := fe.Decode(newEvent(t, typeCreated, contentType, body))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return ev.After
}

var (
	when     = time.Date(2024, 2, 29, 23, 59, 59, 999999999, time.UTC)
	userRef  = dbPrefix + "users/u2"
	userRefV = fe.Reference{Name: userRef, Path: "users/u2"}
)

// TestRoundTrip builds every value type with the protobuf types, sends it
// through Decode as protobuf and as JSON, and reads it back with Data and
// with DataTo into the natural Go type.
func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		value *fd.Value
		want  any // from Data
		dst   any // a pointer DataTo fills
		into  any // what dst then points to
	}{
		{"null", nullV(), nil, new(*string), (*string)(nil)},
		{"true", boolV(true), true, new(bool), true},
		{"false", boolV(false), false, new(bool), false},
		{"int", intV(42), int64(42), new(int), 42},
		{"int min", intV(math.MinInt64), int64(math.MinInt64), new(int64), int64(math.MinInt64)},
		{"int max", intV(math.MaxInt64), int64(math.MaxInt64), new(int64), int64(math.MaxInt64)},
		{"double", dblV(-2.5), -2.5, new(float64), -2.5},
		{"double infinity", dblV(math.Inf(1)), math.Inf(1), new(float64), math.Inf(1)},
		{"double NaN", dblV(math.NaN()), math.NaN(), new(float64), math.NaN()},
		{"timestamp", timeV(when), when, new(time.Time), when},
		{"timestamp before 1970", timeV(time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)), time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
			new(time.Time), time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"string", strV("héllo, 世界"), "héllo, 世界", new(string), "héllo, 世界"},
		{"empty string", strV(""), "", new(string), ""},
		{"bytes", bytesV([]byte{0, 1, 0xff}), []byte{0, 1, 0xff}, new([]byte), []byte{0, 1, 0xff}},
		{"reference", refV(userRef), userRefV, new(fe.Reference), userRefV},
		{"reference in a subcollection", refV(dbPrefix + "users/u2/posts/p9"),
			fe.Reference{Name: dbPrefix + "users/u2/posts/p9", Path: "users/u2/posts/p9"},
			new(*fe.Reference), &fe.Reference{Name: dbPrefix + "users/u2/posts/p9", Path: "users/u2/posts/p9"}},
		{"geo point", geoV(48.8584, 2.2945), &latlng.LatLng{Latitude: 48.8584, Longitude: 2.2945},
			new(*latlng.LatLng), &latlng.LatLng{Latitude: 48.8584, Longitude: 2.2945}},
		{"array", arrV(intV(1), strV("two"), nullV(), arrV(boolV(true))), []any{int64(1), "two", nil, []any{true}},
			new([]any), []any{int64(1), "two", nil, []any{true}}},
		{"typed array", arrV(strV("a"), strV("b")), []any{"a", "b"}, new([]string), []string{"a", "b"}},
		{"empty array", arrV(), []any{}, new([]int), []int{}},
		{"map", mapV(map[string]*fd.Value{"a": intV(1), "b": mapV(map[string]*fd.Value{"c": geoV(1, 2)})}),
			map[string]any{"a": int64(1), "b": map[string]any{"c": &latlng.LatLng{Latitude: 1, Longitude: 2}}},
			new(map[string]any), map[string]any{"a": int64(1), "b": map[string]any{"c": &latlng.LatLng{Latitude: 1, Longitude: 2}}}},
		{"typed map", mapV(map[string]*fd.Value{"x": dblV(1.5), "y": intV(2)}), map[string]any{"x": 1.5, "y": int64(2)},
			new(map[string]float64), map[string]float64{"x": 1.5, "y": 2}},
		{"empty map", mapV(nil), map[string]any{}, new(map[string]string), map[string]string{}},
	}
	for _, ct := range []string{"application/protobuf", "application/json"} {
		for _, tt := range tests {
			t.Run(ct+"/"+tt.name, func(t *testing.T) {
				d := decodeFields(t, ct, map[string]*fd.Value{"f": tt.value})
				data := d.Data()
				if got, ok := data["f"]; !ok || !equal(got, tt.want) {
					t.Errorf("Data()[f] = %#v, want %#v", got, tt.want)
				}

				// DataTo into a struct field of the destination's type.
				st := reflect.New(reflect.StructOf([]reflect.StructField{{
					Name: "F", Type: reflect.TypeOf(tt.dst).Elem(), Tag: `firestore:"f"`,
				}}))
				if err := d.DataTo(st.Interface()); err != nil {
					t.Fatalf("DataTo(struct): %v", err)
				}
				if got := st.Elem().Field(0).Interface(); !equal(got, tt.into) {
					t.Errorf("DataTo(struct).F = %#v, want %#v", got, tt.into)
				}

				// DataTo into a map[string]any gives what Data gives.
				var m map[string]any
				if err := d.DataTo(&m); err != nil {
					t.Fatalf("DataTo(map): %v", err)
				}
				if !equal(m, data) {
					t.Errorf("DataTo(map) = %#v, want %#v", m, data)
				}
			})
		}
	}
}

type Address struct {
	City string `firestore:"city"`
	Zip  *string
}

type Base struct {
	Kind    string `firestore:"kind"`
	Version int    `firestore:"version"`
}

type profile struct {
	Base                              // promoted fields
	Name      string                  `firestore:"displayName"`
	Age       int8                    `firestore:"age,omitempty"`
	Score     float32                 `firestore:"score"`
	Count     uint16                  `firestore:"count"`
	Ratio     int                     `firestore:"ratio"` // from a whole double
	Secret    string                  `firestore:"-"`
	Untouched string                  `firestore:"untouched"`
	Home      Address                 `firestore:"home"`
	Work      *Address                `firestore:"work"`
	Nickname  *string                 `firestore:"nickname"`
	Tags      []string                `firestore:"tags"`
	Pair      [3]int                  `firestore:"pair"`
	Scores    map[string]int          `firestore:"scores"`
	Joined    time.Time               `firestore:"joined"`
	Where     *latlng.LatLng          `firestore:"where"`
	Friend    fe.Reference            `firestore:"friend"`
	Avatar    []byte                  `firestore:"avatar"`
	Extra     any                     `firestore:"extra"`
	Nested    map[string]*Address     `firestore:"nested"`
	Lower     string                  // matched case-insensitively by "LOWER"
	Exact     string                  `firestore:"Exact"`
	Many      []map[string]any        `firestore:"many"`
	Deep      [][]int                 `firestore:"deep"`
	ByName    map[profileKey]struct{} `firestore:"byName"`
	unexp     string
}

type profileKey string

func TestDataToStruct(t *testing.T) {
	d := decodeFields(t, "application/protobuf", map[string]*fd.Value{
		"kind":        strV("user"),
		"version":     intV(3),
		"displayName": strV("Ada"),
		"age":         intV(36),
		"score":       intV(7),
		"count":       intV(65535),
		"ratio":       dblV(4),
		"Secret":      strV("leak"),
		"-":           strV("leak"),
		"home":        mapV(map[string]*fd.Value{"city": strV("London"), "Zip": strV("N1")}),
		"work":        mapV(map[string]*fd.Value{"city": strV("Cambridge"), "Zip": nullV()}),
		"nickname":    nullV(),
		"tags":        arrV(strV("math"), strV("poetry")),
		"pair":        arrV(intV(1), intV(2)),
		"scores":      mapV(map[string]*fd.Value{"a": intV(1), "b": dblV(2)}),
		"joined":      timeV(when),
		"where":       geoV(51.5, -0.1),
		"friend":      refV(userRef),
		"avatar":      bytesV([]byte("png")),
		"extra":       arrV(intV(1), mapV(map[string]*fd.Value{"k": boolV(true)})),
		"nested":      mapV(map[string]*fd.Value{"x": mapV(map[string]*fd.Value{"city": strV("Paris")}), "y": nullV()}),
		"LOWER":       strV("case-insensitive"),
		"exact":       strV("loses"),
		"Exact":       strV("wins"),
		"many":        arrV(mapV(map[string]*fd.Value{"n": intV(1)})),
		"deep":        arrV(arrV(intV(1), intV(2)), arrV()),
		"byName":      mapV(map[string]*fd.Value{"k": mapV(nil)}),
		"unexp":       strV("leak"),
		"unknown":     strV("ignored"),
	})
	nick := "old"
	got := profile{Untouched: "kept", Nickname: &nick, Secret: "mine", Pair: [3]int{9, 9, 9}}
	if err := d.DataTo(&got); err != nil {
		t.Fatalf("DataTo: %v", err)
	}
	want := profile{
		Base: Base{Kind: "user", Version: 3}, Name: "Ada", Age: 36, Score: 7, Count: 65535, Ratio: 4,
		Secret: "mine", Untouched: "kept",
		Home: Address{City: "London", Zip: ptr("N1")}, Work: &Address{City: "Cambridge"},
		Tags: []string{"math", "poetry"}, Pair: [3]int{1, 2, 0}, Scores: map[string]int{"a": 1, "b": 2},
		Joined: when, Where: &latlng.LatLng{Latitude: 51.5, Longitude: -0.1}, Friend: userRefV,
		Avatar: []byte("png"), Extra: []any{int64(1), map[string]any{"k": true}},
		Nested: map[string]*Address{"x": {City: "Paris"}, "y": nil}, Lower: "case-insensitive", Exact: "wins",
		Many: []map[string]any{{"n": int64(1)}}, Deep: [][]int{{1, 2}, {}},
		ByName: map[profileKey]struct{}{"k": {}},
	}
	if !equal(got.Where, want.Where) {
		t.Errorf("Where = %v, want %v", got.Where, want.Where)
	}
	got.Where, want.Where = nil, nil
	if got.unexp != "" {
		t.Errorf("DataTo set an unexported field to %q", got.unexp)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DataTo =\n%+v\nwant\n%+v", got, want)
	}
}

func ptr[T any](v T) *T { return &v }

type embedsPointer struct {
	*Base
	Name string `firestore:"name"`
}

type conflict struct {
	A struct {
		X string `firestore:"x"`
	}
	B1 `firestore:""`
	B2
}

type B1 struct{ Dup, Only1 string }
type B2 struct{ Dup, Only2 string }

func TestDataToEmbedded(t *testing.T) {
	d := decodeFields(t, "application/protobuf", map[string]*fd.Value{
		"kind": strV("k"), "name": strV("n"), "Dup": strV("hidden"), "Only1": strV("1"), "Only2": strV("2"),
	})
	var ep embedsPointer
	if err := d.DataTo(&ep); err != nil {
		t.Fatalf("DataTo: %v", err)
	}
	if ep.Base == nil || ep.Kind != "k" || ep.Name != "n" {
		t.Errorf("DataTo(embedded pointer) = %+v, Base %+v", ep, ep.Base)
	}
	var c conflict
	if err := d.DataTo(&c); err != nil {
		t.Fatalf("DataTo: %v", err)
	}
	if c.B1.Dup != "" || c.B2.Dup != "" || c.Only1 != "1" || c.Only2 != "2" {
		t.Errorf("DataTo(conflicting embedded) = %+v; an ambiguous name must set neither", c)
	}
}

func TestDataToErrors(t *testing.T) {
	tests := []struct {
		name   string
		fields map[string]*fd.Value
		dst    any
		want   string
	}{
		{"string into int", map[string]*fd.Value{"age": strV("x")}, &struct {
			Age int `firestore:"age"`
		}{}, "field age: cannot store a string in int"},
		{"overflow int8", map[string]*fd.Value{"age": intV(300)}, &struct {
			Age int8 `firestore:"age"`
		}{}, "field age: 300 does not fit in int8"},
		{"negative into uint", map[string]*fd.Value{"n": intV(-1)}, &struct{ N uint }{}, "field n: -1 does not fit in uint"},
		{"fraction into int", map[string]*fd.Value{"n": dblV(1.5)}, &struct{ N int }{}, "field n: 1.5 does not fit in int"},
		{"huge double into int64", map[string]*fd.Value{"n": dblV(1e19)}, &struct{ N int64 }{}, "does not fit in int64"},
		{"NaN into int", map[string]*fd.Value{"n": dblV(math.NaN())}, &struct{ N int }{}, "NaN does not fit in int"},
		{"inexact int into float64", map[string]*fd.Value{"n": intV(1<<53 + 1)}, &struct{ N float64 }{}, "9007199254740993 does not fit in float64"},
		{"overflow float32", map[string]*fd.Value{"n": dblV(1e300)}, &struct{ N float32 }{}, "does not fit in float32"},
		{"map into string", map[string]*fd.Value{"s": mapV(nil)}, &struct{ S string }{}, "field s: cannot store a map in string"},
		{"string into time", map[string]*fd.Value{"t": strV("2024")}, &struct{ T time.Time }{}, "cannot store a string in time.Time"},
		{"string into reference", map[string]*fd.Value{"r": strV("users/u1")}, &struct{ R fe.Reference }{}, "cannot store a string in firestoreevent.Reference"},
		{"map into geo point", map[string]*fd.Value{"g": mapV(nil)}, &struct{ G *latlng.LatLng }{}, "cannot store a map in *latlng.LatLng"},
		{"nested path", map[string]*fd.Value{"author": mapV(map[string]*fd.Value{"tags": arrV(strV("a"), intV(2))})},
			&struct {
				Author struct{ Tags []string } `firestore:"author"`
			}{}, "field author.tags[1]: cannot store an integer in string"},
		{"odd key in path", map[string]*fd.Value{"m": mapV(map[string]*fd.Value{"a.b": boolV(true)})}, &map[string]map[string]int{},
			`field m."a.b": cannot store a bool in int`},
		{"array too long", map[string]*fd.Value{"p": arrV(intV(1), intV(2), intV(3))}, &struct{ P [2]int }{}, "field p: 3 elements do not fit in [2]int"},
		{"map with int keys", map[string]*fd.Value{"m": mapV(nil)}, &struct{ M map[int]bool }{}, "field m: cannot store a map in map[int]bool: the key is not a string"},
		{"non-empty interface", map[string]*fd.Value{"e": strV("x")}, &struct{ E error }{}, "cannot store a string in error"},
		{"channel", map[string]*fd.Value{"c": intV(1)}, &struct{ C chan int }{}, "cannot store an integer in chan int"},
		{"document into int", map[string]*fd.Value{}, new(int), "cannot store a map in int"},
		{"not a pointer", nil, struct{}{}, "DataTo needs a non-nil pointer, got struct {}"},
		{"nil pointer", nil, (*struct{})(nil), "DataTo needs a non-nil pointer, got *struct {}"},
		{"nil", nil, nil, "DataTo needs a non-nil pointer, got <nil>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := decodeFields(t, "application/protobuf", tt.fields).DataTo(tt.dst)
			if !errors.Is(err, fe.ErrDataTo) {
				t.Fatalf("DataTo = %v, want an error wrapping ErrDataTo", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
		})
	}
}

func TestAbsentDocument(t *testing.T) {
	ev, err := fe.Decode(newEvent(t, typeCreated, "application/protobuf", protoBytes(t, dataFor(typeCreated))))
	if err != nil {
		t.Fatal(err)
	}
	if ev.Before != nil {
		t.Fatalf("Before of a create = %+v, want nil", ev.Before)
	}
	if m := ev.Before.Data(); m != nil {
		t.Errorf("nil Document's Data() = %v, want nil", m)
	}
	var v struct{ Title string }
	if err := ev.Before.DataTo(&v); !errors.Is(err, fe.ErrDataTo) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("nil Document's DataTo = %v, want an error saying it does not exist", err)
	}
}

func TestDataIsACopy(t *testing.T) {
	d := decodeFields(t, "application/protobuf", map[string]*fd.Value{
		"b": bytesV([]byte("abc")), "m": mapV(map[string]*fd.Value{"k": intV(1)}), "g": geoV(1, 2),
	})
	m := d.Data()
	m["b"].([]byte)[0] = 'X'
	m["m"].(map[string]any)["k"] = "changed"
	m["g"].(*latlng.LatLng).Latitude = 99
	var s struct {
		B []byte
		G *latlng.LatLng
	}
	if err := d.DataTo(&s); err != nil {
		t.Fatal(err)
	}
	s.B[1] = 'Y'
	again := d.Data()
	if string(again["b"].([]byte)) != "abc" || again["m"].(map[string]any)["k"] != int64(1) || again["g"].(*latlng.LatLng).GetLatitude() != 1 {
		t.Errorf("Data() after modifying earlier results = %v", again)
	}
}
