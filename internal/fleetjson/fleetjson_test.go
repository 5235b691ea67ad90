package fleetjson_test

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
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

func TestResourcesAndReadFile(t *testing.T) {
	type node struct{ Name string }
	got, err := fleetjson.Resources[node]("nodes", []json.RawMessage{[]byte(`{"Name":"a"}`), []byte(`null`)})
	if err != nil || len(got) != 2 || got[0].Name != "a" || got[1] != nil {
		t.Errorf("Resources = %v, %v; want a and a nil", got, err)
	}
	if _, err := fleetjson.Resources[node]("nodes", []json.RawMessage{[]byte(`{}`), []byte(`{"Name":1}`)}); err == nil || err.Error() != "fleet: nodes[1].Name: cannot use JSON number as string" {
		t.Errorf("a bad element: %v, want it named nodes[1].Name", err)
	}
	path := filepath.Join(t.TempDir(), "fleet.json")
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	read := func(r io.Reader) (string, error) {
		b, _ := io.ReadAll(r)
		if string(b) == "x" {
			return "", errors.New("fleet: not JSON")
		}
		return string(b), nil
	}
	if _, err := fleetjson.ReadFile(path, read); err == nil || err.Error() != path+": fleet: not JSON" {
		t.Errorf("ReadFile error = %v, want it to name the file", err)
	}
	if _, err := fleetjson.ReadFile(path+".missing", read); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadFile of a missing file = %v, want ErrNotExist", err)
	}
}
