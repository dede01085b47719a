package trace

import (
	"reflect"

	"github.com/agentbox/agentbox/internal/truncate"
)

// MaxField bounds each text field of an event (a tool's input or output,
// a model's answer): longer text keeps its head and tail around a marker
// saying how many bytes were cut.
const MaxField = 64 << 10

// scrub redacts and then bounds every string of e, however deep (slices,
// nested structs, pointers), so that no field a future event type adds
// escapes either rule. Redaction comes first: a cut through a secret could
// leave a part that no pattern recognizes. Slices and pointers are copied
// before they are changed: they may be the caller's.
func scrub(e *Event, r *Redactor) {
	scrubValue(reflect.ValueOf(e).Elem(), r)
}

func scrubValue(v reflect.Value, r *Redactor) {
	switch v.Kind() {
	case reflect.String:
		s := r.Redact(v.String())
		s, _ = truncate.Middle(s, MaxField)
		v.SetString(s)
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() {
				scrubValue(f, r)
			}
		}
	case reflect.Slice:
		if v.IsNil() {
			return
		}
		c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		reflect.Copy(c, v)
		for i := range c.Len() {
			scrubValue(c.Index(i), r)
		}
		v.Set(c)
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		c := reflect.New(v.Type().Elem())
		c.Elem().Set(v.Elem())
		scrubValue(c.Elem(), r)
		v.Set(c)
	}
}
