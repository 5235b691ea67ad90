package events

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// DefaultMaxEntryBytes is the largest LogEntry Parse accepts when
// Options.MaxEntryBytes is 0. Cloud Logging itself refuses entries larger
// than 256 KiB, so anything bigger did not come from it.
const DefaultMaxEntryBytes = 256 << 10

// Reject codes: short, stable slugs recorded with every rejected input.
const (
	CodeMalformedJSON     = "malformed-json"      // not valid JSON
	CodeNotObject         = "not-object"          // valid JSON, but not an object
	CodeWrongType         = "wrong-type"          // a known field has the wrong JSON type
	CodeTooLarge          = "too-large"           // entry or envelope payload over the limit
	CodeBadEnvelope       = "bad-envelope"        // a Pub/Sub envelope whose message is unusable
	CodeBadBase64         = "bad-base64"          // message.data is not base64
	CodeEmptyMessage      = "empty-message"       // an envelope without data
	CodeForeignService    = "foreign-service"     // protoPayload.serviceName is not tpu.googleapis.com
	CodeForeignMethod     = "foreign-method"      // protoPayload.methodName is not terminate/restart
	CodeBadTimestamp      = "bad-timestamp"       // timestamp/receiveTimestamp not RFC 3339
	CodeMissingNode       = "missing-node"        // no source names a complete node
	CodeInvalidNode       = "invalid-node"        // a node name that cannot be parsed
	CodeNodeMismatch      = "node-mismatch"       // resourceName and resource.labels disagree
	CodeProjectNotAllowed = "project-not-allowed" // project outside Options.AllowedProjects
	CodeForeignInstance   = "foreign-instance"    // a compute.instances.* entry about a VM that is not a TPU node's (t1v-n-*)
	CodeFutureTimestamp   = "future-timestamp"    // timestamp more than MaxFutureSkew after Options.Now
	CodeMissingLogName    = "missing-log-name"    // no logName (accepted with Options.AcceptMissingLogName)
	CodeForeignLog        = "foreign-log"         // logName is not the audit log of the project the entry names
)

// MaxFutureSkew is how far after Options.Now an entry's timestamp may be.
// Cloud Logging stamps entries when they happen; an entry from further in
// the future is forged or from a broken clock, and believing it would make
// it look fresh forever (a user hold that never ages, a cooldown that never
// ends).
const MaxFutureSkew = 10 * time.Minute

// SyntheticInsertIDPrefix starts the insertId Parse makes up for an entry
// that has none (see Parse).
const SyntheticInsertIDPrefix = "synthetic-"

// Options tune Parse and the Reader. The zero value accepts every project and
// entries up to DefaultMaxEntryBytes.
type Options struct {
	// AllowedProjects, when not empty, is the only projects whose nodes an
	// event may name; any other project is rejected (project-not-allowed).
	AllowedProjects []string
	// MaxEntryBytes bounds a LogEntry (and the decoded payload of an
	// envelope); 0 means DefaultMaxEntryBytes. A Pub/Sub envelope, being
	// base64 plus attributes, may itself be up to twice this size.
	MaxEntryBytes int
	// Now, when not zero, is the time entries are checked against: an entry
	// whose timestamp is more than MaxFutureSkew after Now is rejected
	// (future-timestamp). Zero disables the check, so that pure tests and
	// replays of old exports stay deterministic.
	Now time.Time
	// AcceptMissingLogName accepts an entry that has no logName at all:
	// replay's hand-written input. An entry whose logName is present is
	// checked whatever this says: it must be the audit log of the project
	// it names (admin.go). The function leaves it false: every entry the log
	// sink delivers has its logName.
	AcceptMissingLogName bool
}

func (o Options) maxEntry() int {
	if o.MaxEntryBytes <= 0 {
		return DefaultMaxEntryBytes
	}
	return o.MaxEntryBytes
}

// maxRaw bounds the raw input of Parse and one element of the Reader: an
// envelope carrying a maximal entry is 4/3 of it in base64, plus attributes.
func (o Options) maxRaw() int { return 2 * o.maxEntry() }

// RejectError says why an input is not an event tpu-autoheal acts on. It is
// permanent: the same bytes are rejected again, so callers record it and
// acknowledge the message instead of retrying. Use errors.As to get it.
type RejectError struct {
	Code   string // a Code* slug, stable for metrics and tests
	Field  string // JSON path of the offending field, "" for the whole input
	Reason string // human-readable detail
}

