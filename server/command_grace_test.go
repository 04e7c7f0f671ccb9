package server

import (
	"context"
	"strings"
	"testing"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// The case: a `-- sh -c 'trap ...'` job cancelled runs its trap
// within the grace; the job records the trap's exit code.
func TestCancelledCommandJobRunsItsTrap(t *testing.T) {
	d := startDevWith(t, t.TempDir(), 2, []string{"hpc-batch"}, func(c *Config) { c.KillGrace = 10 * time.Second })
	id := d.submit(t, &latticev1.AllocationRequest{Tenant: "t", NodesMin: 1,
		Command: []string{"sh", "-c", `trap "sleep 2; echo after; exit 7" TERM; sleep 100`}})
	d.waitState(t, id, model.StateRunning)
	time.Sleep(500 * time.Millisecond) // let the shell set its trap
	if _, err := d.allocs.Cancel(context.Background(), &latticev1.CancelRequest{Ids: []string{id}}); err != nil {
		t.Fatal(err)
	}
	a := d.waitState(t, id, model.StateCancelled)
	if !a.HasExitCode || a.ExitCode != 7 {
		t.Errorf("exit code %d (recorded %v), want 7", a.ExitCode, a.HasExitCode)
	}
	if out := d.logs(t, id, false); !strings.Contains(out, "after") {
		t.Errorf("output %q, want the trap's \"after\"", out)
	}
}
