package firestoreevent

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/googleapis/google-cloudevents-go/cloud/firestoredata"
	"google.golang.org/genproto/googleapis/type/latlng"
)

// ErrDataTo is wrapped by every error DataTo returns. Such an error is
// permanent: the document does not fit the destination.
var ErrDataTo = errors.New("firestoreevent: cannot decode document data")

var (
	typeOfTime      = reflect.TypeFor[time.Time]()
	typeOfLatLng    = reflect.TypeFor[*latlng.LatLng]()
	typeOfReference = reflect.TypeFor[Reference]()
)

// DataTo stores the document's fields in the value v points to, which is
// usually a struct or a map[string]T, the way
// cloud.google.com/go/firestore's DocumentSnapshot.DataTo does:
//
//   - a struct field is named by its `firestore:"name"` tag or else its Go
//     name; `firestore:"-"` skips it; other tag options (omitempty,
//     serverTimestamp) do not matter for reading; an exact name wins over a
//     case-insensitive one; embedded structs' fields are promoted as in
//     encoding/json; fields the document lacks keep their values;
//   - integers and floats convert into any Go integer or float type when the
//     value fits exactly, and overflow is an error;
//   - null sets pointers, maps, slices and interfaces to nil and leaves
//     anything else untouched;
//   - timestamps go into time.Time, geo points into *latlng.LatLng,
//     references into Reference, bytes into []byte, arrays into slices or
//     arrays, maps into maps with string keys or structs, and anything into
//     an empty interface (as Data converts it).
//
// A type mismatch is an error that names the field. DataTo of a nil
// Document (the Before of a create, the After of a delete) is an error.
func (d *Document) DataTo(v any) error {
	if d == nil {
		return fmt.Errorf("%w: the document does not exist", ErrDataTo)
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("%w: DataTo needs a non-nil pointer, got %T", ErrDataTo, v)
	}
	fields := d.fields
	if fields == nil {
		fields = map[string]*firestoredata.Value{}
	}
	src := &firestoredata.Value{ValueType: &firestoredata.Value_MapValue{MapValue: &firestoredata.MapValue{Fields: fields}}}
	if err := setValue(rv.Elem(), src, ""); err != nil {
		return fmt.Errorf("%w: %v", ErrDataTo, err)
	}
	return nil
}

