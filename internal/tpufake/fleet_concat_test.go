package tpufake

import (
	"strings"
	"testing"
)

const describeA = `{
  "acceleratorType": "v4-8",
  "name": "projects/acme-ml/locations/us-central2-b/nodes/a",
  "state": "READY"
}
`

const describeB = `{
  "acceleratorType": "v5litepod-8",
  "labels": {"tpu-autoheal": "enabled"},
  "name": "projects/acme-ml/locations/us-west4-a/nodes/b",
  "state": "PREEMPTED"
}`

func TestReadFleetOfConcatenatedDescribeOutputs(t *testing.T) {
	f, err := ReadFleet(strings.NewReader(describeA + describeB + "\n"))
	if err != nil {
		t.Fatalf("ReadFleet: %v", err)
	}
	var got []string
	for _, n := range f.Nodes {
		got = append(got, n.Name+" "+n.State)
	}
	want := []string{"projects/acme-ml/locations/us-central2-b/nodes/a READY", "projects/acme-ml/locations/us-west4-a/nodes/b PREEMPTED"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("nodes = %q, want %q", got, want)
	}
}

func TestReadFleetOfConcatenatedValuesNamesTheBadOne(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"a value that is not a node", describeA + `{"nodes": []}`, "value 2 of 2"},
		{"an array after a node", describeA + `[]`, "value 2 of 2"},
		{"a syntax error in the second", describeA + `{"name": "x",}`, "value 2"},
		{"duplicate names", describeA + describeA, "duplicate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadFleet(strings.NewReader(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ReadFleet = %v, want an error naming %q", err, tt.want)
			}
		})
	}
}
