package events

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/bits"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// The fast path.
//
// Parse first reads an entry with a hand-written, allocation-free scanner
// (parseFast) and falls back to the reference path (parseReference, which is
// encoding/json into the wire struct) whenever the input is anything but a
// plain, valid LogEntry: a syntax error, a known field of the wrong JSON type,
// an envelope, a key spelled with escapes or non-ASCII letters at a level we
// decode, nesting deeper than fastMaxDepth. The fallback then produces the
// exact error, so rejects read the same whichever path ran, and FuzzFastParse
// checks on arbitrary input that whenever the fast path answers, it answers
// exactly what the reference path does.
//
// To agree with encoding/json the scanner validates the whole input (JSON
// grammar, string escapes, control characters; like encoding/json it does not
// insist on valid UTF-8, but replaces invalid bytes in the strings it keeps),
// matches member names case-insensitively, lets the last duplicate win for
// scalars and merges duplicate objects, exactly as json.Unmarshal does into
// the wire struct.
//
// What it decides first is cheap: the service and method are checked on
// byte spans of the input before any string, map or time is made, so a
// foreign entry costs one validating scan and one reject.
//
// Memory: what the event keeps is copied into one allocation per event (its
// arena) plus the labels map; unsafe.String makes strings of two kinds of
// bytes only: views of the input used during the call and never kept
// (alias), and views of the arena, which is never written again once a
// string points into it (own).

// fastMaxDepth bounds the nesting the scanner follows itself; deeper input
// goes to encoding/json, which enforces its own limit.
const fastMaxDepth = 512

// maxFastLabels is how many resource labels the fast path keeps (gce_instance
// has 3, tpu_worker 4); more go to the reference path.
const maxFastLabels = 8

// span is a byte range of the input; raw spans include a string's quotes.
type span struct{ lo, hi int32 } // int32: the scanner declines input over 2 GiB

// str is a string member as the scanner found it.
type str struct {
	s      span // without the quotes
	set    bool // the member was present with a string value
	simple bool // no escapes and valid UTF-8: the bytes are the value
	ascii  bool // no escapes and no byte over 0x7f
}

type labelPair struct {
	k, v str
}

// fastEntry is the fast path's wire: spans into the input.
type fastEntry struct {
	hasInsertID                       bool
	insertID                          str
	timestamp, receiveTimestamp       str
	logName, resourceType             str
	labelsNil                         bool
	labels                            [maxFastLabels]labelPair
	nLabels                           int
	service, method, resourceName     str
	principal                         str
	terminateReason                   span // raw; lo == hi when absent
	maintStatus, maintType            span
	windowStart, windowEnd, latestWin span
	canReschedule, upcoming           span

	// Of our own control messages (delivery.go): the value of the last
	// member named exactly "autoheal", and the nonce as FollowNonce reads it.
	autoheal span // raw; lo == hi when absent
	nonce    str
	nonceBad bool // a nonce that is not a string: FollowNonce's ""
}

type scanner struct {
	b      []byte
	i      int
	e      fastEntry
	arena  []byte      // the kept strings, sized exactly before the first copy
	causes *causeCache // the Reader's, or nil

	// newline: whitespace with a '\n' was skipped. Valid input has no
	// other raw newline, so without one an element cannot hold "\n{".
	newline bool
}

// causeCache remembers the last few classifications: an export repeats a
// handful of reasons, and Classify is a pure function of its two strings.
type causeCache struct {
	entries [8]struct {
		reason, principal string
		cause             Cause
	}
	n, next int

	// The last few foreign services and methods and their rejects: an
	// export repeats a few, and the reason is a fmt.Sprintf.
	foreign     [4]foreignReject
	foreignNext int
}

type foreignReject struct {
	service, method string
	rej             *RejectError
}

