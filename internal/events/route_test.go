package events

import (
	"strings"
	"testing"
)

func TestRouteSendsEachKindToItsOwnRoute(t *testing.T) {
	tests := []struct {
		kind Kind
		want string
	}{
		{KindNode, "node"},
		{KindAdminActivity, "evidence"},
		{KindInstance, "instance"},
		{KindZoneHint, "zone-hint"},
	}
	for _, tt := range tests {
		t.Run(string(tt.kind), func(t *testing.T) {
			var got []string
			to := func(name string) func(Event) error {
				return func(Event) error { got = append(got, name); return nil }
			}
			err := Route(Event{Kind: tt.kind}, Routes{Node: to("node"), Evidence: to("evidence"), Instance: to("instance"), ZoneHint: to("zone-hint")})
			if err != nil || len(got) != 1 || got[0] != tt.want {
				t.Errorf("Route of a %q entry went to %v (error %v), want [%s]", tt.kind, got, err, tt.want)
			}
		})
	}
}

func TestRouteWithoutARouteIsAnError(t *testing.T) {
	for _, kind := range []Kind{KindInstance, Kind("a-new-kind")} {
		called := false
		err := Route(Event{Kind: kind, InsertID: "e-1"}, Routes{Node: func(Event) error { called = true; return nil }})
		if err == nil || called || !strings.Contains(err.Error(), string(kind)) || !strings.Contains(err.Error(), "e-1") {
			t.Errorf("Route of a %q entry with no route for it: error %v, node route called %v; want an error naming the kind and entry", kind, err, called)
		}
	}
}
