package computefake

import (
	"fmt"
	"regexp"
	"strings"
)

// SelfLinkBase is the prefix of the URLs Compute Engine writes into selfLink,
// zone, machineType, targetLink and the like (what gcloud --format=json
// prints). The fake writes the same, whatever address it serves on.
const SelfLinkBase = "https://www.googleapis.com/compute/v1/"

// urlPrefixes are the prefixes a resource URL read from a fleet file or a
// request body may carry before "projects/…".
var urlPrefixes = []string{
	SelfLinkBase,
	"https://compute.googleapis.com/compute/v1/",
	"//compute.googleapis.com/",
	"/compute/v1/",
}

// resourceIDRE is Compute Engine's name rule (RFC 1035 labels, 1 to 63).
var resourceIDRE = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)

// projectIDRE accepts project ids and project numbers (some URLs, such as
// the created-by metadata of a MIG's instances, carry the number).
var projectIDRE = regexp.MustCompile(`^([a-z][-a-z0-9.:]{4,61}[a-z0-9]|[0-9]{1,20})$`)

// InstanceName is the instance's resource name, projects/P/zones/Z/instances/I:
// the key the fake's helpers take, and what audit entries carry in
// protoPayload.resourceName.
func InstanceName(project, zone, instance string) string {
	return "projects/" + project + "/zones/" + zone + "/instances/" + instance
}

// MIGName is a zonal managed instance group's resource name,
// projects/P/zones/Z/instanceGroupManagers/M.
func MIGName(project, zone, mig string) string {
	return "projects/" + project + "/zones/" + zone + "/instanceGroupManagers/" + mig
}

// zonePath is projects/P/zones/Z.
func zonePath(project, zone string) string { return "projects/" + project + "/zones/" + zone }

// ref is a parsed zonal resource name: projects/P/zones/Z/<collection>/N.
type ref struct {
	project, zone, collection, name string
}

func (r ref) String() string {
	return zonePath(r.project, r.zone) + "/" + r.collection + "/" + r.name
}

// trimURL strips any known URL prefix, leaving projects/… (or zones/… for a
// partial URL).
func trimURL(s string) string {
	for _, p := range urlPrefixes {
		if rest, ok := strings.CutPrefix(s, p); ok {
			return rest
		}
	}
	return s
}

// parseZonal parses projects/P/zones/Z/<collection>/N, as a name or a URL.
func parseZonal(s, collection string) (ref, error) {
	parts := strings.Split(trimURL(s), "/")
	if len(parts) != 6 || parts[0] != "projects" || parts[2] != "zones" || parts[4] != collection {
		return ref{}, fmt.Errorf("%q is not projects/P/zones/Z/%s/NAME", s, collection)
	}
	r := ref{project: parts[1], zone: parts[3], collection: collection, name: parts[5]}
	if !projectIDRE.MatchString(r.project) {
		return ref{}, fmt.Errorf("%q: %q is not a project id", s, r.project)
	}
	if !resourceIDRE.MatchString(r.zone) {
		return ref{}, fmt.Errorf("%q: %q is not a zone", s, r.zone)
	}
	if !resourceIDRE.MatchString(r.name) {
		return ref{}, fmt.Errorf("%q: %q must be 1-63 lower-case letters, digits and hyphens, starting with a letter", s, r.name)
	}
	return r, nil
}

// parseZone parses projects/P/zones/Z as a name or a URL.
func parseZone(s string) (project, zone string, err error) {
	parts := strings.Split(trimURL(s), "/")
	switch {
	case len(parts) != 4 || parts[0] != "projects" || parts[2] != "zones":
		return "", "", fmt.Errorf("%q is not a zone URL (want %sprojects/P/zones/Z)", s, SelfLinkBase)
	case !projectIDRE.MatchString(parts[1]):
		return "", "", fmt.Errorf("%q: %q is not a project id (6 to 30 lower-case letters, digits and hyphens) or number", s, parts[1])
	case !resourceIDRE.MatchString(parts[3]):
		return "", "", fmt.Errorf("%q: %q is not a zone", s, parts[3])
	}
	return parts[1], parts[3], nil
}

// lastSegment is what follows the last slash of a URL or name.
func lastSegment(s string) string { return s[strings.LastIndexByte(s, '/')+1:] }

// zoneURL and selfLink are the URLs Compute Engine writes.
func zoneURL(project, zone string) string { return SelfLinkBase + zonePath(project, zone) }

func selfLink(name string) string { return SelfLinkBase + name }

// normalizeMachineType turns a machine type given as a name, a partial URL
// (zones/Z/machineTypes/T) or a full URL into the full URL, checking its zone.
func normalizeMachineType(mt, project, zone string) (string, error) {
	if mt == "" {
		return "", fmt.Errorf("missing")
	}
	rest := trimURL(mt)
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 1:
	case len(parts) == 4 && parts[0] == "zones" && parts[2] == "machineTypes":
		if parts[1] != zone {
			return "", fmt.Errorf("%q is in zone %q, the instance in %q", mt, parts[1], zone)
		}
	case len(parts) == 6 && parts[0] == "projects" && parts[2] == "zones" && parts[4] == "machineTypes":
		if parts[3] != zone {
			return "", fmt.Errorf("%q is in zone %q, the instance in %q", mt, parts[3], zone)
		}
	default:
		return "", fmt.Errorf("%q is not a machine type (want zones/Z/machineTypes/T or its URL)", mt)
	}
	name := parts[len(parts)-1]
	if !resourceIDRE.MatchString(name) {
		return "", fmt.Errorf("%q: %q is not a machine type name", mt, name)
	}
	return SelfLinkBase + zonePath(project, zone) + "/machineTypes/" + name, nil
}