// checkMethod is checkMethod(service, method) remembering the last reject.
func (c *causeCache) checkMethod(service, method string) error {
	if c == nil {
		return checkMethod(service, method)
	}
	if service == ServiceTPU && (method == MethodTerminate || method == MethodRestart) {
		return nil
	}
	for _, f := range c.foreign {
		if f.rej != nil && f.method == method && f.service == service {
			rej := *f.rej // each Item has its own error
			return &rej
		}
	}
	err := checkMethod(service, method)
	if rej, ok := err.(*RejectError); ok {
		kept := *rej
		c.foreign[c.foreignNext] = foreignReject{strings.Clone(service), strings.Clone(method), &kept}
		c.foreignNext = (c.foreignNext + 1) % len(c.foreign)
	}
	return err
}

func (c *causeCache) classify(reason, principal string) Cause {
	if c == nil {
		return Classify(reason, principal)
	}
	for i := range c.entries[:c.n] {
		if e := &c.entries[i]; e.reason == reason && e.principal == principal {
			return e.cause
		}
	}
	cause := Classify(reason, principal)
	e := &c.entries[c.next]
	e.reason, e.principal, e.cause = reason, principal, cause
	c.next = (c.next + 1) % len(c.entries)
	c.n = max(c.n, c.next)
	if c.next == 0 {
		c.n = len(c.entries)
	}
	return cause
}

// parseFast returns ok=false when the input must go to the reference path.
func parseFast(data []byte, opts Options) (ev Event, err error, ok bool) {
	if len(data) > opts.maxRaw() {
		return Event{}, reject(CodeTooLarge, "", "%d bytes is over the %d-byte limit", len(data), opts.maxRaw()), true
	}
	s := scanner{b: data}
	s.e.labelsNil = true
	if !s.top() {
		return Event{}, nil, false
	}
	if err = s.finish(opts, &ev); err == errDecline {
		return Event{}, nil, false
	}
	return ev, err, true
}

// errDecline is finish's answer for an entry it leaves to the reference
// path after all: an admin-activity entry, whose operation, status and
// request the scanner does not keep (they are rare: a node's creates and
// deletes).
var errDecline = &RejectError{Code: "fast-path-declines"}

// finish makes into *ev (a zero Event) the Event of the object the scanner
// has just read, s.b[:s.i]; the fast path answers whatever it returns.
func (s *scanner) finish(opts Options, ev *Event) error {
	e, data := &s.e, s.b
	if s.i > opts.maxEntry() {
		return reject(CodeTooLarge, "", "%d bytes is over the %d-byte limit", s.i, opts.maxEntry())
	}
	// Decide what the entry is on spans, before making anything.
	service, method := s.alias(e.service), s.alias(e.method)
	if err := s.causes.checkMethod(service, method); err != nil {
		return err
	}
	if service == ServiceTPU && method != MethodTerminate && method != MethodRestart || service == ServiceCompute && instanceChange(method) != "" {
		return errDecline // admin.go
	}
	// Everything the event keeps is copied into one allocation of its own
	// (the input belongs to the caller).
	var reason str
	if sp := e.terminateReason; sp.hi > sp.lo && data[sp.lo] == '"' {
		rs := scanner{b: data, i: int(sp.lo)}
		reason, _ = rs.str() // validated already
	}
	n := 0
	for _, v := range []*str{&e.insertID, &e.logName, &e.resourceType, &e.resourceName, &e.principal, &reason} {
		if v.simple {
			n += int(v.s.hi - v.s.lo)
		}
	}
	for _, p := range e.labels[:e.nLabels] {
		n += int(p.k.s.hi - p.k.s.lo + p.v.s.hi - p.v.s.lo)
	}
	s.arena = make([]byte, 0, n)
	w := entry{
		hasInsertID:      e.hasInsertID,
		insertID:         s.own(e.insertID),
		timestamp:        s.alias(e.timestamp), // parsed, never kept
		receiveTimestamp: s.alias(e.receiveTimestamp),
		logName:          s.own(e.logName),
		resourceType:     s.own(e.resourceType),
		service:          intern(s.alias(e.service), ServiceTPU, ServiceCompute),
		method:           intern(s.alias(e.method), knownMethods...),
		resourceName:     s.own(e.resourceName),
		principal:        s.own(e.principal),
		terminateReason:  s.raw(e.terminateReason),
		maint: maintRaw{
			status: s.raw(e.maintStatus), typ: s.raw(e.maintType),
			windowStart: s.raw(e.windowStart), windowEnd: s.raw(e.windowEnd), latestWindowStart: s.raw(e.latestWin),
			canReschedule: s.raw(e.canReschedule), upcoming: s.raw(e.upcoming),
		},
	}
	if reason.set {
		w.reason, w.hasReason = s.own(reason), true
	}
	var kv [maxFastLabels]labelKV
	var pairs []labelKV
	if !e.labelsNil {
		w.labels = make(map[string]string, e.nLabels)
		for i, p := range e.labels[:e.nLabels] {
			kv[i] = labelKV{s.own(p.k), s.own(p.v)}
			w.labels[kv[i].k] = kv[i].v
		}
		pairs = kv[:e.nLabels]
	}
	w.causes = s.causes
	return fillEvent(ev, &w, pairs, opts)
}

