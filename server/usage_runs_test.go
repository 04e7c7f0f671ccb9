package server

import (
	"context"
	"testing"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// A requeued job's usage is that of all its runs: the known workload burns
// 1 s of CPU per run; requeued once during or after its first run's burn,
// it ends with the first run's CPU and about 1 s more (without the sum:
// the last run's only).
func TestRequeuedUsageSumsItsRuns(t *testing.T) {
	s := startCgroupStack(t, "v2")
	bin := memburn(t)
	id := submitReq(t, s, &latticev1.AllocationRequest{Command: []string{bin + " 20 1 4"}}) // 20 MB, 1 s CPU, then 4 s idle
	waitFor(t, 20*time.Second, "running", func() bool { return s.get(t, id).State == string(model.StateRunning) })
	time.Sleep(2500 * time.Millisecond) // its burn is done (a loaded machine: generous)
	if _, err := s.allocs.Requeue(context.Background(), &latticev1.JobControlRequest{Ids: []string{id}}); err != nil {
		t.Fatal(err)
	}
	var first float64
	waitFor(t, 30*time.Second, "the first run's end", func() bool {
		a := s.get(t, id)
		first = a.GetUsage().GetUserCpuSeconds() + a.GetUsage().GetSystemCpuSeconds()
		return a.RequeueCount == 1 && a.Usage != nil
	})
	a := s.waitEnd(t, id, 60*time.Second)
	if a.State != string(model.StateCompleted) || a.RequeueCount != 1 {
		t.Fatalf("%s after %d requeues", a.State, a.RequeueCount)
	}
	total := a.GetUsage().GetUserCpuSeconds() + a.GetUsage().GetSystemCpuSeconds()
	t.Logf("first run %.2f s CPU, both runs %.2f s", first, total)
	// The first run may be stopped before its burn is done (a loaded
	// machine); the second burns its whole second.
	if first < 0.1 || total < first+0.9 || total > first+1.2 {
		t.Fatalf("usage of both runs %.2f s CPU (first run %.2f s), want the first run's and about 1 s more", total, first)
	}
}
