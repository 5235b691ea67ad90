package tpufake

import (
	"strings"
	"testing"
)

func TestFleetGuestAttributes(t *testing.T) {
	tests := []struct {
		name, fleet, wantErr string
		want                 int
	}{
		{name: "a fleet without guest attributes still reads",
			fleet: `[{"name": "projects/p/locations/z/nodes/a"}]`},
		{name: "guest attributes of a node are read",
			fleet: `[{"name": "projects/p/locations/z/nodes/a", "guestAttributes": [{"worker": "0", "namespace": "autoheal", "key": "checkpoint", "value": "v"}]}]`,
			want:  1},
		{name: "an attribute without a key names what is wrong",
			fleet:   `[{"name": "projects/p/locations/z/nodes/a", "guestAttributes": [{"worker": "0", "namespace": "autoheal"}]}]`,
			wantErr: "nodes[0].guestAttributes[0]: worker, namespace and key must be set"},
		{name: "guest attributes of the wrong type are an error",
			fleet:   `[{"name": "projects/p/locations/z/nodes/a", "guestAttributes": {"worker": "0"}}]`,
			wantErr: "nodes[0].guestAttributes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := ReadFleet(strings.NewReader(tt.fleet))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := len(f.GuestAttributes["projects/p/locations/z/nodes/a"]); got != tt.want {
				t.Errorf("%d attributes, want %d", got, tt.want)
			}
		})
	}
}
