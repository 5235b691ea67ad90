package events

import "encoding/json"

// FollowMessage is the Pub/Sub message body of a follow kick: the function
// publishes it to its own events topic (AUTOHEAL_KICK_TOPIC) when a
// delivery left a recovery waiting for its next look and nobody is
// following, and a follower publishes it once more when its window ends
// with recoveries still to look at. The function answers it by following
// the unfinished recoveries only (no listing) and always acknowledges it.
// Terraform never publishes it, so it is not in go-contract.json.
const FollowMessage = `{"autoheal":"follow"}`

// IsFollow reports whether payload (an unwrapped Pub/Sub message) is
// FollowMessage: a JSON object whose "autoheal" member is exactly
// "follow", whatever the whitespace and the order of other members.
func IsFollow(payload []byte) bool { return isControl(payload, "follow") }

// FollowKick is the follow message of one kick: FollowMessage with the
// kick's nonce, which the function keeps in the ledger before publishing
// it and takes when the message arrives, so a follow message nobody kicked
// (anyone who may publish to the topic could send one) is not acted on.
func FollowKick(nonce string) string {
	b, _ := json.Marshal(map[string]string{"autoheal": "follow", "nonce": nonce})
	return string(b)
}

// FollowNonce is the nonce a follow message carries ("" when none).
func FollowNonce(payload []byte) string {
	if len(payload) > 4<<10 {
		return ""
	}
	var m struct {
		Nonce string `json:"nonce"`
	}
	if decodeHook != nil {
		decodeHook(decoderJSON, payload)
	}
	if json.Unmarshal(payload, &m) != nil {
		return ""
	}
	return m.Nonce
}
