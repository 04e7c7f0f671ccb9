package solver

import (
	"reflect"
	"testing"
)

// TestOmitReservationNodes: leaving the reservations' node names out
// changes nothing else of the plan — the same starts, and the same
// reservations (job and time) and explanations without their nodes.
func TestOmitReservationNodes(t *testing.T) {
	for _, depth := range []int{1, 4, -1} {
		cfg := genCfg{nodes: 512, groups: 16, pending: 300, running: 150, seed: int64(7 + depth), fps: 1, depth: depth, powerHeadroom: -1}
		in := genInput(cfg)
		full := Solve(in)
		in2 := genInput(cfg)
		in2.OmitReservationNodes = true
		bare := Solve(in2)
		if len(full.Reservations) == 0 {
			t.Fatalf("depth %d: no reservation to check", depth)
		}
		if !reflect.DeepEqual(full.Starts, bare.Starts) {
			t.Errorf("depth %d: starts differ", depth)
		}
		if len(full.Reservations) != len(bare.Reservations) {
			t.Fatalf("depth %d: %d reservations, want %d", depth, len(bare.Reservations), len(full.Reservations))
		}
		for i, r := range full.Reservations {
			b := bare.Reservations[i]
			if b.Nodes != nil || b.JobID != r.JobID || !b.Start.Equal(r.Start) || len(r.Nodes) == 0 {
				t.Errorf("depth %d: reservation %+v, want %+v without nodes", depth, b, r)
			}
		}
		for i := range full.Explanations {
			e, b := full.Explanations[i], bare.Explanations[i]
			if full.reservation(e.JobID) != nil {
				e.Nodes = nil
			}
			if !reflect.DeepEqual(e, b) {
				t.Errorf("depth %d: explanation of %d differs:\n%+v\n%+v", depth, e.JobID, e, b)
				break
			}
		}
	}
}