func (e *RejectError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

func reject(code, field, format string, args ...any) *RejectError {
	return &RejectError{Code: code, Field: field, Reason: fmt.Sprintf(format, args...)}
}

// wire is one JSON object as Parse reads it: either a Pub/Sub envelope
// (Message set) or a LogEntry. Decoding both shapes at once costs a single
// pass over the common, unwrapped input.
type wire struct {
	Message json.RawMessage `json:"message"`

	// A structured CloudEvent (JSON format): specversion is a string.
	Specversion json.RawMessage `json:"specversion"`
	Data        json.RawMessage `json:"data"`
	DataBase64  json.RawMessage `json:"data_base64"`

	InsertID         *string `json:"insertId"`
	Timestamp        string  `json:"timestamp"`
	ReceiveTimestamp string  `json:"receiveTimestamp"`
	LogName          string  `json:"logName"`
	Resource         struct {
		Type   string            `json:"type"`
		Labels map[string]string `json:"labels"`
	} `json:"resource"`
	ProtoPayload struct {
		ServiceName        string `json:"serviceName"`
		MethodName         string `json:"methodName"`
		ResourceName       string `json:"resourceName"`
		AuthenticationInfo struct {
			PrincipalEmail string `json:"principalEmail"`
		} `json:"authenticationInfo"`
		Metadata struct {
			TerminateReason json.RawMessage `json:"terminateReason"`
			// An upcomingMaintenance notice, read leniently (raw), flat
			// or under upcomingMaintenance.
			MaintenanceStatus     json.RawMessage `json:"maintenanceStatus"`
			Type                  json.RawMessage `json:"type"`
			WindowStartTime       json.RawMessage `json:"windowStartTime"`
			WindowEndTime         json.RawMessage `json:"windowEndTime"`
			LatestWindowStartTime json.RawMessage `json:"latestWindowStartTime"`
			CanReschedule         json.RawMessage `json:"canReschedule"`
			UpcomingMaintenance   json.RawMessage `json:"upcomingMaintenance"`
		} `json:"metadata"`
	} `json:"protoPayload"`
}

// envelopeMessage is message of a Pub/Sub push body, which is also the data
// of a google.cloud.pubsub.topic.v1.messagePublished CloudEvent.
type envelopeMessage struct {
	Data        json.RawMessage   `json:"data"`
	Attributes  map[string]string `json:"attributes"`
	MessageID   string            `json:"messageId"`
	MessageID2  string            `json:"message_id"`
	PublishTime string            `json:"publishTime"`
}

// isEnvelope reports whether a top-level "message" member makes the object
// a Pub/Sub envelope. A LogEntry has no top-level "message" member.
func isEnvelope(raw json.RawMessage) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '{'
}

// Parse reads one TPU audit LogEntry, as Cloud Logging and
// `gcloud logging read --format=json` print it, and returns it as an Event.
// data may also be a Pub/Sub push body or the data of a messagePublished
// CloudEvent carrying the entry base64-encoded in message.data, or a whole
// structured CloudEvent (specversion, type, source, id, and data or
// data_base64) carrying either; the form is detected from the bytes.
//
// Two kinds of entries are accepted: tpu.googleapis.com terminate and restart
// system events, which name a node (Kind KindNode), and the Compute Engine
// system events of ComputeMethods about an instance named
// t1v-n-<hash>-w-<worker>, a VM of some TPU node, which become zone hints
// (Kind KindZoneHint: Node.Project and Node.Zone set, Node.Node empty,
// Instance and Worker from the instance name, Maintenance from an
// upcomingMaintenance notice). Any other instance is foreign-instance.
//
// With Options.Now set, an entry dated more than MaxFutureSkew after it is
// rejected (future-timestamp).
//
// Every rejection is a *RejectError. Parse rejects rather than guesses
// whenever the entry could make remediate act on the wrong node: a node name
// it cannot parse, or protoPayload.resourceName and resource.labels naming
// different nodes.
//
// An entry without insertId is accepted with a synthesized one: Cloud Logging
// gives every stored entry an insertId, so this only happens to hand-written
// replay input, and rejecting it would make replay needlessly strict. The
// synthesized id is "synthetic-" plus a hash of the fields that make the
// event (log, timestamp, method, node, worker, reason, principal), so the same
// entry, however formatted, gets the same id and is deduplicated as usual.
//
// Admin-activity entries of node creates and deletes and queued resource
// deletes (AdminMethods) are accepted as KindAdminActivity, Admin set: the
// operation's name (operation.id), first/last, the status code, and for a
// queued resource its name (Node then names only its project and zone).
//
// The entry must come from the audit log of the project it names (admin.go):
// projects/P/logs/cloudaudit.googleapis.com%2Fsystem_event for system
// events, %2Factivity for admin-activity entries; any other logName is
// foreign-log, and a missing one missing-log-name unless
// Options.AcceptMissingLogName (replay's hand-written input).
//
// Event.Time and Event.ReceiveTime are zero when the entry lacks them; a
// present but unparseable timestamp is rejected (bad-timestamp).
func Parse(data []byte, opts Options) (Event, error) {
	if ev, err, ok := parseFast(data, opts); ok {
		return ev, err
	}
	return parseReference(data, opts)
}