// alias is the value of a simple string member as a view of the input, for
// what is only compared or parsed, never kept.
func (s *scanner) alias(v str) string {
	if !v.set {
		return ""
	}
	if v.simple {
		return unsafe.String(unsafe.SliceData(s.b[v.s.lo:]), v.s.hi-v.s.lo)
	}
	return decodeString(s.b[v.s.lo-1 : v.s.hi+1])
}

// own is the value of a string member, copied into the event's arena when
// simple, else decoded by encoding/json so that escapes and invalid UTF-8
// come out exactly as the reference path has them.
func (s *scanner) own(v str) string {
	if !v.set || v.s.hi == v.s.lo {
		return ""
	}
	if !v.simple {
		return decodeString(s.b[v.s.lo-1 : v.s.hi+1])
	}
	start := len(s.arena)
	s.arena = append(s.arena, s.b[v.s.lo:v.s.hi]...) // within capacity: never moves
	return unsafe.String(&s.arena[start], v.s.hi-v.s.lo)
}

func decodeString(quoted []byte) string {
	var out string
	_ = json.Unmarshal(quoted, &out) // validated already
	return out
}

func intern(s string, known ...string) string {
	for _, k := range known {
		if s == k {
			return k
		}
	}
	return strings.Clone(s)
}

func (s *scanner) raw(sp span) json.RawMessage {
	if sp.hi == sp.lo {
		return nil
	}
	return s.b[sp.lo:sp.hi]
}

// object reads one LogEntry object at the start of s.b, leaving s.i just
// after it (the Reader frames elements this way).
func (s *scanner) object() bool {
	if len(s.b) == 0 || s.b[0] != '{' || len(s.b) > math.MaxInt32 {
		return false
	}
	return s.members(levelTop)
}

// top reads the whole input as one LogEntry object.
func (s *scanner) top() bool {
	if len(s.b) > math.MaxInt32 {
		return false
	}
	if decodeHook != nil {
		decodeHook(decoderScanner, s.b)
	}
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return false
	}
	if !s.members(levelTop) {
		return false
	}
	s.ws()
	return s.i == len(s.b)
}

type level int

const (
	levelTop level = iota
	levelResource
	levelProto
	levelAuth
	levelMetadata
	levelLabels // resource.labels, a map[string]string
)

