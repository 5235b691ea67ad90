package terraform_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// A small evaluator of the Cloud Logging query language, for the clauses
// the module's metric and alert filters use, so that a test can say which
// metric a record the function writes counts in. The in-process logging
// fake passes payload clauses through (internal/loggingfake), so it cannot
// say. What is understood, as Cloud Logging defines it
// (cloud.google.com/logging/docs/view/logging-query-language):
//
//	A AND B, A OR B, NOT A, (A)   OR binds tighter than AND
//	field = value, field != value  (value quoted or bare; field = (v OR w))
//	field =~ "re2", field !~ "re2"
//	field : value (substring), field :* (the field exists)
//	field > n, >=, <, <=           numbers; severity by its ordering
//
// A field is a dotted path (jsonPayload.steps.name); through a list, it is
// each element's (a list matches when any element does). A comparison on a
// field the entry lacks is false, so NOT of it is true. Anything else (an
// implicit AND, a function such as log_id(), a global restriction) is a
// parse error: a filter the evaluator cannot read fails the test rather
// than passing unread.

// logFilter is a parsed filter.
type logFilter interface {
	match(entry map[string]any) bool
}

type andFilter []logFilter
type orFilter []logFilter
type notFilter struct{ f logFilter }

// comparison is field OP value; values holds one value, or several for
// field = (a OR b) (any of them).
type comparison struct {
	field  string
	op     string
	values []string
	re     []*regexp.Regexp
}

func (a andFilter) match(e map[string]any) bool {
	for _, f := range a {
		if !f.match(e) {
			return false
		}
	}
	return true
}

func (o orFilter) match(e map[string]any) bool {
	for _, f := range o {
		if f.match(e) {
			return true
		}
	}
	return false
}

func (n notFilter) match(e map[string]any) bool { return !n.f.match(e) }

// severities is Cloud Logging's LogSeverity ordering.
var severities = map[string]int{
	"DEFAULT": 0, "DEBUG": 100, "INFO": 200, "NOTICE": 300, "WARNING": 400,
	"ERROR": 500, "CRITICAL": 600, "ALERT": 700, "EMERGENCY": 800,
}

func (c comparison) match(e map[string]any) bool {
	got := fieldValues(e, strings.Split(c.field, "."))
	if c.op == ":" && len(c.values) == 1 && c.values[0] == "*" {
		return len(got) > 0
	}
	for _, g := range got {
		for i, want := range c.values {
			if c.compare(g, want, c.re[i]) {
				return true
			}
		}
	}
	return false
}

func (c comparison) compare(got any, want string, re *regexp.Regexp) bool {
	s := scalarString(got)
	switch c.op {
	case "=":
		return s == want
	case "!=":
		return s != want
	case ":":
		return strings.Contains(strings.ToLower(s), strings.ToLower(want))
	case "=~":
		return re.MatchString(s)
	case "!~":
		return !re.MatchString(s)
	}
	// An ordering: severity by its ordinal, else numbers.
	var g, w float64
	if c.field == "severity" {
		gs, ok1 := severities[strings.ToUpper(s)]
		ws, ok2 := severities[strings.ToUpper(want)]
		if !ok1 || !ok2 {
			return false
		}
		g, w = float64(gs), float64(ws)
	} else {
		var err1, err2 error
		g, err1 = strconv.ParseFloat(s, 64)
		w, err2 = strconv.ParseFloat(want, 64)
		if err1 != nil || err2 != nil {
			return false
		}
	}
	switch c.op {
	case ">":
		return g > w
	case ">=":
		return g >= w
	case "<":
		return g < w
	default: // "<="
		return g <= w
	}
}

// fieldValues is every scalar at path in v: through a list, each element's.
func fieldValues(v any, path []string) []any {
	if l, ok := v.([]any); ok {
		var out []any
		for _, x := range l {
			out = append(out, fieldValues(x, path)...)
		}
		return out
	}
	if len(path) == 0 {
		if v == nil {
			return nil
		}
		if _, ok := v.(map[string]any); ok {
			return []any{v} // exists; never equal to a scalar
		}
		return []any{v}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	next, ok := m[path[0]]
	if !ok {
		return nil
	}
	return fieldValues(next, path[1:])
}

func scalarString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case map[string]any:
		return "\x00object" // matches no value a filter names
	}
	return fmt.Sprint(v)
}

// parseLogFilter parses s, or says where it stopped understanding it.
func parseLogFilter(s string) (logFilter, error) {
	toks, err := lexFilter(s)
	if err != nil {
		return nil, err
	}
	p := &filterParser{toks: toks}
	f, err := p.and()
	if err != nil {
		return nil, err
	}
	if p.pos != len(p.toks) {
		return nil, fmt.Errorf("unexpected %q at token %d of %q", p.toks[p.pos].text, p.pos, s)
	}
	return f, nil
}

type filterToken struct {
	text   string
	quoted bool
}

var filterOps = []string{"=~", "!~", "!=", ">=", "<=", "=", ":", ">", "<"}