// parseReference is Parse through encoding/json: the definition of what
// Parse returns, which the fast path must match (FuzzFastParse).
func parseReference(data []byte, opts Options) (Event, error) {
	if len(data) > opts.maxRaw() {
		return Event{}, reject(CodeTooLarge, "", "%d bytes is over the %d-byte limit", len(data), opts.maxRaw())
	}
	w, err := decodeObject(data)
	if err != nil {
		return Event{}, err
	}
	payload, _, field, isEnv, err := unwrapWire(w, opts.maxEntry())
	if isEnv {
		if err != nil {
			return Event{}, err
		}
		if w, err = decodeObject(payload); err != nil {
			return Event{}, prefixField(field, err)
		}
		if isEnvelope(w.Message) || isCloudEvent(w.Specversion) {
			return Event{}, reject(CodeBadEnvelope, field, "a Pub/Sub envelope inside an envelope")
		}
	} else if len(data) > opts.maxEntry() {
		return Event{}, reject(CodeTooLarge, "", "%d bytes is over the %d-byte limit", len(data), opts.maxEntry())
	} else {
		payload = data
	}
	e := w.entry()
	readAdmin(payload, &e) // admin.go
	return eventFrom(e, nil, opts)
}

// isCloudEvent reports whether a top-level specversion member (a string)
// makes the object a structured CloudEvent. A LogEntry has no specversion.
func isCloudEvent(raw json.RawMessage) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '"'
}

// unwrapWire returns what an envelope carries: the message data of a Pub/Sub
// push body; the data (or data_base64) of a structured CloudEvent, itself
// unwrapped when it is a Pub/Sub message (messagePublished) and taken as the
// entry otherwise (an audit log CloudEvent carries the LogEntry as data).
// field names where the payload came from. isEnv is false for anything else.
// max < 0 means no size limit.
func unwrapWire(w wire, max int) (payload []byte, attrs map[string]string, field string, isEnv bool, err error) {
	if isEnvelope(w.Message) {
		payload, attrs, err = unwrapMessage(w.Message, max)
		return payload, attrs, "message.data", true, err
	}
	if !isCloudEvent(w.Specversion) {
		return nil, nil, "", false, nil
	}
	var data []byte
	d := bytes.TrimSpace(w.Data)
	b64 := bytes.TrimSpace(w.DataBase64)
	switch {
	case len(b64) > 0 && string(b64) != "null":
		field = "data_base64"
		var enc string
		if json.Unmarshal(b64, &enc) != nil {
			return nil, nil, field, true, reject(CodeBadEnvelope, field, "not a base64 string")
		}
		if max >= 0 && base64.StdEncoding.DecodedLen(len(enc)) > 2*max+3 {
			return nil, nil, field, true, reject(CodeTooLarge, field, "about %d decoded bytes is over the %d-byte limit",
				base64.StdEncoding.DecodedLen(len(enc)), 2*max)
		}
		if data, err = decodeBase64(enc); err != nil {
			return nil, nil, field, true, reject(CodeBadBase64, field, "%v", err)
		}
	case len(d) > 0 && d[0] == '{':
		field, data = "data", d
	case len(d) > 0 && d[0] == '"':
		field = "data"
		var s string
		if json.Unmarshal(d, &s) != nil {
			return nil, nil, field, true, reject(CodeBadEnvelope, field, "not a JSON string")
		}
		data = []byte(s)
	case len(d) == 0 || string(d) == "null":
		return nil, nil, "data", true, reject(CodeEmptyMessage, "data", "the CloudEvent has no data")
	default:
		return nil, nil, "data", true, reject(CodeBadEnvelope, "data", "the CloudEvent's data is a JSON %s, not an object", jsonKind(d[0]))
	}
	// The data of a messagePublished CloudEvent is a Pub/Sub push body.
	var probe struct {
		Message json.RawMessage `json:"message"`
	}
	if json.Unmarshal(data, &probe) == nil && isEnvelope(probe.Message) {
		payload, attrs, err = unwrapMessage(probe.Message, max)
		return payload, attrs, field + ".message.data", true, prefixAll(field, err)
	}
	if max >= 0 && len(data) > max {
		return nil, nil, field, true, reject(CodeTooLarge, field, "%d bytes is over the %d-byte limit", len(data), max)
	}
	return data, nil, field, true, nil
}

