package agent

import (
	"sync"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

// TestRunnerStartsConcurrently: starts of different allocations overlap
// (the runner's lock is not held across fork/exec); a second start of the
// same run while the first is in flight is a no-op, of another run an
// error; every run ends exactly once.
func TestRunnerStartsConcurrently(t *testing.T) {
	exits := make(chan Exit, 64)
	r, err := NewRunner(RunnerConfig{Dir: t.TempDir(), OnExit: func(e Exit) { exits <- e }})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown(time.Second)
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		for range 2 { // each twice: one of the two starts it
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- r.Start(Launch{AllocID: uint64(100 + i), Nodes: []string{"n1"}, Command: []string{"sleep 1; exit 3"}})
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	seen := map[uint64]bool{}
	for range n {
		e := waitExit(t, exits)
		if seen[e.AllocID] || e.State != model.StateFailed || e.ExitCode == nil || *e.ExitCode != 3 {
			t.Fatalf("exit %+v (seen before: %v)", e, seen[e.AllocID])
		}
		seen[e.AllocID] = true
	}
	select {
	case e := <-exits:
		t.Fatalf("a run ended twice: %+v", e)
	case <-time.After(200 * time.Millisecond):
	}
}
