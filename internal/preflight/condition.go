package preflight

import (
	"regexp"
	"strings"
)

// truth is a three-valued answer: whether an IAM condition holds for a
// resource, when the check can tell.
type truth int8

const (
	no truth = iota - 1
	unknown
	yes
)

func (t truth) not() truth { return -t }

func and(a, b truth) truth { return min(a, b) }

func or(a, b truth) truth { return max(a, b) }

// target is the resource a permission is checked on, as an IAM condition
// sees it: every name it may be given (projects by id and by number),
// whether that list is complete (else a name compared against that is not
// in it might still be the resource's), and its type and service.
type target struct {
	names    []string
	complete bool
	typ      string
	service  string
}

// evaluate says whether the condition expression holds for t. It knows
// the attributes a condition on resource.name is written with:
// resource.name == / != "…", resource.name.startsWith("…") and
// .endsWith("…"), resource.type and resource.service compared to a string,
// joined by &&, || and ! with parentheses. Anything else (request.time,
// tags, extract(), a syntax it does not read) is unknown, and so is the
// whole expression unless the rest decides it (false && x is false).
func evaluate(expr string, t target) truth {
	toks, ok := tokenize(expr)
	if !ok {
		return unknown
	}
	p := &condParser{toks: toks, t: t}
	v := p.or()
	if p.pos != len(p.toks) {
		return unknown
	}
	return v
}

type tokKind int

const (
	tokAtom tokKind = iota
	tokAnd
	tokOr
	tokNot
	tokOpen
	tokClose
)

type token struct {
	kind tokKind
	text string
}

// tokenize splits an expression into atoms (a comparison or a call, text
// as written) and the operators and parentheses around them. A call's own
// parentheses stay in its atom.
func tokenize(expr string) ([]token, bool) {
	var toks []token
	var atom strings.Builder
	flush := func() {
		if s := strings.TrimSpace(atom.String()); s != "" {
			toks = append(toks, token{kind: tokAtom, text: s})
		}
		atom.Reset()
	}
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		switch {
		case c == '"' || c == '\'':
			j := strings.IndexByte(expr[i+1:], c)
			if j < 0 {
				return nil, false
			}
			atom.WriteString(expr[i : i+j+2])
			i += j + 1
		case strings.HasPrefix(expr[i:], "&&"):
			flush()
			toks = append(toks, token{kind: tokAnd})
			i++
		case strings.HasPrefix(expr[i:], "||"):
			flush()
			toks = append(toks, token{kind: tokOr})
			i++
		case c == '!' && !strings.HasPrefix(expr[i:], "!=") && strings.TrimSpace(atom.String()) == "":
			toks = append(toks, token{kind: tokNot})
		case c == '(':
			s := strings.TrimRight(atom.String(), " \t\n")
			if s != "" && isIdentByte(s[len(s)-1]) { // a call: keep its arguments in the atom
				end, ok := closing(expr, i)
				if !ok {
					return nil, false
				}
				atom.WriteString(expr[i : end+1])
				i = end
				continue
			}
			flush()
			toks = append(toks, token{kind: tokOpen})
		case c == ')':
			flush()
			toks = append(toks, token{kind: tokClose})
		default:
			atom.WriteByte(c)
		}
	}
	flush()
	return toks, true
}

func isIdentByte(c byte) bool {
	return c == '_' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// closing is the index of the parenthesis closing the one at open,
// skipping strings.
func closing(expr string, open int) (int, bool) {
	depth := 0
	for i := open; i < len(expr); i++ {
		switch c := expr[i]; c {
		case '"', '\'':
			j := strings.IndexByte(expr[i+1:], c)
			if j < 0 {
				return 0, false
			}
			i += j + 1
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i, true
			}
		}
	}
	return 0, false
}

type condParser struct {
	toks []token
	pos  int
	t    target
}

func (p *condParser) peek() (token, bool) {
	if p.pos < len(p.toks) {
		return p.toks[p.pos], true
	}
	return token{}, false
}

func (p *condParser) or() truth {
	v := p.and()
	for tok, ok := p.peek(); ok && tok.kind == tokOr; tok, ok = p.peek() {
		p.pos++
		v = or(v, p.and())
	}
	return v
}

func (p *condParser) and() truth {
	v := p.unary()
	for tok, ok := p.peek(); ok && tok.kind == tokAnd; tok, ok = p.peek() {
		p.pos++
		v = and(v, p.unary())
	}
	return v
}

func (p *condParser) unary() truth {
	tok, ok := p.peek()
	if !ok {
		return unknown
	}
	switch tok.kind {
	case tokNot:
		p.pos++
		return p.unary().not()
	case tokOpen:
		p.pos++
		v := p.or()
		if tok, ok := p.peek(); ok && tok.kind == tokClose {
			p.pos++
			return v
		}
		p.pos = len(p.toks) + 1 // unbalanced: the caller sees pos past the end
		return unknown
	case tokAtom:
		p.pos++
		return p.atom(tok.text)
	}
	p.pos = len(p.toks) + 1
	return unknown
}

const strLit = `(?:"([^"]*)"|'([^']*)')`

var (
	nameCompare    = regexp.MustCompile(`^resource\.name\s*(==|!=)\s*` + strLit + `$`)
	nameCompareRev = regexp.MustCompile(`^` + strLit + `\s*(==|!=)\s*resource\.name$`)
	nameCall       = regexp.MustCompile(`^resource\.name\.(startsWith|endsWith)\(\s*` + strLit + `\s*\)$`)
	attrCompare    = regexp.MustCompile(`^resource\.(type|service)\s*(==|!=)\s*` + strLit + `$`)
)

func lit(m []string, i int) string { return m[i] + m[i+1] }

// atom evaluates one comparison or call.
func (p *condParser) atom(s string) truth {
	t := p.t
	if m := nameCompare.FindStringSubmatch(s); m != nil {
		return negateIf(m[1] == "!=", t.nameIs(lit(m, 2)))
	}
	if m := nameCompareRev.FindStringSubmatch(s); m != nil {
		return negateIf(m[3] == "!=", t.nameIs(lit(m, 1)))
	}
	if m := nameCall.FindStringSubmatch(s); m != nil {
		match := strings.HasPrefix
		if m[1] == "endsWith" {
			match = strings.HasSuffix
		}
		return t.anyName(func(n string) bool { return match(n, lit(m, 2)) })
	}
	if m := attrCompare.FindStringSubmatch(s); m != nil {
		ours := t.typ
		if m[1] == "service" {
			ours = t.service
		}
		v := unknown // another value may still be what the service sends
		if ours != "" && lit(m, 3) == ours {
			v = yes
		}
		return negateIf(m[2] == "!=", v)
	}
	return unknown
}

func negateIf(neg bool, v truth) truth {
	if neg {
		return v.not()
	}
	return v
}

func (t target) nameIs(s string) truth {
	return t.anyName(func(n string) bool { return n == s })
}

func (t target) anyName(match func(string) bool) truth {
	for _, n := range t.names {
		if match(n) {
			return yes
		}
	}
	if t.complete {
		return no
	}
	return unknown
}