// prefixAll makes a RejectError about an envelope's member name the
// CloudEvent member it sits in.
func prefixAll(prefix string, err error) error {
	var re *RejectError
	if !errors.As(err, &re) {
		return err
	}
	c := *re
	if c.Field == "" {
		c.Field = prefix
	} else {
		c.Field = prefix + "." + c.Field
	}
	return &c
}

// prefixField makes a RejectError about a whole envelope payload name the
// envelope field the payload came from.
func prefixField(prefix string, err error) error {
	var re *RejectError
	if !errors.As(err, &re) {
		return err
	}
	if re.Field != "" {
		return err // already names a field of the payload
	}
	c := *re
	c.Field = prefix
	return &c
}

func decodeObject(data []byte) (wire, error) {
	var w wire
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] != '{' {
		if json.Valid(trimmed) {
			return w, reject(CodeNotObject, "", "a JSON %s is not a LogEntry object", jsonKind(trimmed[0]))
		}
	}
	if decodeHook != nil {
		decodeHook(decoderJSON, data)
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return w, jsonReject(err) // empty input included
	}
	return w, nil
}

func jsonKind(c byte) string {
	switch c {
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}

func jsonReject(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return reject(CodeMalformedJSON, "", "%v (at byte %d)", se, se.Offset)
	case errors.As(err, &te):
		return reject(CodeWrongType, te.Field, "JSON %s where a %s is expected", te.Value, jsonType(te.Type.String()))
	default:
		// io.ErrUnexpectedEOF and friends: truncated input.
		return reject(CodeMalformedJSON, "", "%v", err)
	}
}

func jsonType(goType string) string {
	switch {
	case goType == "string" || strings.HasSuffix(goType, "]string"):
		return "string"
	case strings.HasPrefix(goType, "map["), strings.HasPrefix(goType, "struct"), strings.Contains(goType, "."):
		return "object"
	default:
		return goType
	}
}

// Unwrap strips a Pub/Sub push envelope, or the identical data of a
// messagePublished CloudEvent: {"message":{"data":<base64>,"attributes":{...},
// ...},"subscription":...}, and a structured CloudEvent ({"specversion":...,
// "type":...,"data":...} or "data_base64"), whose data is either such a
// push body or the LogEntry itself. It returns the decoded message data and the
// message attributes. data that is not an envelope (a bare LogEntry, the
// sweep message, even invalid JSON, which Parse then rejects) is returned
// unchanged with nil attributes and no error. Unwrap applies no size limit
// of its own: callers hold data in memory already, and Parse bounds it.
func Unwrap(data []byte) (payload []byte, attrs map[string]string, err error) {
	payload, attrs, _, err = unwrap(data)
	return payload, attrs, err
}

