package preflight

import (
	"regexp"
	"strings"
)

// Why a principal is expected.
const (
	WhyFunction   = "the function's own account"
	WhyOwner      = "an owner of the project"
	WhyOperator   = "an operator, given by --operators"
	WhySinkWriter = "a log sink's writer identity, Google-managed, publishing only what its sink routes"
	WhyAgent      = "a Google-managed service agent of the project"
	WhyUnexpected = "unexpected"
)

// legacyAgentDomains are the Google-owned projects whose service agents
// predate the gcp-sa-* naming (service-NUMBER@DOMAIN.iam.gserviceaccount.com).
var legacyAgentDomains = []string{
	"cloud-tpu", "compute-system", "container-engine-robot", "gcf-admin-robot",
	"serverless-robot-prod", "cloud-ml", "cloud-filer", "dataflow-service-producer-prod",
}

var (
	agentRE      = regexp.MustCompile(`^serviceAccount:service-([0-9]+)@([a-z0-9-]+)\.iam\.gserviceaccount\.com$`)
	sinkWriterRE = regexp.MustCompile(`^serviceAccount:[a-z0-9-]+@gcp-sa-logging\.iam\.gserviceaccount\.com$`)
)

// expectations classify principals.
type expectations struct {
	function  string
	owners    map[string]bool
	operators map[string]bool
	number    string
	project   string
}

// newExpectations: the function's account, the project's owners (holders
// of roles/owner in its own policy, with no condition) and the operators.
func newExpectations(o Options, number string, host Policy) expectations {
	e := expectations{function: normalMember("serviceAccount:" + o.ServiceAccount), owners: map[string]bool{}, operators: map[string]bool{}, number: number, project: o.Project}
	for _, b := range host.Bindings {
		if b.Role == "roles/owner" && b.Condition == "" {
			for _, m := range b.Members {
				e.owners[normalMember(m)] = true
			}
		}
	}
	for _, m := range o.Operators {
		e.operators[normalMember(m)] = true
	}
	return e
}

// of says whether m holding c is expected, and why.
func (e expectations) of(m string, c Capability) (bool, string) {
	switch {
	case m == e.function:
		return true, WhyFunction
	case e.owners[m] || m == "projectOwner:"+e.project: // projectOwner: is how some policies name the owners
		return true, WhyOwner
	case e.operators[m]:
		return true, WhyOperator
	case c == PublishEvents && sinkWriterRE.MatchString(m):
		return true, WhySinkWriter
	case e.isAgent(m):
		return true, WhyAgent
	}
	return false, WhyUnexpected
}

// isAgent: service-NUMBER@DOMAIN.iam.gserviceaccount.com with the host
// project's number and a Google-owned domain (gcp-sa-*, or a legacy one).
// A look-alike in a project of one's own (service-NUMBER@my-project…) is
// not one.
func (e expectations) isAgent(m string) bool {
	g := agentRE.FindStringSubmatch(m)
	if g == nil || g[1] != e.number || e.number == "" {
		return false
	}
	if strings.HasPrefix(g[2], "gcp-sa-") {
		return true
	}
	for _, d := range legacyAgentDomains {
		if g[2] == d {
			return true
		}
	}
	return false
}