// members reads the object at s.i ('{') and the members of it we keep. It
// is the one object scanner of the fast path: resource.labels
// (levelLabels) is read by it too, with map keys matched exactly.
func (s *scanner) members(lv level) bool {
	b := s.b
	i := s.skipWS(b, s.i+1) // after '{'
	if i < len(b) && b[i] == '}' {
		s.i = i + 1
		return true
	}
	for {
		// A member; after ',' too, so "{...,}" is invalid.
		if i >= len(b) || b[i] != '"' {
			return false
		}
		f, j := exactKey(lv, b, i)
		k := str{s: span{int32(i + 1), int32(j - 1)}, set: true, simple: true, ascii: true}
		if j == 0 {
			var ok bool
			if k, j, ok = scanStr(b, i); !ok {
				return false
			}
			if lv == levelLabels {
				if !k.simple {
					return false // a key the reference path decodes
				}
			} else if !k.ascii {
				return false // escapes, or case folding of non-ASCII names: leave it to encoding/json
			}
			f = foldKey(fieldNames[lv], b[k.s.lo:k.s.hi])
		}
		if i = s.skipWS(b, j); i >= len(b) || b[i] != ':' {
			return false
		}
		if i = s.skipWS(b, i+1); i >= len(b) {
			return false
		}
		s.i = i
		if !s.member(lv, f, k) {
			return false
		}
		if i = s.skipWS(b, s.i); i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = s.skipWS(b, i+1)
		case '}':
			s.i = i + 1
			return true
		default:
			return false
		}
	}
}

// skipWS returns the index of the first byte of b at or after i that is
// not JSON whitespace: ws on locals, inlined for compact input.
func (s *scanner) skipWS(b []byte, i int) int {
	if i < len(b) && b[i] > ' ' {
		return i
	}
	s.i = i
	s.ws()
	return s.i
}

// A memberID names a member the fast path acts on; memOther is any other,
// validated and skipped.
type memberID uint8

const (
	memOther memberID = iota
	memMessage
	memSpecversion
	memInsertID
	memTimestamp
	memReceiveTimestamp
	memLogName
	memResource
	memProtoPayload
	memType // resource.type
	memLabels
	memServiceName
	memMethodName
	memResourceName
	memAuthenticationInfo
	memMetadata
	memPrincipalEmail
	memTerminateReason
	memMaintenanceStatus
	memMaintenanceType // metadata.type
	memWindowStartTime
	memWindowEndTime
	memLatestWindowStartTime
	memCanReschedule
	memUpcomingMaintenance
	memAutoheal // a control message's word (delivery.go)
	memNonce    // a follow kick's nonce (delivery.go)
)

type fieldName struct {
	name string // as the wire struct's tag spells it
	id   memberID
}

// fieldNames are the members of each level the fast path acts on, the
// commonest first, and a few common ones it skips (memOther), named so that
// they are matched without a string scan. Within a level no two fold to the
// same name, so an exact match and encoding/json's case-insensitive one
// pick the same member.
var fieldNames = [...][]fieldName{
	levelTop: {{"protoPayload", memProtoPayload}, {"insertId", memInsertID}, {"resource", memResource},
		{"timestamp", memTimestamp}, {"logName", memLogName}, {"receiveTimestamp", memReceiveTimestamp},
		{"severity", memOther}, {"message", memMessage}, {"specversion", memSpecversion},
		{"autoheal", memAutoheal}, {"nonce", memNonce}},
	levelResource: {{"type", memType}, {"labels", memLabels}},
	levelProto: {{"@type", memOther}, {"status", memOther}, {"serviceName", memServiceName}, {"methodName", memMethodName},
		{"resourceName", memResourceName}, {"authenticationInfo", memAuthenticationInfo}, {"metadata", memMetadata}},
	levelAuth: {{"principalEmail", memPrincipalEmail}},
	levelMetadata: {{"terminateReason", memTerminateReason}, {"maintenanceStatus", memMaintenanceStatus},
		{"type", memMaintenanceType}, {"windowStartTime", memWindowStartTime}, {"windowEndTime", memWindowEndTime},
		{"latestWindowStartTime", memLatestWindowStartTime}, {"canReschedule", memCanReschedule},
		{"upcomingMaintenance", memUpcomingMaintenance}},
	// Every label is kept, by its exact name; these are only the common
	// ones, matched without a string scan.
	levelLabels: {{"project_id", memOther}, {"zone", memOther}, {"node_id", memOther}, {"worker_id", memOther},
		{"location", memOther}, {"instance_id", memOther}},
}

