package emulatorapi

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ServerTime, as a field value in a write, sets the field to the commit's
// request time (a setToServerValue: REQUEST_TIME transform). It is how a
// client satisfies a rule such as request.resource.data.createdAt ==
// request.time. It is allowed in top-level fields and nested maps, not in
// arrays.
var ServerTime = serverTime{}

type serverTime struct{}

// errServerTimeInArray is returned when ServerTime is nested in a slice,
// which Firestore transforms cannot address.
var errServerTimeInArray = errors.New("emulatorapi: ServerTime is not allowed inside an array")

// EncodeValue returns v as a Firestore REST JSON value, e.g.
// {"integerValue":"3"}. Supported: nil, bool, string, signed and unsigned
// integers (to int64), float32/64, time.Time (timestampValue), []byte
// (bytesValue), maps with string keys (mapValue) and slices or arrays
// (arrayValue). ServerTime cannot be encoded as a value; write it as a field.
func EncodeValue(v any) (map[string]any, error) {
	return encode(reflect.ValueOf(v))
}

func encode(v reflect.Value) (map[string]any, error) {
	if !v.IsValid() {
		return map[string]any{"nullValue": nil}, nil
	}
	switch x := v.Interface().(type) {
	case time.Time:
		return map[string]any{"timestampValue": x.UTC().Format(time.RFC3339Nano)}, nil
	case []byte:
		return map[string]any{"bytesValue": base64.StdEncoding.EncodeToString(x)}, nil
	case serverTime:
		return nil, errors.New("emulatorapi: ServerTime is a write transform, not a value")
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return map[string]any{"nullValue": nil}, nil
		}
		return encode(v.Elem())
	case reflect.Bool:
		return map[string]any{"booleanValue": v.Bool()}, nil
	case reflect.String:
		return map[string]any{"stringValue": v.String()}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return map[string]any{"integerValue": strconv.FormatInt(v.Int(), 10)}, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if v.Uint() > math.MaxInt64 {
			return nil, fmt.Errorf("emulatorapi: %d overflows int64", v.Uint())
		}
		return map[string]any{"integerValue": strconv.FormatUint(v.Uint(), 10)}, nil
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		// JSON has no NaN or infinities; the REST API spells them as strings.
		switch {
		case math.IsNaN(f):
			return map[string]any{"doubleValue": "NaN"}, nil
		case math.IsInf(f, 1):
			return map[string]any{"doubleValue": "Infinity"}, nil
		case math.IsInf(f, -1):
			return map[string]any{"doubleValue": "-Infinity"}, nil
		}
		return map[string]any{"doubleValue": f}, nil
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return map[string]any{"nullValue": nil}, nil
		}
		vals := make([]any, v.Len())
		for i := range vals {
			if _, ok := v.Index(i).Interface().(serverTime); ok {
				return nil, errServerTimeInArray
			}
			e, err := encode(v.Index(i))
			if err != nil {
				return nil, err
			}
			vals[i] = e
		}
		return map[string]any{"arrayValue": map[string]any{"values": vals}}, nil
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return nil, fmt.Errorf("emulatorapi: map key type %s is not string", v.Type().Key())
		}
		if v.IsNil() {
			return map[string]any{"nullValue": nil}, nil
		}
		fields := make(map[string]any, v.Len())
		for it := v.MapRange(); it.Next(); {
			e, err := encode(it.Value())
			if err != nil {
				return nil, fmt.Errorf("%q: %w", it.Key().String(), err)
			}
			fields[it.Key().String()] = e
		}
		return map[string]any{"mapValue": map[string]any{"fields": fields}}, nil
	}
	return nil, fmt.Errorf("emulatorapi: cannot encode %s", v.Type())
}

