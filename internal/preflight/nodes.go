package preflight

import (
	"context"
	"fmt"
	"strings"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// NodeLister lists the opted-in nodes to check (cmd/autoheal lists them
// through the TPU API).
type NodeLister func(ctx context.Context) ([]*tpu.Node, error)

// NodeAccounts is the check Options.UnactableNodes runs: each listed node
// through the recovery's own service-account guard (remediate.AccountGuard:
// listed in allowed, AUTOHEAL_NODE_SERVICE_ACCOUNTS, and the function able
// to act as it). The operator's credentials cannot ask IAM what the
// function may do (testIamPermissions answers for its caller), so "can act
// as" is read from the policies: a binding of the function's account, on
// the node's service account or on the project it belongs to, whose role
// has iam.serviceAccounts.actAs (conditions counted as granting).
func NodeAccounts(src Source, function string, allowed []string, list NodeLister) NodeAccountCheck {
	return func(ctx context.Context) ([]NodeAccount, error) {
		nodes, err := list(ctx)
		if err != nil {
			return nil, err
		}
		roles := roleCache{src: src, perms: map[string][]string{}}
		guard := &remediate.AccountGuard{Allowed: allowed, ActAs: policyActAs{src: src, member: "serviceAccount:" + strings.ToLower(function), roles: &roles}}
		out := []NodeAccount{}
		for _, n := range nodes {
			why, err := guard.Check(ctx, n)
			if err != nil {
				return nil, fmt.Errorf("node %s: %w", n.Name, err)
			}
			if why == "" {
				continue
			}
			email := ""
			if n.ServiceAccount != nil {
				email = n.ServiceAccount.Email
			}
			out = append(out, NodeAccount{Node: n.Name, ServiceAccount: email, Reason: why})
		}
		return out, nil
	}
}

// policyActAs answers remediate.ActAsChecker from IAM policies.
type policyActAs struct {
	src    Source
	member string
	roles  *roleCache
}

// CanActAs implements remediate.ActAsChecker.
func (p policyActAs) CanActAs(ctx context.Context, email string) (bool, error) {
	resources := []string{"projects/-/serviceAccounts/" + email}
	if _, domain, ok := strings.Cut(email, "@"); ok && strings.HasSuffix(domain, ".iam.gserviceaccount.com") {
		resources = append(resources, "projects/"+strings.TrimSuffix(domain, ".iam.gserviceaccount.com"))
	}
	var r Report
	for _, res := range resources {
		pol, err := p.src.Policy(ctx, res)
		if err != nil {
			return false, fmt.Errorf("read the IAM policy of %s: %w", res, err)
		}
		for _, b := range pol.Bindings {
			if !hasMember(b.Members, p.member) {
				continue
			}
			perms, err := p.roles.permissions(ctx, b.Role, &r)
			if err != nil {
				return false, err
			}
			for _, perm := range perms {
				if perm == "iam.serviceAccounts.actAs" {
					return true, nil
				}
			}
		}
	}
	return false, nil
}

func hasMember(members []string, m string) bool {
	for _, x := range members {
		if normalMember(x) == m {
			return true
		}
	}
	return false
}