// namesByFirst is fieldNames by the first byte of the name: a level's
// names nearly all start differently, so a member name is compared with one.
var namesByFirst = func() (t [len(fieldNames)][0x80][]fieldName) {
	for lv, names := range fieldNames {
		for _, fn := range names {
			t[lv][fn.name[0]] = append(t[lv][fn.name[0]], fn)
		}
	}
	return t
}()

// exactKey matches the member name at b[i] ('"') against names spelled
// exactly: the common case, decided without scanning the name as a string
// (a name's bytes are plain ASCII, so the '"' after it ends the string).
// It returns the member and the index after the name's closing quote, or
// 0 when no name matches as spelled.
func exactKey(lv level, b []byte, i int) (memberID, int) {
	if i+1 >= len(b) || b[i+1] >= 0x80 {
		return memOther, 0
	}
	rest := b[i+1:]
	for _, fn := range namesByFirst[lv][rest[0]] {
		n := len(fn.name)
		if n < len(rest) && rest[n] == '"' && string(rest[:n]) == fn.name {
			return fn.id, i + 2 + n
		}
	}
	return memOther, 0
}

// foldKey matches a scanned member name case-insensitively, as
// encoding/json does.
func foldKey(names []fieldName, key []byte) memberID {
	for _, fn := range names {
		if fold(key, fn.name) {
			return fn.id
		}
	}
	return memOther
}

// member reads the value at s.i of member f (of level lv; k is its name
// when it was scanned, which labels need).
func (s *scanner) member(lv level, f memberID, k str) bool {
	e := &s.e
	var raw *span
	switch f {
	case memOther:
		if lv == levelLabels {
			return s.label(k)
		}
		if s.b[s.i] == '"' { // most skipped members are strings
			_, ok := s.str()
			return ok
		}
		return s.skip()
	case memMessage:
		if s.b[s.i] == '{' {
			return false // an envelope: the reference path unwraps it
		}
		return s.skip()
	case memSpecversion:
		return false // a structured CloudEvent
	case memAutoheal:
		// isControl reads the member by its exact name (a map key), not
		// folded as the wire struct's names are.
		if string(s.b[k.s.lo:k.s.hi]) != "autoheal" {
			return s.skip()
		}
		lo := s.i
		if !s.skip() {
			return false
		}
		e.autoheal = span{int32(lo), int32(s.i)}
		return true
	case memNonce:
		// As encoding/json into FollowNonce's struct: a string sets it,
		// null leaves it, anything else makes FollowNonce answer "".
		switch s.b[s.i] {
		case '"':
			v, ok := s.str()
			e.nonce = v
			return ok
		case 'n':
			return s.null()
		}
		e.nonceBad = true
		return s.skip()
	case memInsertID:
		if s.b[s.i] == 'n' {
			e.hasInsertID = false
			return s.null()
		}
		if s.b[s.i] != '"' {
			return false
		}
		v, ok := s.str()
		e.insertID, e.hasInsertID = v, true
		return ok
	case memTimestamp:
		return s.strField(&e.timestamp)
	case memReceiveTimestamp:
		return s.strField(&e.receiveTimestamp)
	case memLogName:
		return s.strField(&e.logName)
	case memType:
		return s.strField(&e.resourceType)
	case memServiceName:
		return s.strField(&e.service)
	case memMethodName:
		return s.strField(&e.method)
	case memResourceName:
		return s.strField(&e.resourceName)
	case memPrincipalEmail:
		return s.strField(&e.principal)
	case memResource:
		return s.objField(levelResource)
	case memProtoPayload:
		return s.objField(levelProto)
	case memAuthenticationInfo:
		return s.objField(levelAuth)
	case memMetadata:
		return s.objField(levelMetadata)
	case memLabels:
		return s.labels()
	case memTerminateReason:
		raw = &e.terminateReason
	case memMaintenanceStatus:
		raw = &e.maintStatus
	case memMaintenanceType:
		raw = &e.maintType
	case memWindowStartTime:
		raw = &e.windowStart
	case memWindowEndTime:
		raw = &e.windowEnd
	case memLatestWindowStartTime:
		raw = &e.latestWin
	case memCanReschedule:
		raw = &e.canReschedule
	case memUpcomingMaintenance:
		raw = &e.upcoming
	}
	// A metadata member kept raw (its JSON text, for eventFrom to decode).
	lo := s.i
	if !s.skip() {
		return false
	}
	*raw = span{int32(lo), int32(s.i)}
	return true
}

