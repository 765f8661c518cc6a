package nvmlsim

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCloneSharesNothing: a clone of the state (what every call works on)
// shares nothing with the state it was made from but the read-only models,
// whatever fields the state types gain: every field reachable from a state
// whose every list holds an element is set, the clone's fields are all
// changed, and the original must read as before.
func TestCloneSharesNothing(t *testing.T) {
	models, err := ParseSpec("A100-SXM4-80GB", nil)
	if err != nil {
		t.Fatal(err)
	}
	st := newFileState("seed", models)
	fill(reflect.ValueOf(&st.State).Elem(), 1)
	st.NextPID, st.NextSerial = 7, 9
	before, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	c := st.clone()
	if diff := cmp.Diff(st.State, c.State); diff != "" || c.NextPID != st.NextPID || c.NextSerial != st.NextSerial || c.Seed != st.Seed || c.Version != st.Version {
		t.Fatalf("clone differs (-state +clone):\n%s", diff)
	}
	fill(reflect.ValueOf(&c.State).Elem(), 2)
	c.NextPID, c.NextSerial = 8, 10
	after, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Errorf("changing the clone changed the state:\nbefore %s\nafter  %s", before, after)
	}
}

// fill sets every settable leaf reachable from v to a value made from n
// (n for numbers, "s<n>" for strings, true for booleans), and gives every
// empty slice one element.
func fill(v reflect.Value, n int) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), n)
			}
		}
	case reflect.Slice:
		if v.Len() == 0 {
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		}
		for i := range v.Len() {
			fill(v.Index(i), n)
		}
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fill(v.Elem(), n)
	case reflect.Map:
		panic("fill: a map in the state: clone must copy it, and fill must learn to fill it")
	case reflect.String:
		v.SetString("s" + string(rune('0'+n)))
	case reflect.Bool:
		v.SetBool(n%2 == 1)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(n))
	default:
		panic("fill: unhandled kind " + v.Kind().String())
	}
}
