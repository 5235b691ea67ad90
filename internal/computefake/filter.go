package computefake

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	compute "google.golang.org/api/compute/v1"
)

// A list filter, the subset of Compute Engine's filter syntax a backend
// needs: terms FIELD OP VALUE joined by AND or by juxtaposition, each
// optionally in parentheses, e.g.
//
//	labels.tpu-autoheal=enabled
//	(labels.tpu-autoheal = "enabled") (status != TERMINATED)
//	labels.team:* AND name:trainer-*
//
// OP is = (equal), != (not equal) or : (has: VALUE * means the field is set,
// a VALUE with * is a glob, any other VALUE a substring). FIELD is name,
// status, id, zone, machineType (each compared with the field as the API
// returns it; zone and machineType also match by their last path segment)
// or labels.KEY. Anything else, OR included, is refused with a 400 naming
// the term, as Compute Engine refuses a filter it cannot read.
type filterTerm struct {
	field, op, value string
}

type listFilter []filterTerm

// parseFilter reads a filter; "" is the filter that keeps everything.
func parseFilter(s string) (listFilter, error) {
	toks, err := filterTokens(s)
	if err != nil {
		return nil, err
	}
	var f listFilter
	for i := 0; i < len(toks); {
		t := toks[i]
		if t == "AND" {
			if i == 0 || i == len(toks)-1 {
				return nil, fmt.Errorf("AND needs a term on each side")
			}
			i++
			continue
		}
		if t == "OR" || t == "NOT" || t == "-" {
			return nil, fmt.Errorf("%s is not supported by computefake's filters (only terms joined by AND)", t)
		}
		if i+2 >= len(toks) {
			return nil, fmt.Errorf("term %q: want FIELD OP VALUE", strings.Join(toks[i:], " "))
		}
		field, op, value := t, toks[i+1], toks[i+2]
		if op != "=" && op != "!=" && op != ":" {
			return nil, fmt.Errorf("term %q: operator %q is not =, : or !=", field+" "+op+" "+value, op)
		}
		if !filterField(field) {
			return nil, fmt.Errorf("term %q: field %q is not one computefake filters on (name, status, id, zone, machineType, labels.KEY)", field+op+value, field)
		}
		f = append(f, filterTerm{field: field, op: op, value: value})
		i += 3
	}
	return f, nil
}

func filterField(field string) bool {
	switch field {
	case "name", "status", "id", "zone", "machineType":
		return true
	}
	k, ok := strings.CutPrefix(field, "labels.")
	return ok && k != ""
}

// filterTokens splits a filter into fields, operators and values;
// parentheses are dropped (a conjunction of terms needs none) and quoted
// values unquoted.
func filterTokens(s string) ([]string, error) {
	var toks []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '(' || c == ')':
			i++
		case c == '=' || c == ':':
			toks = append(toks, string(c))
			i++
		case c == '!' && i+1 < len(s) && s[i+1] == '=':
			toks = append(toks, "!=")
			i += 2
		case c == '"':
			v, n, err := unquote(s[i:])
			if err != nil {
				return nil, err
			}
			toks = append(toks, v)
			i += n
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t\n()=:!\"", rune(s[j])) {
				j++
			}
			if j == i {
				return nil, fmt.Errorf("unexpected %q at offset %d", s[i], i)
			}
			toks = append(toks, s[i:j])
			i = j
		}
	}
	return toks, nil
}

// unquote reads the quoted string at the start of s, returning its value
// and its length in s.
func unquote(s string) (string, int, error) {
	for j := 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			v, err := strconv.Unquote(s[:j+1])
			if err != nil {
				return "", 0, fmt.Errorf("bad quoted value %s: %v", s[:j+1], err)
			}
			return v, j + 1, nil
		}
	}
	return "", 0, fmt.Errorf("unterminated quoted value %s", s)
}

// keep reports whether inst passes every term.
func (f listFilter) keep(inst *compute.Instance) bool {
	for _, t := range f {
		if !t.match(inst) {
			return false
		}
	}
	return true
}

func (t filterTerm) match(inst *compute.Instance) bool {
	var got string
	set := true
	switch t.field {
	case "name":
		got = inst.Name
	case "status":
		got = inst.Status
	case "id":
		got = strconv.FormatUint(inst.Id, 10)
	case "zone":
		got = inst.Zone
	case "machineType":
		got = inst.MachineType
	default:
		got, set = inst.Labels[strings.TrimPrefix(t.field, "labels.")]
	}
	eq := func(v string) bool {
		return got == v || (t.field == "zone" || t.field == "machineType") && lastSegment(got) == v
	}
	switch t.op {
	case "=":
		return set && eq(t.value)
	case "!=":
		return !set || !eq(t.value)
	}
	// ":" has
	switch {
	case !set:
		return false
	case t.value == "*":
		return true
	case strings.Contains(t.value, "*"):
		ok, _ := path.Match(t.value, got)
		return ok || eq(t.value)
	}
	return strings.Contains(got, t.value)
}
