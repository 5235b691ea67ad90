package main

import (
	"fmt"
	"io"

	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// wireReplayResume turns on the resume watch (#11) for a replay against the
// simulated fleet: incidents (in memory) open and close from the records,
// and the guest attributes the fleet file gives a node ("guestAttributes",
// key autoheal/resumed per worker) close its incident with one resumed
// record in --records, as the deployed function's would. The check is the
// handler's, after a record of a node seen healthy (a recovery that ended,
// a node that recovered by itself); replay makes no sweep's look at every
// open incident, whose 7-day bound would close at once, on the wall clock,
// the incidents of an old export's nodes still down.
func wireReplayResume(rd *remediate.Deps, guest remediate.GuestAttributes, stderr io.Writer) {
	rd.Guest, rd.Incidents = guest, ledger.NewMemoryIncidents()
	rd.OnIncidentError = func(err error) { fmt.Fprintf(stderr, "autoheal replay: %v\n", err) }
}
