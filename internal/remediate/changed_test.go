package remediate

import (
	"reflect"
	"testing"
	"time"
)

// TestChangedSeesEveryField sets each field of a Recovery in turn to a
// value other than its zero and checks that changed reports it: a field
// the ledger keeps can never be left unsaved because a list forgot it.
func TestChangedSeesEveryField(t *testing.T) {
	typ := reflect.TypeOf(Recovery{})
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		var next Recovery
		v := reflect.ValueOf(&next).Elem().Field(i)
		if !setNonZero(v) {
			t.Errorf("field %s (%s): the test cannot set it; teach setNonZero its kind", f.Name, f.Type)
			continue
		}
		if !changed(Recovery{}, next) {
			t.Errorf("changed(zero, recovery with %s set) = false: that field would never be saved", f.Name)
		}
	}
	same := Recovery{Node: "n", Phase: PhaseDeleting, SentOps: []string{"op-1"}, NextLookAt: time.Unix(100, 0)}
	again := same
	again.SentOps = []string{"op-1"}
	if changed(same, again) {
		t.Error("changed reports two equal recoveries as different")
	}
}

func setNonZero(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(7)
	case reflect.Uint64, reflect.Uint32, reflect.Uint:
		v.SetUint(7)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(time.Unix(1, 0)))
			return true
		}
		for i := 0; i < v.NumField(); i++ {
			if v.Field(i).CanSet() && setNonZero(v.Field(i)) {
				return true
			}
		}
		return false
	default:
		return false
	}
	return true
}
