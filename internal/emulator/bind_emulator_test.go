//go:build emulator

package emulator

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestStartMovesToAnotherPortWhenItsPortIsTaken: the port Start chose is
// taken, before the emulator binds it, by a server that answers the
// readiness probe as an emulator would. Start must neither take that
// server for its emulator nor wait out its startup timeout: it starts the
// emulator again on another port.
func TestStartMovesToAnotherPortWhenItsPortIsTaken(t *testing.T) {
	impostor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound) // what the Firestore probe gets from a real emulator
	}))
	defer impostor.Close()
	taken := impostor.Listener.Addr().String()

	picks := 0
	pickAddr = func() (string, error) {
		picks++
		if picks == 1 {
			return taken, nil
		}
		return freeAddr()
	}
	defer func() { pickAddr = freeAddr }()
	t.Setenv(Firestore.EnvVar(), "") // not the one TestMain started

	e, err := Start(context.Background(), Firestore)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer e.Stop()
	if e.Host == taken {
		t.Fatalf("Start took the impostor on %s for its emulator", taken)
	}
	if picks != 2 {
		t.Errorf("Start picked %d ports; want 2 (the taken one, then another)", picks)
	}
	if len(e.ProcessGroups()) == 0 {
		t.Errorf("the emulator on %s is not one Start owns", e.Host)
	}
	if _, port, _ := net.SplitHostPort(e.Host); port == "" {
		t.Errorf("host %q has no port", e.Host)
	}
}

// TestFreeAddrIsBelowTheEphemeralRange: a port from the kernel's
// ephemeral range can be taken as an outgoing connection's source port
// between the choice and the emulator's bind.
func TestFreeAddrIsBelowTheEphemeralRange(t *testing.T) {
	lo := ephemeralLow()
	if lo <= 21000 {
		t.Skipf("ephemeral range starts at %d: nothing below it to choose", lo)
	}
	for i := 0; i < 20; i++ {
		addr, err := freeAddr()
		if err != nil {
			t.Fatal(err)
		}
		_, p, _ := net.SplitHostPort(addr)
		var port int
		for _, c := range p {
			port = port*10 + int(c-'0')
		}
		if port < 20000 || port >= lo {
			t.Fatalf("freeAddr() = %s; want a port in [20000, %d)", addr, lo)
		}
	}
}