// encodeFields encodes a document's fields and pulls ServerTime values out
// as transform field paths (sorted, for stable requests).
func encodeFields(fields map[string]any) (map[string]any, []string, error) {
	out := make(map[string]any, len(fields))
	var transforms []string
	if err := encodeFieldsInto(out, &transforms, "", fields); err != nil {
		return nil, nil, err
	}
	sort.Strings(transforms)
	return out, transforms, nil
}

func encodeFieldsInto(out map[string]any, transforms *[]string, prefix string, fields map[string]any) error {
	for k, v := range fields {
		path := prefix + quoteFieldPath(k)
		switch x := v.(type) {
		case serverTime:
			*transforms = append(*transforms, path)
			continue
		case map[string]any:
			if containsServerTime(x) {
				sub := make(map[string]any, len(x))
				if err := encodeFieldsInto(sub, transforms, path+".", x); err != nil {
					return err
				}
				out[k] = map[string]any{"mapValue": map[string]any{"fields": sub}}
				continue
			}
		}
		e, err := EncodeValue(v)
		if err != nil {
			return fmt.Errorf("emulatorapi: field %s: %w", path, err)
		}
		out[k] = e
	}
	return nil
}

func containsServerTime(m map[string]any) bool {
	for _, v := range m {
		switch x := v.(type) {
		case serverTime:
			return true
		case map[string]any:
			if containsServerTime(x) {
				return true
			}
		}
	}
	return false
}

// quoteFieldPath quotes a field name with backticks unless it is a simple
// identifier, as Firestore field paths require.
func quoteFieldPath(name string) string {
	simple := name != ""
	for i, r := range name {
		if !(r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9')) {
			simple = false
			break
		}
	}
	if simple {
		return name
	}
	r := strings.NewReplacer("\\", "\\\\", "`", "\\`")
	return "`" + r.Replace(name) + "`"
}

// DecodeValue turns a Firestore REST JSON value into Go: nil, bool, string,
// int64, float64, time.Time, []byte, map[string]any or []any. References
// and geo points come back as their REST form (string and map).
func DecodeValue(raw json.RawMessage) (any, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	for kind, b := range m {
		switch kind {
		case "nullValue":
			return nil, nil
		case "booleanValue":
			var x bool
			return x, json.Unmarshal(b, &x)
		case "stringValue", "referenceValue":
			var x string
			return x, json.Unmarshal(b, &x)
		case "integerValue":
			var s string
			if err := json.Unmarshal(b, &s); err != nil {
				return nil, err
			}
			return strconv.ParseInt(s, 10, 64)
		case "doubleValue":
			var x any
			if err := json.Unmarshal(b, &x); err != nil {
				return nil, err
			}
			switch x := x.(type) {
			case float64:
				return x, nil
			case string:
				return strconv.ParseFloat(strings.Replace(x, "Infinity", "Inf", 1), 64)
			}
			return nil, fmt.Errorf("bad doubleValue %s", b)
		case "timestampValue":
			var x time.Time
			return x, json.Unmarshal(b, &x)
		case "bytesValue":
			var x []byte
			return x, json.Unmarshal(b, &x)
		case "geoPointValue":
			var x map[string]any
			return x, json.Unmarshal(b, &x)
		case "arrayValue":
			var a struct {
				Values []json.RawMessage `json:"values"`
			}
			if err := json.Unmarshal(b, &a); err != nil {
				return nil, err
			}
			out := make([]any, len(a.Values))
			for i, e := range a.Values {
				x, err := DecodeValue(e)
				if err != nil {
					return nil, err
				}
				out[i] = x
			}
			return out, nil
		case "mapValue":
			var mv struct {
				Fields map[string]json.RawMessage `json:"fields"`
			}
			if err := json.Unmarshal(b, &mv); err != nil {
				return nil, err
			}
			out := make(map[string]any, len(mv.Fields))
			for k, e := range mv.Fields {
				x, err := DecodeValue(e)
				if err != nil {
					return nil, err
				}
				out[k] = x
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("unknown value %s", raw)
}