// unwrap is Unwrap, also saying whether data was an envelope.
func unwrap(data []byte) (payload []byte, attrs map[string]string, isEnv bool, err error) {
	var probe struct {
		Message     json.RawMessage `json:"message"`
		Specversion json.RawMessage `json:"specversion"`
		Data        json.RawMessage `json:"data"`
		DataBase64  json.RawMessage `json:"data_base64"`
	}
	if decodeHook != nil {
		decodeHook(decoderJSON, data)
	}
	if json.Unmarshal(data, &probe) != nil {
		return data, nil, false, nil
	}
	w := wire{Message: probe.Message, Specversion: probe.Specversion, Data: probe.Data, DataBase64: probe.DataBase64}
	payload, attrs, _, isEnv, err = unwrapWire(w, -1)
	if !isEnv {
		return data, nil, false, nil
	}
	return payload, attrs, true, err
}

// unwrapMessage decodes an envelope's message; max < 0 means no limit.
func unwrapMessage(raw json.RawMessage, max int) ([]byte, map[string]string, error) {
	var m envelopeMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, nil, prefixField("message", jsonReject(err))
	}
	d := bytes.TrimSpace(m.Data)
	if len(d) == 0 || string(d) == "null" {
		return nil, m.Attributes, reject(CodeEmptyMessage, "message.data", "the Pub/Sub message has no data")
	}
	var enc string
	if err := json.Unmarshal(d, &enc); err != nil {
		return nil, m.Attributes, reject(CodeBadEnvelope, "message.data", "not a base64 string")
	}
	if max >= 0 && base64.StdEncoding.DecodedLen(len(enc)) > max+3 {
		return nil, m.Attributes, reject(CodeTooLarge, "message.data", "about %d decoded bytes is over the %d-byte limit",
			base64.StdEncoding.DecodedLen(len(enc)), max)
	}
	payload, err := decodeBase64(enc)
	if err != nil {
		return nil, m.Attributes, reject(CodeBadBase64, "message.data", "%v", err)
	}
	if max >= 0 && len(payload) > max {
		return nil, m.Attributes, reject(CodeTooLarge, "message.data", "%d decoded bytes is over the %d-byte limit", len(payload), max)
	}
	return payload, m.Attributes, nil
}

// decodeBase64 accepts the standard alphabet Pub/Sub uses, padded or not,
// and, leniently, the URL-safe one.
func decodeBase64(s string) ([]byte, error) {
	encs := []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding}
	var first error
	for _, enc := range encs {
		b, err := enc.DecodeString(s)
		if err == nil {
			return b, nil
		}
		if first == nil {
			first = err
		}
	}
	return nil, first
}

// Peek reads what it can of an entry Parse rejected, for the record of the
// reject: insertId, timestamp, service, method, resource and, when the entry
// names it consistently, the node and worker. It never fails; what it cannot
// read stays empty. Nothing Peek returns may be acted on.
func Peek(data []byte) Event {
	if len(data) > 2*DefaultMaxEntryBytes {
		return Event{}
	}
	payload, _, err := Unwrap(data)
	if err != nil {
		return Event{}
	}
	var w wire
	if json.Unmarshal(payload, &w) != nil {
		return Event{}
	}
	ev := Event{
		LogName:      w.LogName,
		Service:      w.ProtoPayload.ServiceName,
		Method:       w.ProtoPayload.MethodName,
		ResourceType: w.Resource.Type,
		Principal:    w.ProtoPayload.AuthenticationInfo.PrincipalEmail,
	}
	if w.InsertID != nil {
		ev.InsertID = *w.InsertID
	}
	if t, err := time.Parse(time.RFC3339Nano, w.Timestamp); err == nil {
		ev.Time = t
	}
	if w.ProtoPayload.ServiceName == ServiceCompute {
		if loc, err := instanceOf(w.ProtoPayload.ResourceName, labelSource{m: w.Resource.Labels}); err == nil {
			ev.Kind, ev.Node, ev.Worker, ev.Instance = KindZoneHint, loc.NodeRef, loc.worker, loc.instance
			if loc.worker == "" {
				ev.Kind = KindInstance
			}
		}
	} else if e := w.entry(); w.ProtoPayload.ServiceName == ServiceTPU && IsAdminMethod(w.ProtoPayload.MethodName) {
		readAdmin(payload, &e)
		if loc, admin, err := adminOf(&e, labelSource{m: w.Resource.Labels}); err == nil {
			ev.Kind, ev.Node, ev.Admin = KindAdminActivity, loc.NodeRef, admin
		}
	} else if loc, _, err := nodeOf(w.ProtoPayload.ResourceName, labelSource{m: w.Resource.Labels}); err == nil {
		ev.Node, ev.Worker = loc.NodeRef, loc.worker
	}
	return ev
}