// strField reads a string or null into a string field (null leaves it).
func (s *scanner) strField(dst *str) bool {
	switch s.b[s.i] {
	case '"':
		v, ok := s.str()
		*dst = v
		return ok
	case 'n':
		return s.null()
	}
	return false // a type error (or a syntax error): the reference path says which
}

// objField reads an object or null into a struct field (null leaves it).
func (s *scanner) objField(lv level) bool {
	switch s.b[s.i] {
	case '{':
		return s.members(lv)
	case 'n':
		return s.null()
	}
	return false
}

// labels reads resource.labels, a map[string]string: null makes it nil, an
// object adds to it (members calls label for each member).
func (s *scanner) labels() bool {
	e := &s.e
	switch s.b[s.i] {
	case 'n':
		e.labelsNil, e.nLabels = true, 0
		return s.null()
	case '{':
		e.labelsNil = false
		return s.members(levelLabels)
	}
	return false
}

// label reads the value of label k: a string, or null for "".
func (s *scanner) label(k str) bool {
	e := &s.e
	var v str
	switch s.b[s.i] {
	case '"':
		var ok bool
		if v, ok = s.str(); !ok {
			return false
		}
	case 'n':
		if !s.null() {
			return false
		}
	default:
		return false
	}
	if e.nLabels == maxFastLabels {
		return false // more labels than any resource type has: the reference path
	}
	e.labels[e.nLabels] = labelPair{k, v}
	e.nLabels++
	return true
}

