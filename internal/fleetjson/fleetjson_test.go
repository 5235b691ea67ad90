package fleetjson_test

import (
	"encoding/json"
	"testing"

	"github.com/tpu-autoheal/autoheal/internal/fleetjson"
)

func TestSplitValues(t *testing.T) {
	vs, err := fleetjson.SplitValues([]byte(`{"name":"a"}` + "\n" + `{"name":"b"}`))
	if err != nil || len(vs) != 2 || string(vs[1]) != `{"name":"b"}` {
		t.Fatalf("SplitValues = %q, %v; want the two objects", vs, err)
	}
	if vs, err := fleetjson.SplitValues([]byte(`[1, 2`)); err != nil || len(vs) != 1 {
		t.Errorf("a broken first value = %q, %v; want it whole, for the single-value path", vs, err)
	}
	_, err = fleetjson.SplitValues([]byte("{}\n{\"a\": }"))
	if want := "fleet: value 2: line 2, column 7: invalid character '}' looking for beginning of value"; err == nil || err.Error() != want {
		t.Errorf("a broken second value: %v, want %q", err, want)
	}
}

func TestErrorNamesWhere(t *testing.T) {
	var v struct{ Nodes []struct{ Name string } }
	data := []byte(`{"Nodes": [{"Name": 3}]}`)
	err := fleetjson.Error("nodes[0]", data, json.Unmarshal(data, &v))
	if want := "fleet: nodes[0].Nodes.Name: cannot use JSON number as string"; err.Error() != want {
		t.Errorf("type error: %q, want %q", err, want)
	}
	if got, want := fleetjson.FirstBytes([]byte("0123456789abcdefghijKLMN")), "0123456789abcdefghij"; got != want {
		t.Errorf("FirstBytes = %q, want %q", got, want)
	}
}
