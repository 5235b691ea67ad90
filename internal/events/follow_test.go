package events

import "testing"

func TestIsFollow(t *testing.T) {
	for _, tt := range []struct {
		name    string
		payload string
		want    bool
	}{
		{"the follow message", FollowMessage, true},
		{"members in any order and spacing", `{ "x": 1, "autoheal" : "follow" }`, true},
		{"the sweep message is not a follow", SweepMessage, false},
		{"another value", `{"autoheal":"Follow"}`, false},
		{"not a string", `{"autoheal":1}`, false},
		{"a log entry", `{"insertId":"x","protoPayload":{}}`, false},
		{"not JSON", `follow`, false},
		{"empty", ``, false},
	} {
		if got := IsFollow([]byte(tt.payload)); got != tt.want {
			t.Errorf("%s: IsFollow(%q) = %v, want %v", tt.name, tt.payload, got, tt.want)
		}
	}
	if IsSweep([]byte(FollowMessage)) {
		t.Errorf("IsSweep(FollowMessage) = true: a kick would run a whole sweep")
	}
	payload, _, err := Unwrap([]byte(`{"message":{"data":"eyJhdXRvaGVhbCI6ImZvbGxvdyJ9","messageId":"1"},"subscription":"s"}`))
	if err != nil || !IsFollow(payload) {
		t.Errorf("a push body carrying the follow message: IsFollow = false (err %v)", err)
	}
}

func TestFollowKickCarriesItsNonce(t *testing.T) {
	msg := []byte(FollowKick("0123456789abcdef0123456789abcdef"))
	if !IsFollow(msg) || IsSweep(msg) {
		t.Errorf("FollowKick = %s: IsFollow %v, IsSweep %v; want a follow message", msg, IsFollow(msg), IsSweep(msg))
	}
	if got := FollowNonce(msg); got != "0123456789abcdef0123456789abcdef" {
		t.Errorf("FollowNonce = %q", got)
	}
	if got := FollowNonce([]byte(FollowMessage)); got != "" {
		t.Errorf("FollowNonce(FollowMessage) = %q, want none", got)
	}
}