func fold(key []byte, name string) bool {
	if len(key) != len(name) {
		return false
	}
	for i := 0; i < len(key); i++ {
		a, b := key[i], name[i]
		if a == b {
			continue
		}
		if a|0x20 != b|0x20 || (a|0x20) < 'a' || (a|0x20) > 'z' {
			return false
		}
	}
	return true
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '\n':
			s.newline = true
			s.i++
		case ' ', '\t', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) null() bool {
	if len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

// strClass marks the bytes a string scan must look at: '"', '\\', control
// characters (1), and non-ASCII bytes (2).
var strClass = func() (t [256]uint8) {
	for c := 0; c < 0x20; c++ {
		t[c] = 1
	}
	t['"'], t['\\'] = 1, 1
	for c := 0x80; c < 0x100; c++ {
		t[c] = 2
	}
	return t
}()

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// special8 marks, in the high bit of each byte, the bytes of x (eight
// input bytes, little-endian) that a string scan must stop at: '"', '\\',
// below 0x20, or above 0x7f. A byte's subtraction wraps (sets its high bit)
// exactly when it is below the constant, and a byte over 0x7f is marked by
// its own high bit; a wrap can also borrow from the byte above and mark it
// falsely, never a byte below, so the lowest mark is exact:
// bits.TrailingZeros64(m)/8 is the first byte to look at.
func special8(x uint64) uint64 {
	return ((x - 0x20*lsb) | x | ((x ^ '"'*lsb) - lsb) | ((x ^ '\\'*lsb) - lsb)) & msb
}

// strEnd returns the index of the first byte of b at or after i that is
// '"', '\\', a control character or non-ASCII, or len(b).
func strEnd(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		if m := special8(binary.LittleEndian.Uint64(b[i : i+8])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for i < len(b) && strClass[b[i]] == 0 {
		i++
	}
	return i
}

// str reads the string at s.i ('"') and validates it.
func (s *scanner) str() (str, bool) {
	v, next, ok := scanStr(s.b, s.i)
	s.i = next
	return v, ok
}

// scanStr reads and validates the string at b[i] ('"'), returning it and
// the index after it (when ok). It works on locals only: the scanner's
// fields live in memory, and a string is the commonest token.
func scanStr(b []byte, i int) (str, int, bool) {
	i++
	lo := i
	simple, ascii := true, true
	for {
		if i = strEnd(b, i); i >= len(b) {
			return str{}, i, false
		}
		switch c := b[i]; {
		case c == '"':
			v := str{set: true, s: span{int32(lo), int32(i)}, simple: simple, ascii: simple && ascii}
			if simple && !ascii && !utf8.Valid(b[lo:i]) {
				v.simple = false
			}
			return v, i + 1, true
		case c == '\\':
			simple = false
			if i+1 >= len(b) {
				return str{}, i, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					return str{}, i, false
				}
				for _, h := range b[i+2 : i+6] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return str{}, i, false
					}
				}
				i += 6
			default:
				return str{}, i, false
			}
		case c < 0x20:
			return str{}, i, false
		default: // non-ASCII
			ascii = false
			i++
		}
	}
}

// skip validates and skips the value at s.i.
func (s *scanner) skip() bool {
	var stack [fastMaxDepth / 64]uint64 // bit set: the open container is an object
	depth := 0
	isObj := func(d int) bool { return stack[d>>6]&(1<<(d&63)) != 0 }
	for {
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		// A value.
		switch c := s.b[s.i]; c {
		case '{', '[':
			if depth == fastMaxDepth {
				return false
			}
			if c == '{' {
				stack[depth>>6] |= 1 << (depth & 63)
			} else {
				stack[depth>>6] &^= 1 << (depth & 63)
			}
			depth++
			s.i++
			s.ws()
			if s.i >= len(s.b) {
				return false
			}
			if close := s.b[s.i]; close == '}' && c == '{' || close == ']' && c == '[' {
				s.i++
				depth--
				break
			}
			if c == '{' {
				if !s.key() {
					return false
				}
			}
			continue
		case '"':
			if _, ok := s.str(); !ok {
				return false
			}
		case 't':
			if len(s.b)-s.i < 4 || string(s.b[s.i:s.i+4]) != "true" {
				return false
			}
			s.i += 4
		case 'f':
			if len(s.b)-s.i < 5 || string(s.b[s.i:s.i+5]) != "false" {
				return false
			}
			s.i += 5
		case 'n':
			if !s.null() {
				return false
			}
		default:
			if !s.number() {
				return false
			}
		}
		// After a value: close containers or move to the next element.
		for {
			if depth == 0 {
				return true
			}
			s.ws()
			if s.i >= len(s.b) {
				return false
			}
			c := s.b[s.i]
			obj := isObj(depth - 1)
			if c == ',' {
				s.i++
				if obj {
					s.ws()
					if !s.key() {
						return false
					}
				}
				break
			}
			if obj && c == '}' || !obj && c == ']' {
				s.i++
				depth--
				continue
			}
			return false
		}
	}
}

// key reads `"name" :` inside a skipped object.
func (s *scanner) key() bool {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return false
	}
	if _, ok := s.str(); !ok {
		return false
	}
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != ':' {
		return false
	}
	s.i++
	return true
}

// number validates a JSON number at s.i.
func (s *scanner) number() bool {
	b, i := s.b, s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return false
	}
	switch {
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	s.i = i
	return true
}