func lexFilter(s string) ([]filterToken, error) {
	var out []filterToken
	for i := 0; i < len(s); {
		r := rune(s[i])
		switch {
		case unicode.IsSpace(r):
			i++
		case r == '(' || r == ')':
			out = append(out, filterToken{text: string(r)})
			i++
		case r == '"':
			var b strings.Builder
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
					switch s[j] {
					case '"', '\\':
					default:
						b.WriteByte('\\') // a regexp escape, kept for RE2
					}
				}
				b.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, fmt.Errorf("unterminated string at %d of %q", i, s)
			}
			out = append(out, filterToken{text: b.String(), quoted: true})
			i = j + 1
		default:
			if op := opAt(s[i:]); op != "" {
				out = append(out, filterToken{text: op})
				i += len(op)
				continue
			}
			j := i
			for j < len(s) && !unicode.IsSpace(rune(s[j])) && !strings.ContainsRune("()\"", rune(s[j])) && opAt(s[j:]) == "" {
				j++
			}
			out = append(out, filterToken{text: s[i:j]})
			i = j
		}
	}
	return out, nil
}

func opAt(s string) string {
	for _, op := range filterOps {
		if strings.HasPrefix(s, op) {
			return op
		}
	}
	return ""
}

type filterParser struct {
	toks []filterToken
	pos  int
}

func (p *filterParser) peek(text string) bool {
	return p.pos < len(p.toks) && !p.toks[p.pos].quoted && p.toks[p.pos].text == text
}

// and parses A AND B ...; or parses A OR B ..., which binds tighter.
func (p *filterParser) and() (logFilter, error) {
	return p.joined("AND", p.or, func(fs []logFilter) logFilter { return andFilter(fs) })
}

func (p *filterParser) or() (logFilter, error) {
	return p.joined("OR", p.unary, func(fs []logFilter) logFilter { return orFilter(fs) })
}

// joined parses next (word next)*: one part is itself, more are join(parts).
func (p *filterParser) joined(word string, next func() (logFilter, error), join func([]logFilter) logFilter) (logFilter, error) {
	var parts []logFilter
	for {
		f, err := next()
		if err != nil {
			return nil, err
		}
		parts = append(parts, f)
		if !p.peek(word) {
			break
		}
		p.pos++
	}
	if len(parts) == 1 {
		return parts[0], nil
	}
	return join(parts), nil
}

func (p *filterParser) unary() (logFilter, error) {
	switch {
	case p.pos >= len(p.toks):
		return nil, fmt.Errorf("filter ends where a clause was expected")
	case p.peek("NOT"):
		p.pos++
		f, err := p.unary()
		return notFilter{f}, err
	case p.peek("("):
		p.pos++
		f, err := p.and()
		if err != nil {
			return nil, err
		}
		if !p.peek(")") {
			return nil, fmt.Errorf("no ) at token %d", p.pos)
		}
		p.pos++
		return f, nil
	}
	return p.comparison()
}

var fieldRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

func (p *filterParser) comparison() (logFilter, error) {
	field := p.toks[p.pos]
	if field.quoted || !fieldRE.MatchString(field.text) || field.text == "AND" || field.text == "OR" {
		return nil, fmt.Errorf("%q at token %d is not a field", field.text, p.pos)
	}
	p.pos++
	if p.pos >= len(p.toks) || opAt(p.toks[p.pos].text) != p.toks[p.pos].text || p.toks[p.pos].quoted {
		return nil, fmt.Errorf("field %s has no comparison (an implicit AND or a function is not understood)", field.text)
	}
	c := comparison{field: field.text, op: p.toks[p.pos].text}
	p.pos++
	value := func() (string, error) {
		if p.pos >= len(p.toks) {
			return "", fmt.Errorf("%s %s has no value", c.field, c.op)
		}
		t := p.toks[p.pos]
		if !t.quoted && (t.text == "(" || t.text == ")" || opAt(t.text) != "") {
			return "", fmt.Errorf("%s %s: %q is not a value", c.field, c.op, t.text)
		}
		p.pos++
		return t.text, nil
	}
	if p.peek("(") {
		p.pos++
		for {
			v, err := value()
			if err != nil {
				return nil, err
			}
			c.values = append(c.values, v)
			if p.peek(")") {
				p.pos++
				break
			}
			if !p.peek("OR") {
				return nil, fmt.Errorf("%s %s (...): want OR or ) at token %d", c.field, c.op, p.pos)
			}
			p.pos++
		}
	} else {
		v, err := value()
		if err != nil {
			return nil, err
		}
		c.values = []string{v}
	}
	for _, v := range c.values {
		var re *regexp.Regexp
		if c.op == "=~" || c.op == "!~" {
			var err error
			if re, err = regexp.Compile(v); err != nil {
				return nil, fmt.Errorf("%s %s %q: %w", c.field, c.op, v, err)
			}
		}
		c.re = append(c.re, re)
	}
	return c, nil
}