// IsSweep reports whether payload (an unwrapped Pub/Sub message) is
// SweepMessage: a JSON object whose "autoheal" member is exactly "sweep",
// whatever the whitespace and the order of other members.
func IsSweep(payload []byte) bool { return isControl(payload, "sweep") }

// isControl reports whether payload is one of our own control messages
// (SweepMessage, FollowMessage): a JSON object whose "autoheal" member is
// exactly word.
func isControl(payload []byte, word string) bool {
	if len(payload) > 4<<10 {
		return false // a control message is about 20 bytes; do not parse big input.
	}
	if decodeHook != nil {
		decodeHook(decoderJSON, payload)
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(payload, &m) != nil {
		return false
	}
	var v string
	return json.Unmarshal(m["autoheal"], &v) == nil && v == word
}

// entry is what eventFrom reads of a LogEntry, however it was decoded.
type entry struct {
	hasInsertID                                    bool
	insertID, timestamp, receiveTimestamp, logName string
	resourceType                                   string
	labels                                         map[string]string
	causes                                         *causeCache // nil: classify every entry afresh
	service, method, resourceName, principal       string
	terminateReason                                json.RawMessage
	reason                                         string // terminateReason when hasReason: already decoded
	hasReason                                      bool
	maint                                          maintRaw
	operation, status, request                     json.RawMessage // admin-activity entries (admin.go)
}

// maintRaw is an upcomingMaintenance notice as found in the metadata.
type maintRaw struct {
	status, typ, windowStart, windowEnd, latestWindowStart, canReschedule json.RawMessage
	upcoming                                                              json.RawMessage // the same fields, nested
}

func (w wire) entry() entry {
	p := w.ProtoPayload
	e := entry{
		timestamp:        w.Timestamp,
		receiveTimestamp: w.ReceiveTimestamp,
		logName:          w.LogName,
		resourceType:     w.Resource.Type,
		labels:           w.Resource.Labels,
		service:          p.ServiceName,
		method:           p.MethodName,
		resourceName:     p.ResourceName,
		principal:        p.AuthenticationInfo.PrincipalEmail,
		terminateReason:  p.Metadata.TerminateReason,
		maint: maintRaw{
			status: p.Metadata.MaintenanceStatus, typ: p.Metadata.Type,
			windowStart: p.Metadata.WindowStartTime, windowEnd: p.Metadata.WindowEndTime,
			latestWindowStart: p.Metadata.LatestWindowStartTime, canReschedule: p.Metadata.CanReschedule,
			upcoming: p.Metadata.UpcomingMaintenance,
		},
	}
	if w.InsertID != nil {
		e.hasInsertID, e.insertID = true, *w.InsertID
	}
	return e
}

// checkMethod is the first thing Parse decides: whether the entry is one
// tpu-autoheal handles at all. Compute Engine entries are accepted only for
// the four system events of ComputeMethods; any other compute method is
// foreign-service, as every compute entry was before zone hints. TPU
// entries are the terminate and restart system events and the
// admin-activity entries of AdminMethods.
func checkMethod(service, method string) error {
	switch service {
	case "":
		return reject(CodeForeignService, "protoPayload.serviceName", "missing: not a TPU audit log entry")
	case ServiceTPU:
		if method != MethodTerminate && method != MethodRestart && !IsAdminMethod(method) {
			return reject(CodeForeignMethod, "protoPayload.methodName", "%q is not %s or %s", method, MethodTerminate, MethodRestart)
		}
		return nil
	case ServiceCompute:
		if isComputeMethod(method) || instanceChange(method) != "" {
			return nil
		}
	}
	return reject(CodeForeignService, "protoPayload.serviceName", "%q is not %s", service, ServiceTPU)
}

func isComputeMethod(m string) bool {
	switch m {
	case MethodUpcomingMaintenance, MethodPreempted, MethodHostError, MethodTerminateOnHostMaintenance,
		MethodAutomaticRestart, MethodUpcomingInfraMaintenance:
		return true
	}
	return false
}

// eventFrom makes the Event of an entry. pairs, when not nil, are the
// entry's labels in input order (the fast path's; a separate argument so
// that they can live on its stack).
func eventFrom(w entry, pairs []labelKV, opts Options) (Event, error) {
	var ev Event
	err := fillEvent(&ev, &w, pairs, opts)
	return ev, err
}

// fillEvent is eventFrom writing into *ev, which the fast path points at
// the Item it returns: an Event is some 300 bytes, copied at every return.
// On error *ev is left (or set back to) the zero Event.
func fillEvent(ev *Event, w *entry, pairs []labelKV, opts Options) error {
	if err := checkMethod(w.service, w.method); err != nil {
		return err
	}
	ts, err := parseTime("timestamp", w.timestamp)
	if err != nil {
		return err
	}
	rts, err := parseTime("receiveTimestamp", w.receiveTimestamp)
	if err != nil {
		return err
	}
	if !opts.Now.IsZero() && ts.After(opts.Now.Add(MaxFutureSkew)) {
		return reject(CodeFutureTimestamp, "timestamp", "%s is more than %v after now (%s)",
			ts.Format(time.RFC3339Nano), MaxFutureSkew, opts.Now.UTC().Format(time.RFC3339))
	}
	*ev = Event{
		Time:           ts,
		ReceiveTime:    rts,
		LogName:        w.logName,
		Service:        w.service,
		Method:         w.method,
		ResourceType:   w.resourceType,
		ResourceLabels: w.labels,
		Principal:      w.principal,
	}
	var node located
	logID := LogSystemEvent
	labels := labelSource{m: w.labels, pairs: pairs}
	switch {
	case w.service == ServiceCompute:
		node, err = instanceOf(w.resourceName, labels)
		if err != nil {
			*ev = Event{}
			return err
		}
		ev.Kind, ev.Instance = KindZoneHint, node.instance
		if node.worker == "" {
			ev.Kind = KindInstance
		}
		if c := instanceChange(w.method); c != "" { // a person's admin activity (instance path)
			if ev.Kind != KindInstance {
				*ev = Event{}
				return reject(CodeForeignInstance, fieldResourceName, "%s of a TPU node's VM %q: the TPU API's own entries are the evidence", w.method, node.instance)
			}
			ev.Admin, logID = &AdminActivity{Change: c}, LogActivity
			readOperation(w, ev.Admin)
		} else if (w.method == MethodAutomaticRestart || w.method == MethodUpcomingInfraMaintenance) && ev.Kind != KindInstance {
			*ev = Event{}
			return reject(CodeForeignMethod, "protoPayload.methodName", "%s is routed for Compute Engine TPU VMs only, not for a TPU node's VM", w.method)
		} else if ev.Maintenance, err = maintenanceFrom(w.maint); err != nil {
			*ev = Event{}
			return err
		}
	case w.method != MethodTerminate && w.method != MethodRestart: // checkMethod: an admin-activity entry
		if node, ev.Admin, err = adminOf(w, labels); err != nil {
			*ev = Event{}
			return err
		}
		ev.Kind, logID = KindAdminActivity, LogActivity
	default:
		if node, _, err = nodeOf(w.resourceName, labels); err != nil {
			*ev = Event{}
			return err
		}
	}
	if len(opts.AllowedProjects) > 0 && !slices.Contains(opts.AllowedProjects, node.Project) {
		*ev = Event{}
		return reject(CodeProjectNotAllowed, node.projectField, "project %q is not in the allowed projects %q", node.Project, opts.AllowedProjects)
	}
	if err := checkLogName(w.logName, node.Project, logID, opts); err != nil { // admin.go
		*ev = Event{}
		return err
	}
	ev.Node, ev.Worker = node.NodeRef, node.worker
	switch {
	case ev.Kind == KindInstance && ev.Admin != nil:
		ev.Cause = CauseUnknown
		if isCustomerPrincipal(w.principal) {
			ev.Cause = CauseUser
		}
	case ev.Kind == KindZoneHint || ev.Kind == KindInstance:
		ev.Cause = computeCause(w.method, w.principal)
	case ev.Kind == KindAdminActivity:
		// Who asked, as far as the principal tells; whether it was
		// tpu-autoheal itself is for the reader of the evidence to say.
		ev.Cause = CauseUnknown
		if isCustomerPrincipal(w.principal) {
			ev.Cause = CauseUser
		}
	default:
		if w.hasReason {
			ev.TerminateReason = w.reason
		} else {
			ev.TerminateReason = rawString(w.terminateReason)
		}
		ev.Cause = w.causes.classify(ev.TerminateReason, ev.Principal)
	}
	if w.hasInsertID && w.insertID != "" {
		ev.InsertID = w.insertID
	} else {
		ev.InsertID = syntheticInsertID(*ev)
	}
	return nil
}

func parseTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, ok := parseUTC(s); ok {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, reject(CodeBadTimestamp, field, "%q is not an RFC 3339 time", s)
	}
	return t, nil
}

