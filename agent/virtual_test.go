package agent

import (
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

// TestVirtualRuns: no process is started; `sleep S` lasts S seconds, other
// commands end at once with 0, and a stop ends a run as CANCELLED.
func TestVirtualRuns(t *testing.T) {
	exits := make(chan Exit, 8)
	r, err := NewRunner(RunnerConfig{Dir: t.TempDir(), VirtualRuns: true, OnExit: func(e Exit) { exits <- e }})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown(time.Second)
	if err := r.Start(Launch{AllocID: 1, Nodes: []string{"n1"}, Command: []string{"exit 7"}}); err != nil {
		t.Fatal(err)
	}
	if e := waitExit(t, exits); e.AllocID != 1 || e.State != model.StateCompleted {
		t.Fatalf("%+v", e)
	}
	if err := r.Start(Launch{AllocID: 2, Nodes: []string{"n1"}, Command: []string{"sleep", "0.2"}}); err != nil {
		t.Fatal(err)
	}
	begun := time.Now()
	if e := waitExit(t, exits); e.AllocID != 2 || e.State != model.StateCompleted || time.Since(begun) < 150*time.Millisecond {
		t.Fatalf("%+v after %v", e, time.Since(begun))
	}
	if err := r.Start(Launch{AllocID: 3, Nodes: []string{"n1"}, Command: []string{"sleep 3600"}}); err != nil {
		t.Fatal(err)
	}
	if !r.IsRunning(3) || !r.Stop(3, model.ReasonCancelled, time.Second) {
		t.Fatal("virtual run not running or not stoppable")
	}
	if e := waitExit(t, exits); e.AllocID != 3 || e.State != model.StateCancelled {
		t.Fatalf("%+v", e)
	}
}
