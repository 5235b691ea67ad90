package preflight

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// WriteJSON writes the report as one JSON object (lists are [] when
// empty).
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report for a person: the unexpected principals
// first, each capability with the grants that give it, then the expected
// ones by principal, then what could not be checked.
func WriteText(w io.Writer, r *Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Preflight of project %s (number %s)\n", r.Project, r.ProjectNumber)
	fmt.Fprintf(&b, "  events topic      %s\n", r.Topic)
	fmt.Fprintf(&b, "  function account  %s\n", r.ServiceAccount)
	fmt.Fprintf(&b, "  ledger database   projects/%s/databases/%s\n", r.Project, r.Database)
	fmt.Fprintf(&b, "  policies read     %s\n", strings.Join(r.PoliciesRead, ", "))

	unexpected := r.Unexpected()
	if len(unexpected) == 0 {
		b.WriteString("\nUnexpected: none. Only the principals below can write the ledger, publish to the events topic or act as the function's account.\n")
	} else {
		fmt.Fprintf(&b, "\nUNEXPECTED: %s can steer this deployment, and %s none of the function, the project's owners or the operators:\n",
			countOf(principals(unexpected), "principal", "principals"), isAre(principals(unexpected)))
		for _, f := range unexpected {
			fmt.Fprintf(&b, "  %s can %s\n", f.Principal, f.Capability)
			for _, g := range f.Grants {
				fmt.Fprintf(&b, "      %s on %s: %s%s\n", g.Role, g.Resource, strings.Join(g.Permissions, ", "), conditionText(g))
			}
		}
	}

	var expected []Finding
	for _, f := range r.Findings {
		if f.Expected {
			expected = append(expected, f)
		}
	}
	if len(expected) > 0 {
		fmt.Fprintf(&b, "\nExpected (%d):\n", principals(expected))
		for i := 0; i < len(expected); {
			j, caps := i, []string{}
			for ; j < len(expected) && expected[j].Principal == expected[i].Principal; j++ {
				caps = append(caps, string(expected[j].Capability))
			}
			fmt.Fprintf(&b, "  %s (%s): %s\n", expected[i].Principal, expected[i].Why, strings.Join(caps, "; "))
			i = j
		}
	}
	if len(r.Notes) > 0 {
		b.WriteString("\nNot checked, or checked only in part:\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "  - %s\n", n)
		}
	}
	b.WriteString("\nOpted-in nodes whose service account the function cannot act as: ")
	switch {
	case !r.UnactableNodesChecked:
		b.WriteString("not checked (give --node-projects, --zones and --node-service-accounts).\n")
	case len(r.UnactableNodes) == 0:
		b.WriteString("none.\n")
	default:
		fmt.Fprintf(&b, "%d (a recovery of them would be skipped before its delete):\n", len(r.UnactableNodes))
		for _, n := range r.UnactableNodes {
			fmt.Fprintf(&b, "  %s runs as %s: %s\n", n.Node, n.ServiceAccount, n.Reason)
		}
	}
	if len(unexpected) > 0 {
		fmt.Fprintf(&b, "\nResult: %s unexpected. Remove the grants above, or, for an operator, add it to --operators.\n", countOf(principals(unexpected), "principal", "principals"))
	} else {
		b.WriteString("\nResult: no unexpected principal.\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func conditionText(g Grant) string {
	switch {
	case g.Condition == "":
		return ""
	case g.ConditionNotEvaluated:
		return fmt.Sprintf(" (if %s: not evaluated, counted)", g.Condition)
	}
	return fmt.Sprintf(" (if %s: holds)", g.Condition)
}

// principals counts the distinct principals of findings sorted by
// principal within their expected-ness.
func principals(fs []Finding) int {
	seen := map[string]bool{}
	for _, f := range fs {
		seen[f.Principal] = true
	}
	return len(seen)
}

func countOf(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func isAre(n int) string {
	if n == 1 {
		return "it is"
	}
	return "they are"
}