// parseUTC reads the one form Cloud Logging writes,
// YYYY-MM-DDTHH:MM:SS[.fraction]Z, many times faster than time.Parse and
// to the same value; anything else (offsets, leap seconds, over nine digits
// of fraction, the year 0) is left to time.Parse.
func parseUTC(s string) (time.Time, bool) {
	if len(s) < 20 || len(s) > 30 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' || s[len(s)-1] != 'Z' {
		return time.Time{}, false
	}
	if s[0]-'0' > 9 || s[1]-'0' > 9 || s[2]-'0' > 9 || s[3]-'0' > 9 || s[5]-'0' > 9 || s[6]-'0' > 9 || s[8]-'0' > 9 ||
		s[9]-'0' > 9 || s[11]-'0' > 9 || s[12]-'0' > 9 || s[14]-'0' > 9 || s[15]-'0' > 9 || s[17]-'0' > 9 || s[18]-'0' > 9 {
		return time.Time{}, false
	}
	d2 := func(i int) int { return int(s[i]-'0')*10 + int(s[i+1]-'0') }
	year := d2(0)*100 + d2(2)
	month, day, hour, minute, sec := d2(5), d2(8), d2(11), d2(14), d2(17)
	if year < 1 || month < 1 || month > 12 || day < 1 || day > daysIn(month, year) || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	nsec := 0
	if frac := s[19 : len(s)-1]; frac != "" {
		if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 {
			return time.Time{}, false
		}
		for _, c := range []byte(frac[1:]) {
			if c-'0' > 9 {
				return time.Time{}, false
			}
			nsec = nsec*10 + int(c-'0')
		}
		nsec *= pow10[10-len(frac)]
	}
	unix := int64(daysSinceEpoch(year, month, day))*86400 + int64(hour*3600+minute*60+sec)
	return time.Unix(unix, int64(nsec)).UTC(), true
}

