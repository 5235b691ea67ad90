// Package tpumachine knows Compute Engine's TPU machine types: which machine
// types are TPU ones and how many chips one VM of each has. The Compute
// Engine backend (computevm), its simulator (computefake) and the report
// (chip-hours of an instance incident) share it; it is pure and has no I/O.
package tpumachine

import (
	"regexp"
	"strconv"
	"strings"
)

// TPUMachineType is what is known of a Compute Engine TPU machine type.
type TPUMachineType struct {
	Name    string // e.g. tpu7x-standard-4t
	Version string // TPU generation: TPU7x, v6e, v5p, v5e
	Chips   int    // TPU chips attached to one VM of this type
}

// tpuMachineTypes are the TPU machine types Compute Engine and GKE document
// (see docs/computeengine.md for the sources). The trailing "-Nt" of each
// name is its chips per VM.
var machineTypes = map[string]TPUMachineType{
	"tpu7x-standard-4t": {"tpu7x-standard-4t", "TPU7x", 4},
	"ct6e-standard-1t":  {"ct6e-standard-1t", "v6e", 1},
	"ct6e-standard-4t":  {"ct6e-standard-4t", "v6e", 4},
	"ct6e-standard-8t":  {"ct6e-standard-8t", "v6e", 8},
	"ct5p-hightpu-4t":   {"ct5p-hightpu-4t", "v5p", 4},
	"ct5lp-hightpu-1t":  {"ct5lp-hightpu-1t", "v5e", 1},
	"ct5lp-hightpu-4t":  {"ct5lp-hightpu-4t", "v5e", 4},
	"ct5lp-hightpu-8t":  {"ct5lp-hightpu-8t", "v5e", 8},
}

// tpuFamilyRE matches TPU machine type names the table does not list yet:
// a ctN… or tpuN… family, a shape, and N chips ("-4t").
var tpuFamilyRE = regexp.MustCompile(`^(ct[0-9][a-z0-9]*|tpu[0-9][a-z0-9]*)-[a-z]+-([0-9]{1,3})t$`)

// Lookup reports the TPU machine type of machineType (a name
// or a machine type URL, as in an instance's machineType). A name the table
// does not list but that follows the TPU naming (ct6e-…-8t, tpu7x-…-4t) is
// reported with its chips from the suffix and Version "". Any other machine
// type (n2-standard-8, a GPU type) is not a TPU machine type: ok is false.
func Lookup(machineType string) (mt TPUMachineType, ok bool) {
	name := machineType[strings.LastIndexByte(machineType, '/')+1:]
	if mt, ok := machineTypes[name]; ok {
		return mt, true
	}
	m := tpuFamilyRE.FindStringSubmatch(name)
	if m == nil {
		return TPUMachineType{}, false
	}
	chips, err := strconv.Atoi(m[2])
	if err != nil || chips < 1 {
		return TPUMachineType{}, false
	}
	return TPUMachineType{Name: name, Chips: chips}, true
}

// ChipsPerVM is the number of TPU chips of one VM of machineType, 0 for a
// machine type that is not a TPU one.
func ChipsPerVM(machineType string) int {
	mt, _ := Lookup(machineType)
	return mt.Chips
}

// IsTPU reports whether machineType (a name or URL) is a TPU machine type.
func IsTPU(machineType string) bool { return ChipsPerVM(machineType) > 0 }
