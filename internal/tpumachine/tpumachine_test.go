package tpumachine_test

import (
	"testing"

	"github.com/tpu-autoheal/autoheal/internal/tpumachine"
)

func TestChipsPerVM(t *testing.T) {
	tests := []struct {
		machineType string
		want        int
	}{
		{"tpu7x-standard-4t", 4},
		{"https://www.googleapis.com/compute/v1/projects/acme-ml/zones/us-central1-c/machineTypes/tpu7x-standard-4t", 4},
		{"zones/us-central1-c/machineTypes/ct6e-standard-8t", 8},
		{"ct6e-standard-1t", 1},
		{"ct5p-hightpu-4t", 4},
		{"ct5lp-hightpu-8t", 8},
		{"tpu8x-standard-16t", 16}, // not in the table: from the naming rule
		{"n2-standard-8", 0},
		{"a3-highgpu-8g", 0},
		{"ct6e-standard-0t", 0},
		{"", 0},
	}
	for _, tt := range tests {
		if got := tpumachine.ChipsPerVM(tt.machineType); got != tt.want {
			t.Errorf("ChipsPerVM(%q) = %d, want %d", tt.machineType, got, tt.want)
		}
	}
	if mt, ok := tpumachine.Lookup("tpu7x-standard-4t"); !ok || mt.Version != "TPU7x" {
		t.Errorf("Lookup(tpu7x-standard-4t) = %+v, %v", mt, ok)
	}
}