var pow10 = [...]int{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9}

// daysIn is how many days month has in year (proleptic Gregorian).
func daysIn(month, year int) int {
	if month == 2 && year%4 == 0 && (year%100 != 0 || year%400 == 0) {
		return 29
	}
	return int("\x00\x1f\x1c\x1f\x1e\x1f\x1e\x1f\x1f\x1e\x1f\x1e\x1f"[month])
}

// daysSinceEpoch is the number of days from 1970-01-01 to the date, for
// year >= 1 (H. Hinnant's days_from_civil).
func daysSinceEpoch(year, month, day int) int {
	if month <= 2 {
		year--
	}
	era := year / 400
	yoe := year - era*400
	doy := (153*((month+9)%12)+2)/5 + day - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// rawString returns a JSON string's value, or the compact JSON text of any
// other value, so an unexpected shape (say {"code":"PREEMPTED"}) still
// reaches Classify and the record verbatim.
func rawString(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

func syntheticInsertID(ev Event) string {
	h := sha256.New()
	for _, s := range []string{ev.LogName, ev.Time.UTC().Format(time.RFC3339Nano), ev.Method, ev.Node.Name(), ev.Worker, ev.TerminateReason, ev.Principal} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	if ev.Instance != "" { // zone hints name no node: the instance tells them apart
		h.Write([]byte(ev.Node.Parent() + "/instances/" + ev.Instance))
	}
	if a := ev.Admin; a != nil { // neither do queued resource deletes; and an operation's two entries differ
		fmt.Fprintf(h, "%s\x00%s\x00%t\x00%t", a.QueuedResource, a.OperationID, a.First, a.Last)
	}
	return SyntheticInsertIDPrefix + hex.EncodeToString(h.Sum(nil)[:12])
}
