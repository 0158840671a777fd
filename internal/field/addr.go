package field

import (
	"reflect"
	"strings"
)

// Addr is the address of the field of the struct cfg points to that the
// dotted JSON name names ("model.encoder.hidden"), for a caller that finds
// what refers to that field (cmd/'s flags); fields of embedded structs
// count as their parent's, as in encoding/json.
func Addr(cfg any, name string) (uintptr, bool) {
	v := reflect.ValueOf(cfg)
	for _, name := range strings.Split(name, ".") {
		if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
			return 0, false
		}
		var ok bool
		if v, ok = jsonField(v.Elem(), name); !ok {
			return 0, false
		}
	}
	return v.Pointer(), true
}

// jsonField is a pointer to the field of struct s whose JSON name is name.
func jsonField(s reflect.Value, name string) (reflect.Value, bool) {
	for i := range s.NumField() {
		f := s.Type().Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == name {
			return s.Field(i).Addr(), true
		}
		if f.Anonymous && tag == "" && f.Type.Kind() == reflect.Struct {
			if v, ok := jsonField(s.Field(i), name); ok {
				return v, true
			}
		}
	}
	return reflect.Value{}, false
}
