package server

import (
	"context"
	"testing"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// busyGauge reads lattice_nodes_busy of one vCluster from the registry
// (-1 when the series is missing).
func busyGauge(t *testing.T, s *Server, vc string) float64 {
	t.Helper()
	families, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "lattice_nodes_busy" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "vcluster" && l.GetValue() == vc {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

// TestNodesBusyGauge: lattice_nodes_busy counts the nodes running work in
// each vCluster (the Grafana "Nodes in use" panel), zeros included, and
// falls back when the work ends.
func TestNodesBusyGauge(t *testing.T) {
	d := startDev(t, t.TempDir(), 8)
	if got := busyGauge(t, d.srv, "hpc-batch"); got != 0 {
		t.Fatalf("idle cluster: lattice_nodes_busy{vcluster=hpc-batch} = %v, want 0", got)
	}
	if got := busyGauge(t, d.srv, "ml-training"); got != 0 {
		t.Fatalf("idle cluster: lattice_nodes_busy{vcluster=ml-training} = %v, want 0", got)
	}
	id := d.submit(t, &latticev1.AllocationRequest{Name: "two", NodesMin: 2, Command: []string{"sleep 30"}})
	d.waitState(t, id, model.StateRunning)
	if got := busyGauge(t, d.srv, "hpc-batch"); got != 2 {
		t.Fatalf("a 2-node job runs: lattice_nodes_busy{vcluster=hpc-batch} = %v, want 2", got)
	}
	if got := busyGauge(t, d.srv, "ml-training"); got != 0 {
		t.Fatalf("lattice_nodes_busy{vcluster=ml-training} = %v, want 0", got)
	}
	if _, err := d.allocs.Cancel(context.Background(), &latticev1.CancelRequest{Ids: []string{id}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "nodes idle again", func() bool { return busyGauge(t, d.srv, "hpc-batch") == 0 })
}
