package preflight

import "testing"

// TestEvaluateConditions: what a condition on resource.name says about
// the ledger database, and what it cannot say.
func TestEvaluateConditions(t *testing.T) {
	ledger := target{names: []string{"projects/acme/databases/tpu-autoheal", "projects/123/databases/tpu-autoheal"}, complete: true,
		typ: "firestore.googleapis.com/Database", service: "firestore.googleapis.com"}
	account := target{names: []string{"projects/-/serviceAccounts/f@acme.iam.gserviceaccount.com"}} // not complete: the unique-id form is unknown
	for _, tc := range []struct {
		name string
		expr string
		t    target
		want truth
	}{
		{"the ledger by id", `resource.name == "projects/acme/databases/tpu-autoheal"`, ledger, yes},
		{"the ledger by number, single quotes", `resource.name == 'projects/123/databases/tpu-autoheal'`, ledger, yes},
		{"literal first", `"projects/acme/databases/tpu-autoheal" == resource.name`, ledger, yes},
		{"another database", `resource.name == "projects/acme/databases/other-app"`, ledger, no},
		{"not another database", `resource.name != "projects/acme/databases/other-app"`, ledger, yes},
		{"prefix of the ledger", `resource.name.startsWith("projects/acme/databases/tpu-")`, ledger, yes},
		{"prefix of documents only", `resource.name.startsWith("projects/acme/databases/tpu-autoheal/documents/x")`, ledger, no},
		{"suffix", `resource.name.endsWith("/databases/tpu-autoheal")`, ledger, yes},
		{"time: unknown", `request.time < timestamp("2027-01-01T00:00:00Z")`, ledger, unknown},
		{"other db and time: no", `resource.name == "projects/acme/databases/x" && request.time < timestamp("2027-01-01T00:00:00Z")`, ledger, no},
		{"other db or time: unknown", `resource.name == "projects/acme/databases/x" || request.time < timestamp("2027-01-01T00:00:00Z")`, ledger, unknown},
		{"ledger or time: yes", `resource.name == "projects/acme/databases/tpu-autoheal" || request.time < timestamp("2027-01-01T00:00:00Z")`, ledger, yes},
		{"negated group", `!(resource.name == "projects/acme/databases/x" || resource.name == "projects/acme/databases/y")`, ledger, yes},
		{"type matches", `resource.type == "firestore.googleapis.com/Database" && resource.name.startsWith("projects/acme/")`, ledger, yes},
		{"another type: unknown", `resource.type == "storage.googleapis.com/Bucket"`, ledger, unknown},
		{"service", `resource.service == "firestore.googleapis.com"`, ledger, yes},
		{"a call we do not read", `resource.name.extract("databases/{db}/") == "tpu-autoheal"`, ledger, unknown},
		{"unbalanced", `(resource.name == "projects/acme/databases/tpu-autoheal"`, ledger, unknown},
		{"unterminated string", `resource.name == "projects/acme`, ledger, unknown},
		{"incomplete names: another name is unknown", `resource.name == "projects/-/serviceAccounts/1234567890"`, account, unknown},
		{"incomplete names: ours is yes", `resource.name == "projects/-/serviceAccounts/f@acme.iam.gserviceaccount.com"`, account, yes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := evaluate(tc.expr, tc.t); got != tc.want {
				t.Errorf("evaluate(%s) = %d; want %d", tc.expr, got, tc.want)
			}
		})
	}
}