// The evaluator itself, row by row against Cloud Logging's rules: a
// metric test that leans on it is only as good as these.
func TestLogFilterEvaluator(t *testing.T) {
	entry := map[string]any{
		"logName":  "projects/p/logs/tpu-autoheal",
		"severity": "ERROR",
		"labels":   map[string]any{"app": "tpu-autoheal"},
		"jsonPayload": map[string]any{
			"action": "recreate", "node": "projects/p/zones/z/instances/i", "dryRun": true,
			"timeToRecoverSeconds": float64(95),
			"steps":                []any{map[string]any{"name": "get"}, map[string]any{"name": "insert"}},
			"refusal":              map[string]any{"kind": "stockout"},
		},
	}
	tests := []struct {
		filter string
		want   bool
	}{
		{`jsonPayload.action="recreate"`, true},
		{`jsonPayload.action=recreate`, true},
		{`jsonPayload.action="reset"`, false},
		{`jsonPayload.action=("reset" OR "recreate")`, true},
		{`jsonPayload.action!="reset"`, true},
		{`jsonPayload.node=~"^projects/[^/]+/zones/"`, true},
		{`jsonPayload.node=~"^projects/[^/]+/locations/"`, false},
		{`NOT jsonPayload.node=~"^projects/[^/]+/zones/"`, false},
		{`jsonPayload.node!~"^projects/[^/]+/locations/"`, true},
		{`jsonPayload.dryRun=true`, true},
		{`NOT jsonPayload.dryRun=true`, false},
		// A missing field compares false, so NOT of it is true.
		{`jsonPayload.outcome="recovered"`, false},
		{`NOT jsonPayload.outcome="recovered"`, true},
		{`jsonPayload.outcome:*`, false},
		{`jsonPayload.refusal:*`, true},
		{`jsonPayload.refusal.kind="stockout"`, true},
		// Through a list, any element.
		{`jsonPayload.steps.name="insert"`, true},
		{`jsonPayload.steps.name="create"`, false},
		{`jsonPayload.timeToRecoverSeconds>0`, true},
		{`jsonPayload.timeToRecoverSeconds>95`, false},
		{`severity>=ERROR`, true},
		{`severity>=CRITICAL`, false},
		{`severity<WARNING`, false},
		{`logName:"logs/tpu"`, true},
		// OR binds tighter than AND: a AND b OR c is a AND (b OR c).
		{`jsonPayload.action="reset" AND jsonPayload.dryRun=true OR severity>=ERROR`, false},
		{`jsonPayload.action="recreate" AND jsonPayload.action="reset" OR severity>=ERROR`, true},
		{`(logName="projects/p/logs/x" OR logName="projects/p/logs/tpu-autoheal") AND labels.app="tpu-autoheal"`, true},
		{`(logName="projects/p/logs/x" OR logName="projects/p/logs/y") AND labels.app="tpu-autoheal"`, false},
		{`jsonPayload.reason=~"^breaker open"`, false},
	}
	for _, tt := range tests {
		f, err := parseLogFilter(tt.filter)
		if err != nil {
			t.Errorf("parse %s: %v", tt.filter, err)
			continue
		}
		if got := f.match(entry); got != tt.want {
			t.Errorf("%s = %v, want %v", tt.filter, got, tt.want)
		}
	}
	// What it does not understand is an error, never a clause passed
	// through.
	for _, bad := range []string{
		`jsonPayload.action="a" jsonPayload.node="b"`, // implicit AND
		`log_id("tpu-autoheal")`,
		`"recreate"`, // a global restriction
		`jsonPayload.action=`,
		`(jsonPayload.action="a"`,
		`jsonPayload.node=~"("`,
		`jsonPayload.action=("a" AND "b")`,
	} {
		if _, err := parseLogFilter(bad); err == nil {
			t.Errorf("parse %s: no error; want one (not understood)", bad)
		}
	}
}

// TestEveryModuleFilterIsUnderstood: each log filter of the module (the
// metrics', the log-match alerts') is in the subset the evaluator reads,
// so a new kind of clause is noticed here and not passed over.
func TestEveryModuleFilterIsUnderstood(t *testing.T) {
	m := loadModule(t, ".")
	ctx := m.evalContext(t, map[string]cty.Value{"project_id": cty.StringVal("p")})
	n := 0
	for key, b := range m.resources {
		var exprs []hclsyntax.Expression
		switch {
		case strings.HasPrefix(key, "google_logging_metric."):
			exprs = append(exprs, attr(t, b, "filter").Expr)
		case strings.HasPrefix(key, "google_monitoring_alert_policy."):
			for _, c := range blocksOf(b, "conditions") {
				for _, l := range blocksOf(c, "condition_matched_log") {
					exprs = append(exprs, attr(t, l, "filter").Expr)
				}
			}
		}
		for _, e := range exprs {
			n++
			src := evalString(t, ctx, e)
			if _, err := parseLogFilter(src); err != nil {
				t.Errorf("%s: %v\n%s", key, err, src)
			}
		}
	}
	if n < 13 {
		t.Errorf("read %d filters; want every metric's and log-match alert's", n)
	}
}