// setValue stores src in dst, a settable value; path names src in errors.
func setValue(dst reflect.Value, src *firestoredata.Value, path string) error {
	mismatch := func() error {
		return fieldErr(path, "cannot store %s in %s", typeName(src), dst.Type())
	}
	overflow := func(x any) error {
		return fieldErr(path, "%v does not fit in %s", x, dst.Type())
	}

	if _, ok := src.GetValueType().(*firestoredata.Value_NullValue); ok {
		switch dst.Kind() {
		case reflect.Interface, reflect.Pointer, reflect.Map, reflect.Slice:
			dst.SetZero()
		}
		return nil
	}

	switch dst.Type() {
	case typeOfTime:
		x, ok := src.GetValueType().(*firestoredata.Value_TimestampValue)
		if !ok {
			return mismatch()
		}
		dst.Set(reflect.ValueOf(x.TimestampValue.AsTime()))
		return nil
	case typeOfLatLng:
		x, ok := src.GetValueType().(*firestoredata.Value_GeoPointValue)
		if !ok {
			return mismatch()
		}
		dst.Set(reflect.ValueOf(newLatLng(x.GeoPointValue)))
		return nil
	case typeOfReference:
		x, ok := src.GetValueType().(*firestoredata.Value_ReferenceValue)
		if !ok {
			return mismatch()
		}
		r, err := parseReference(x.ReferenceValue)
		if err != nil {
			return fieldErr(path, "%v", err)
		}
		dst.Set(reflect.ValueOf(r))
		return nil
	}

	switch dst.Kind() {
	case reflect.Bool:
		x, ok := src.GetValueType().(*firestoredata.Value_BooleanValue)
		if !ok {
			return mismatch()
		}
		dst.SetBool(x.BooleanValue)

	case reflect.String:
		x, ok := src.GetValueType().(*firestoredata.Value_StringValue)
		if !ok {
			return mismatch()
		}
		dst.SetString(x.StringValue)

	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		var i int64
		switch x := src.GetValueType().(type) {
		case *firestoredata.Value_IntegerValue:
			i = x.IntegerValue
		case *firestoredata.Value_DoubleValue:
			f := x.DoubleValue
			if f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
				return overflow(f)
			}
			i = int64(f)
		default:
			return mismatch()
		}
		if dst.OverflowInt(i) {
			return overflow(i)
		}
		dst.SetInt(i)

	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		var u uint64
		switch x := src.GetValueType().(type) {
		case *firestoredata.Value_IntegerValue:
			if x.IntegerValue < 0 {
				return overflow(x.IntegerValue)
			}
			u = uint64(x.IntegerValue)
		case *firestoredata.Value_DoubleValue:
			f := x.DoubleValue
			if f != math.Trunc(f) || f < 0 || f >= math.MaxUint64 {
				return overflow(f)
			}
			u = uint64(f)
		default:
			return mismatch()
		}
		if dst.OverflowUint(u) {
			return overflow(u)
		}
		dst.SetUint(u)

	case reflect.Float32, reflect.Float64:
		var f float64
		switch x := src.GetValueType().(type) {
		case *firestoredata.Value_DoubleValue:
			f = x.DoubleValue
		case *firestoredata.Value_IntegerValue:
			f = float64(x.IntegerValue)
			if f >= math.MaxInt64 || int64(f) != x.IntegerValue {
				return overflow(x.IntegerValue)
			}
		default:
			return mismatch()
		}
		if dst.OverflowFloat(f) {
			return overflow(f)
		}
		dst.SetFloat(f)

	case reflect.Slice:
		if b, ok := src.GetValueType().(*firestoredata.Value_BytesValue); ok && dst.Type().Elem().Kind() == reflect.Uint8 {
			dst.SetBytes(slices.Clone(b.BytesValue))
			return nil
		}
		x, ok := src.GetValueType().(*firestoredata.Value_ArrayValue)
		if !ok {
			return mismatch()
		}
		vals := x.ArrayValue.GetValues()
		if dst.IsNil() || dst.Cap() < len(vals) {
			dst.Set(reflect.MakeSlice(dst.Type(), len(vals), len(vals)))
		} else {
			dst.SetLen(len(vals))
		}
		for i, e := range vals {
			if err := setValue(dst.Index(i), e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}

	case reflect.Array:
		x, ok := src.GetValueType().(*firestoredata.Value_ArrayValue)
		if !ok {
			return mismatch()
		}
		vals := x.ArrayValue.GetValues()
		if len(vals) > dst.Len() {
			return fieldErr(path, "%d elements do not fit in %s", len(vals), dst.Type())
		}
		for i := range dst.Len() {
			if i >= len(vals) {
				dst.Index(i).SetZero()
				continue
			}
			if err := setValue(dst.Index(i), vals[i], fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}

	case reflect.Map:
		x, ok := src.GetValueType().(*firestoredata.Value_MapValue)
		if !ok {
			return mismatch()
		}
		return setMap(dst, x.MapValue.GetFields(), path)

	case reflect.Struct:
		x, ok := src.GetValueType().(*firestoredata.Value_MapValue)
		if !ok {
			return mismatch()
		}
		return setStruct(dst, x.MapValue.GetFields(), path)

	case reflect.Pointer:
		if dst.IsNil() {
			dst.Set(reflect.New(dst.Type().Elem()))
		}
		return setValue(dst.Elem(), src, path)

	case reflect.Interface:
		if dst.NumMethod() != 0 {
			return mismatch()
		}
		// Like encoding/json: fill what a non-nil pointer points to.
		if !dst.IsNil() && dst.Elem().Kind() == reflect.Pointer && !dst.Elem().IsNil() {
			return setValue(dst.Elem().Elem(), src, path)
		}
		if g := toGo(src); g != nil {
			dst.Set(reflect.ValueOf(g))
		} else {
			dst.SetZero()
		}

	default:
		return mismatch()
	}
	return nil
}

// fieldErr prefixes a DataTo error with the field it concerns, if any.
func fieldErr(path, format string, args ...any) error {
	if path != "" {
		format = "field " + path + ": " + format
	}
	return fmt.Errorf(format, args...)
}

func setMap(dst reflect.Value, fields map[string]*firestoredata.Value, path string) error {
	t := dst.Type()
	if t.Key().Kind() != reflect.String {
		return fieldErr(path, "cannot store a map in %s: the key is not a string", t)
	}
	if dst.IsNil() {
		dst.Set(reflect.MakeMapWithSize(t, len(fields)))
	}
	for _, k := range sortedKeys(fields) {
		el := reflect.New(t.Elem()).Elem()
		if err := setValue(el, fields[k], fieldPath(path, k)); err != nil {
			return err
		}
		dst.SetMapIndex(reflect.ValueOf(k).Convert(t.Key()), el)
	}
	return nil
}

func setStruct(dst reflect.Value, fields map[string]*firestoredata.Value, path string) error {
	fs := structFields(dst.Type())
	type match struct {
		key   string
		exact bool
	}
	matched := make(map[int]match)
	for _, k := range sortedKeys(fields) {
		i := slices.IndexFunc(fs, func(f structField) bool { return f.name == k })
		exact := i >= 0
		if !exact {
			i = slices.IndexFunc(fs, func(f structField) bool { return strings.EqualFold(f.name, k) })
		}
		if i < 0 {
			continue
		}
		if prev, ok := matched[i]; ok && (prev.exact || !exact) {
			continue
		}
		matched[i] = match{k, exact}
	}
	for i, f := range fs {
		m, ok := matched[i]
		if !ok {
			continue
		}
		fv, err := fieldByIndexAlloc(dst, f.index)
		if err != nil {
			return fieldErr(fieldPath(path, m.key), "%v", err)
		}
		if err := setValue(fv, fields[m.key], fieldPath(path, m.key)); err != nil {
			return err
		}
	}
	return nil
}

// fieldByIndexAlloc is reflect.Value.FieldByIndex allocating nil embedded
// struct pointers on the way.
func fieldByIndexAlloc(v reflect.Value, index []int) (reflect.Value, error) {
	for n, i := range index {
		if n > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				if !v.CanSet() {
					return reflect.Value{}, fmt.Errorf("cannot allocate embedded %s", v.Type())
				}
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(i)
	}
	return v, nil
}

func sortedKeys(m map[string]*firestoredata.Value) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

type structField struct {
	name   string
	index  []int
	tagged bool
}

var fieldCache sync.Map // reflect.Type -> []structField

// structFields lists the fields of struct type t that DataTo can set, with
// the visibility rules of encoding/json: a shallower field hides a deeper
// one of the same name; at the same depth a tagged field wins, and two of a
// kind hide each other.
func structFields(t reflect.Type) []structField {
	if fs, ok := fieldCache.Load(t); ok {
		return fs.([]structField)
	}
	type queued struct {
		t     reflect.Type
		index []int
	}
	var out []structField
	taken := map[string]bool{}
	visited := map[reflect.Type]bool{}
	for next := []queued{{t: t}}; len(next) > 0; {
		current := next
		next = nil
		var level []structField
		for _, q := range current {
			if visited[q.t] {
				continue
			}
			visited[q.t] = true
			for i := range q.t.NumField() {
				sf := q.t.Field(i)
				tag := sf.Tag.Get("firestore")
				if tag == "-" {
					continue
				}
				name, _, _ := strings.Cut(tag, ",")
				tagged := name != ""
				index := append(slices.Clone(q.index), i)
				ft := sf.Type
				if sf.Anonymous && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if sf.Anonymous && name == "" && ft.Kind() == reflect.Struct {
					if sf.IsExported() || sf.Type.Kind() != reflect.Pointer {
						next = append(next, queued{ft, index})
					}
					continue
				}
				if !sf.IsExported() {
					continue
				}
				if name == "" {
					name = sf.Name
				}
				level = append(level, structField{name: name, index: index, tagged: tagged})
			}
		}
		for _, f := range level {
			if taken[f.name] {
				continue
			}
			var rivals []structField
			for _, g := range level {
				if g.name == f.name {
					rivals = append(rivals, g)
				}
			}
			taken[f.name] = true
			if len(rivals) == 1 {
				out = append(out, f)
				continue
			}
			var tagged []structField
			for _, g := range rivals {
				if g.tagged {
					tagged = append(tagged, g)
				}
			}
			if len(tagged) == 1 {
				out = append(out, tagged[0])
			}
		}
	}
	fs, _ := fieldCache.LoadOrStore(t, out)
	return fs.([]structField)
}

func typeName(v *firestoredata.Value) string {
	switch v.GetValueType().(type) {
	case *firestoredata.Value_NullValue:
		return "null"
	case *firestoredata.Value_BooleanValue:
		return "a bool"
	case *firestoredata.Value_IntegerValue:
		return "an integer"
	case *firestoredata.Value_DoubleValue:
		return "a double"
	case *firestoredata.Value_TimestampValue:
		return "a timestamp"
	case *firestoredata.Value_StringValue:
		return "a string"
	case *firestoredata.Value_BytesValue:
		return "bytes"
	case *firestoredata.Value_ReferenceValue:
		return "a reference"
	case *firestoredata.Value_GeoPointValue:
		return "a geo point"
	case *firestoredata.Value_ArrayValue:
		return "an array"
	case *firestoredata.Value_MapValue:
		return "a map"
	}
	return "a value without type"
}
