package events

import (
	"fmt"
	"strings"
)

// Fields a node can be named by.
const (
	fieldResourceName = "protoPayload.resourceName"
	labelsPrefix      = "resource.labels."
)

// located is a node, its worker and where the project came from, for errors.
type located struct {
	NodeRef
	worker       string
	projectField string
	instance     string // for a zone hint, the Compute Engine instance
}

// nodeOf finds the node an entry is about. Two sources can name it:
// protoPayload.resourceName (projects/P/locations/Z/nodes/N, or .../zones/Z/...,
// optionally followed by /workers/W and optionally prefixed by
// //tpu.googleapis.com/) and resource.labels (project_id, zone or location,
// node_id, worker_id). Each part named by both must be the same in both:
// an entry that contradicts itself is forged or confused, and acting on
// either reading could recreate the wrong node.
func nodeOf(resourceName string, labels labelSource) (located, string, error) {
	var fromName, fromLabels [4]string // project, zone, node, worker
	if resourceName != "" {
		var err error
		if fromName, err = parseResourceName(resourceName); err != nil {
			return located{}, "", err
		}
	}
	labelNames := [4]string{"project_id", "zone", "node_id", "worker_id"}
	nl := labels.node()
	for i, k := range labelNames {
		v := nl[i]
		if v == "" {
			continue
		}
		if !validID(v) {
			return located{}, "", reject(CodeInvalidNode, labelsPrefix+k, "%q is not a valid resource id", v)
		}
		fromLabels[i] = v
	}
	if loc := nl[4]; loc != "" {
		if !validID(loc) {
			return located{}, "", reject(CodeInvalidNode, labelsPrefix+"location", "%q is not a valid resource id", loc)
		}
		if fromLabels[1] != "" && fromLabels[1] != loc {
			return located{}, "", reject(CodeNodeMismatch, labelsPrefix+"location", "%q disagrees with resource.labels.zone %q", loc, fromLabels[1])
		}
		fromLabels[1] = loc
	}
	if nl[1] != "" {
		labelNames[1] = "zone"
	} else {
		labelNames[1] = "location"
	}

	parts := [4]string{"project", "zone", "node", "worker"}
	var got [4]string
	for i := range got {
		n, l := fromName[i], fromLabels[i]
		if n != "" && l != "" && n != l {
			return located{}, "", reject(CodeNodeMismatch, fieldResourceName,
				"names %s %q but resource.labels.%s names %q", parts[i], n, labelNames[i], l)
		}
		got[i] = n
		if got[i] == "" {
			got[i] = l
		}
	}
	if got[0] == "" || got[1] == "" || got[2] == "" {
		if resourceName == "" && fromLabels == [4]string{} {
			return located{}, "", reject(CodeMissingNode, fieldResourceName,
				"no node: neither protoPayload.resourceName nor resource.labels (project_id, zone, node_id) name one")
		}
		return located{}, "", reject(CodeMissingNode, fieldResourceName,
			"no complete node: resource.labels has project_id %q, zone %q, node_id %q and there is no resourceName", got[0], got[1], got[2])
	}
	l := located{NodeRef: NodeRef{Project: got[0], Zone: got[1], Node: got[2]}, worker: got[3], projectField: fieldResourceName}
	if fromName[0] == "" {
		l.projectField = labelsPrefix + "project_id"
	}
	return l, got[3], nil
}

// labelSource is resource.labels as either path decoded them: a map, or
// (the fast path) the pairs in input order, searched last first as the
// map's last-wins assignment would have it.
type labelSource struct {
	m     map[string]string
	pairs []labelKV // when not nil, m holds the same labels
}

type labelKV struct{ k, v string }

// node returns the labels nodeOf reads: project_id, zone, node_id,
// worker_id and location, in one pass over the pairs.
func (l labelSource) node() (v [5]string) {
	if l.pairs == nil {
		return [5]string{l.m["project_id"], l.m["zone"], l.m["node_id"], l.m["worker_id"], l.m["location"]}
	}
	for _, p := range l.pairs { // in input order: the last one wins, as in the map
		switch p.k {
		case "project_id":
			v[0] = p.v
		case "zone":
			v[1] = p.v
		case "node_id":
			v[2] = p.v
		case "worker_id":
			v[3] = p.v
		case "location":
			v[4] = p.v
		}
	}
	return v
}

func (l labelSource) get(k string) string {
	if l.pairs == nil {
		return l.m[k]
	}
	for i := len(l.pairs) - 1; i >= 0; i-- {
		if l.pairs[i].k == k {
			return l.pairs[i].v
		}
	}
	return ""
}

// parseResourceName parses projects/P/(locations|zones)/Z/nodes/N[/workers/W].
func parseResourceName(s string) ([4]string, error) {
	bad := func(why string) error {
		return reject(CodeInvalidNode, fieldResourceName, "%q is not projects/P/locations/Z/nodes/N: %s", s, why)
	}
	name := strings.TrimPrefix(s, "//tpu.googleapis.com/")
	seg, n := splitPath(name)
	if n != 6 && n != 8 {
		return [4]string{}, bad(fmt.Sprintf("%d path segments", n))
	}
	if seg[0] != "projects" || (seg[2] != "locations" && seg[2] != "zones") || seg[4] != "nodes" || (n == 8 && seg[6] != "workers") {
		return [4]string{}, bad("unexpected collection")
	}
	var out [4]string
	for i, j := range []int{1, 3, 5, 7} {
		if j >= n {
			break
		}
		if !validID(seg[j]) {
			return [4]string{}, bad(fmt.Sprintf("%q is not a valid resource id", seg[j]))
		}
		out[i] = seg[j]
	}
	return out, nil
}

// splitPath splits a resource name on '/' without allocating: the first 8
// segments and how many there are in all.
func splitPath(name string) (seg [8]string, n int) {
	for {
		i := strings.IndexByte(name, '/')
		if n < len(seg) {
			if i < 0 {
				seg[n] = name
			} else {
				seg[n] = name[:i]
			}
		}
		n++
		if i < 0 {
			return seg, n
		}
		name = name[i+1:]
	}
}

// validID accepts the characters project ids (including legacy
// domain.com:project ones), zones, node ids and worker ids use. It keeps
// anything that could change the meaning of a URL path (/, ?, #, %, .., spaces)
// out of the node name remediate puts into API calls.
func validID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	if idChars[s[0]] != idAlnum {
		return false
	}
	for i := 1; i < len(s); i++ {
		if idChars[s[i]] == 0 {
			return false
		}
	}
	return true
}

const (
	idAlnum = 1 // may start an id
	idPunct = 2 // may appear after the first character
)

var idChars = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
			t[c] = idAlnum
		case c == '-', c == '_', c == '.', c == ':':
			t[c] = idPunct
		}
	}
	return t
}()
