package events

// DeliveryKind says what the body of one delivery asks for.
type DeliveryKind uint8

const (
	// DeliveryEntry is a LogEntry (Delivery.Event): an event to handle.
	DeliveryEntry DeliveryKind = iota
	// DeliverySweep is SweepMessage: look at every opted-in node.
	DeliverySweep
	// DeliveryFollow is a follow kick (FollowMessage, FollowKick):
	// Delivery.Nonce is its nonce, "" when it carries none.
	DeliveryFollow
)

func (k DeliveryKind) String() string {
	switch k {
	case DeliverySweep:
		return "sweep"
	case DeliveryFollow:
		return "follow"
	}
	return "entry"
}

// Delivery is what one delivery's body is, as Decode reads it.
type Delivery struct {
	Kind  DeliveryKind
	Event Event  // DeliveryEntry
	Nonce string // DeliveryFollow: FollowNonce of the message
}

// maxControlBytes bounds a control message (SweepMessage, FollowKick): one
// is about 20 to 60 bytes, and nothing bigger is read as one.
const maxControlBytes = 4 << 10

// Decode reads the body of one delivery, in any form the function accepts
// (a Pub/Sub push body, a structured CloudEvent carrying either a push body
// or the entry, or the bare message) and says what it is: a follow kick, a
// sweep request, or a LogEntry parsed as Parse parses it with opts. Every
// error is a *RejectError naming what was wrong; the caller records it and
// acknowledges the delivery.
//
// It reads each document once: the message is read by the fast scanner,
// which answers "control message or entry" and the entry itself in the
// same pass (an entry it declines goes to the reference path, as in Parse);
// an envelope around it is decoded once by encoding/json. It answers what
// Unwrap, then IsFollow, IsSweep and FollowNonce, then Parse of the payload
// answered in turn, which decoded a delivery up to four times
// (TestDecodeMatchesTheFourCalls).
func Decode(body []byte, opts Options) (Delivery, error) {
	scanned := false
	if len(body) <= opts.maxRaw() && !startsLikeEnvelope(body) {
		// A bare message, the commonest form outside the deployed
		// function: the scanner either reads it whole, which also says
		// it is no envelope (it declines any object-valued "message"
		// and any "specversion"), or declines it. (A bigger body may
		// still be an envelope of a smaller entry: Unwrap says.)
		if d, err, ok := decodeScanned(body, opts); ok {
			return d, err
		}
		scanned = true
	}
	payload, _, isEnv, err := unwrap(body)
	if err != nil {
		return Delivery{}, err
	}
	if isEnv || !scanned {
		if d, err, ok := decodeScanned(payload, opts); ok {
			return d, err
		}
	}
	// The scanner declined the message (escaped member names, a known
	// member of the wrong type, an envelope inside an envelope, ...):
	// encoding/json, exactly as before Decode.
	if isControl(payload, "follow") {
		return Delivery{Kind: DeliveryFollow, Nonce: FollowNonce(payload)}, nil
	}
	if isControl(payload, "sweep") {
		return Delivery{Kind: DeliverySweep}, nil
	}
	ev, err := parseReference(payload, opts)
	return Delivery{Event: ev}, err
}

// decodeScanned is Decode of an unwrapped message through the fast
// scanner; ok is false when the scanner declines it.
func decodeScanned(payload []byte, opts Options) (d Delivery, err error, ok bool) {
	if len(payload) > opts.maxRaw() {
		return Delivery{}, reject(CodeTooLarge, "", "%d bytes is over the %d-byte limit", len(payload), opts.maxRaw()), true
	}
	s := scanner{b: payload}
	s.e.labelsNil = true
	if !s.top() {
		return Delivery{}, nil, false
	}
	switch s.controlWord() {
	case "follow":
		return Delivery{Kind: DeliveryFollow, Nonce: s.followNonce()}, nil, true
	case "sweep":
		return Delivery{Kind: DeliverySweep}, nil, true
	}
	if err = s.finish(opts, &d.Event); err == errDecline {
		ev, err := parseReference(payload, opts) // admin-activity entries, as Parse
		return Delivery{Event: ev}, err, true
	}
	return d, err, true
}

// controlWord is the string value of the scanned object's "autoheal"
// member when the object is small enough to be a control message, else "".
func (s *scanner) controlWord() string {
	sp := s.e.autoheal
	if len(s.b) > maxControlBytes || sp.hi == sp.lo || s.b[sp.lo] != '"' {
		return ""
	}
	return decodeString(s.b[sp.lo:sp.hi])
}

// followNonce is FollowNonce of the scanned object.
func (s *scanner) followNonce() string {
	switch v := s.e.nonce; {
	case s.e.nonceBad || !v.set:
		return ""
	case v.simple:
		return string(s.b[v.s.lo:v.s.hi])
	default:
		return decodeString(s.b[v.s.lo-1 : v.s.hi+1])
	}
}

// startsLikeEnvelope reports whether body's first member is named
// "message" or "specversion", as Pub/Sub push bodies and structured
// CloudEvents begin: a hint that spares the scanner a start it would
// decline, never a decision (Unwrap decides).
func startsLikeEnvelope(body []byte) bool {
	i := 0
	for i < len(body) && (body[i] == ' ' || body[i] == '\t' || body[i] == '\r' || body[i] == '\n') {
		i++
	}
	if i >= len(body) || body[i] != '{' {
		return false
	}
	for i++; i < len(body) && (body[i] == ' ' || body[i] == '\t' || body[i] == '\r' || body[i] == '\n'); i++ {
	}
	rest := string(body[i:min(len(body), i+len(`"specversion"`))])
	return len(rest) >= len(`"message"`) && rest[:len(`"message"`)] == `"message"` || rest == `"specversion"`
}

// Decoders as decodeHook names them.
const (
	decoderScanner = "scanner"       // the fast scanner over a whole document
	decoderJSON    = "encoding/json" // json.Unmarshal of a whole document
)

// decodeHook, when set (by tests), is told of every decode of a whole
// document (a delivery body, an unwrapped payload) before it starts, so a
// test can prove that a path reads each document once.
var decodeHook func(decoder string, doc []byte)
