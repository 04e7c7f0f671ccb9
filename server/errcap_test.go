package server

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/status"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// Errors never echo unbounded input: a refusal quoting a huge value says
// so in a bounded message.
func TestErrorsDoNotEchoUnboundedInput(t *testing.T) {
	d := startDevWith(t, t.TempDir(), 1, []string{"hpc-batch"}, nil)
	huge := strings.Repeat("v", 200_000)
	for name, req := range map[string]*latticev1.AllocationRequest{
		"vcluster":  {NodesMin: 1, WalltimeSeconds: 60, Command: []string{"true"}, Vcluster: huge},
		"tenant":    {NodesMin: 1, WalltimeSeconds: 60, Command: []string{"true"}, Tenant: huge},
		"partition": {NodesMin: 1, WalltimeSeconds: 60, Command: []string{"true"}, Qos: huge},
	} {
		_, err := d.allocs.Submit(context.Background(), &latticev1.SubmitRequest{Request: req})
		if err == nil {
			t.Fatalf("%s: a 200 kB value was accepted", name)
		}
		if msg := status.Convert(err).Message(); len(msg) > maxErrorMessage+64 {
			t.Fatalf("%s: the refusal is %d bytes long", name, len(msg))
		}
	}
	for _, id := range []string{huge, huge + "_1"} {
		_, err := d.allocs.Get(context.Background(), &latticev1.GetAllocationRequest{Id: id})
		if msg := status.Convert(err).Message(); err == nil || len(msg) > maxErrorMessage+64 {
			t.Fatalf("get of a 200 kB id: %d bytes (%v)", len(msg), err == nil)
		}
	}
	if clipped := clipError(status.Error(5, strings.Repeat("x", 10_000))); len(status.Convert(clipped).Message()) > maxErrorMessage+32 {
		t.Fatal("clipError left a 10 kB message")
	}
}
