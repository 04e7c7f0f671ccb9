package server

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

func (d *devStack) control(t *testing.T, call func(context.Context, *latticev1.JobControlRequest, ...grpc.CallOption) (*latticev1.JobControlResponse, error), ids ...string) *latticev1.JobControlResponse {
	t.Helper()
	resp, err := call(context.Background(), &latticev1.JobControlRequest{Ids: ids})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp.Results {
		if !r.Ok {
			t.Fatalf("%s: %s", r.Id, r.Error)
		}
	}
	return resp
}

// stays checks for a while that an allocation stays PENDING with reason.
func (d *devStack) stays(t *testing.T, id, reason string, wait time.Duration) {
	t.Helper()
	for end := time.Now().Add(wait); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if a := d.get(t, id); a.State != string(model.StatePending) || a.Reason != reason {
			t.Fatalf("allocation %s is %s (%s), want PENDING (%s)", id, a.State, a.Reason, reason)
		}
	}
}

// With auth off (the dev stack of these tests) the caller is an admin.
func TestJobControlOnDevStack(t *testing.T) {
	d := startDev(t, t.TempDir(), 8) // node001-004 hpc-batch, node005-008 ml-training
	ctx := context.Background()

	t.Run("submitted held, then released", func(t *testing.T) {
		id := d.submit(t, &latticev1.AllocationRequest{NodesMin: 1, Command: []string{"true"}, Hold: true})
		d.stays(t, id, model.ReasonJobHeldUser, 1500*time.Millisecond)
		d.control(t, d.allocs.Release, id)
		d.waitState(t, id, model.StateCompleted)
	})
	t.Run("hold a pending job: an admin's hold, a user hold", func(t *testing.T) {
		future := time.Now().Add(time.Hour).UnixMilli()
		id := d.submit(t, &latticev1.AllocationRequest{NodesMin: 1, Command: []string{"true"}, BeginUnixMs: future})
		d.stays(t, id, model.ReasonBeginTime, 500*time.Millisecond)
		d.control(t, d.allocs.Hold, id)
		d.stays(t, id, model.ReasonJobHeldAdmin, 300*time.Millisecond)
		d.control(t, d.allocs.Release, id)
		if _, err := d.allocs.Hold(ctx, &latticev1.JobControlRequest{Ids: []string{id}, UserHold: true}); err != nil {
			t.Fatal(err)
		}
		d.stays(t, id, model.ReasonJobHeldUser, 300*time.Millisecond)
		// Update: begin now, then release: it runs.
		zero := int64(0)
		if _, err := d.allocs.Update(ctx, &latticev1.UpdateAllocationRequest{Id: id, BeginUnixMs: &zero}); err != nil {
			t.Fatal(err)
		}
		d.control(t, d.allocs.Release, id)
		d.waitState(t, id, model.StateCompleted)
		// A running one cannot be held.
		run := d.submit(t, &latticev1.AllocationRequest{NodesMin: 1, Command: []string{"sleep", "30"}})
		d.waitState(t, run, model.StateRunning)
		resp, err := d.allocs.Hold(ctx, &latticev1.JobControlRequest{Ids: []string{run}})
		if err != nil || resp.Results[0].Ok || !strings.Contains(resp.Results[0].Error, "only PENDING") {
			t.Fatalf("hold of a running job: %v %+v", err, resp)
		}
		if _, err := d.allocs.Cancel(ctx, &latticev1.CancelRequest{Ids: []string{run}}); err != nil {
			t.Fatal(err)
		}
		d.waitState(t, run, model.StateCancelled)
	})
	t.Run("update a pending job's time, nodes, name", func(t *testing.T) {
		id := d.submit(t, &latticev1.AllocationRequest{NodesMin: 1, Command: []string{"true"}, Hold: true})
		w, n, name := int64(600), int32(2), "renamed"
		a, err := d.allocs.Update(ctx, &latticev1.UpdateAllocationRequest{Id: id, WalltimeSeconds: &w, NodesMin: &n, Name: &name})
		if err != nil {
			t.Fatal(err)
		}
		if a.Request.WalltimeSeconds != 600 || a.Request.NodesMin != 2 || a.Request.Name != "renamed" {
			t.Fatalf("after update: %+v", a.Request)
		}
		bad := int32(11)
		if _, err := d.allocs.Update(ctx, &latticev1.UpdateAllocationRequest{Id: id, PriorityClass: &bad}); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("class 11: %v", err)
		}
		if _, err := d.allocs.Update(ctx, &latticev1.UpdateAllocationRequest{Id: id}); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("empty update: %v", err)
		}
		d.control(t, d.allocs.Release, id)
		if a := d.waitState(t, id, model.StateCompleted); len(a.Nodes) != 2 {
			t.Fatalf("nodes %v", a.Nodes)
		}
	})
	t.Run("update a running job's time: nodes refused", func(t *testing.T) {
		id := d.submit(t, &latticev1.AllocationRequest{NodesMin: 1, Command: []string{"sleep", "30"}})
		d.waitState(t, id, model.StateRunning)
		w := int64(120)
		if a, err := d.allocs.Update(ctx, &latticev1.UpdateAllocationRequest{Id: id, WalltimeSeconds: &w}); err != nil || a.Request.WalltimeSeconds != 120 {
			t.Fatalf("shrink: %v", err)
		}
		n := int32(2)
		if _, err := d.allocs.Update(ctx, &latticev1.UpdateAllocationRequest{Id: id, NodesMin: &n}); status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("nodes of a running job: %v", err)
		}
		// The agent moves its timer: a limit already passed ends it now.
		w = 1
		if _, err := d.allocs.Update(ctx, &latticev1.UpdateAllocationRequest{Id: id, WalltimeSeconds: &w}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if a := d.waitState(t, id, model.StateFailed); a.Reason != model.ReasonWalltimeExceeded {
			t.Fatalf("reason %s", a.Reason)
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("ended %s after its new limit", time.Since(start))
		}
	})
	t.Run("requeue a running job", func(t *testing.T) {
		id := d.submit(t, &latticev1.AllocationRequest{NodesMin: 1, Command: []string{"sleep", "30"}})
		d.waitState(t, id, model.StateRunning)
		d.control(t, d.allocs.Requeue, id)
		waitFor(t, 30*time.Second, "requeued and running again", func() bool {
			a := d.get(t, id)
			return a.RequeueCount == 1 && a.State == string(model.StateRunning)
		})
		a := d.get(t, id)
		if !slices.ContainsFunc(a.History, func(h *latticev1.Transition) bool { return h.Reason == model.ReasonRequeued }) {
			t.Fatalf("history %v", a.History)
		}
		d.allocs.Cancel(ctx, &latticev1.CancelRequest{Ids: []string{id}})
		d.waitState(t, id, model.StateCancelled)
	})
	t.Run("signal reaches the job", func(t *testing.T) {
		id := d.submit(t, &latticev1.AllocationRequest{NodesMin: 1,
			Command: []string{`trap 'echo got-usr2; exit 0' USR2; echo ready; while :; do sleep 0.1; done`}})
		d.waitState(t, id, model.StateRunning)
		waitFor(t, 10*time.Second, "job ready", func() bool { return strings.Contains(d.logs(t, id, false), "ready") })
		resp, err := d.allocs.Signal(ctx, &latticev1.SignalRequest{Ids: []string{id}, Signal: "USR2"})
		if err != nil || !resp.Results[0].Ok {
			t.Fatalf("signal: %v %+v", err, resp)
		}
		d.waitState(t, id, model.StateCompleted)
		if got := d.logs(t, id, false); !strings.Contains(got, "got-usr2") {
			t.Fatalf("logs %q", got)
		}
		if _, err := d.allocs.Signal(ctx, &latticev1.SignalRequest{Ids: []string{id}, Signal: "NOPE"}); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("bad signal: %v", err)
		}
		resp, err = d.allocs.Signal(ctx, &latticev1.SignalRequest{Ids: []string{id}, Signal: "USR1"})
		if err != nil || resp.Results[0].Ok {
			t.Fatalf("signal of an ended job: %v %+v", err, resp)
		}
	})
	t.Run("begin time: not started before", func(t *testing.T) {
		begin := time.Now().Add(3 * time.Second)
		id := d.submit(t, &latticev1.AllocationRequest{NodesMin: 1, Command: []string{"true"}, BeginUnixMs: begin.UnixMilli()})
		a := d.waitState(t, id, model.StateCompleted)
		if a.StartTimeUnixMs < begin.UnixMilli() {
			t.Fatalf("started at %d, before its begin time %d", a.StartTimeUnixMs, begin.UnixMilli())
		}
	})
	t.Run("nodelist runs on exactly those nodes", func(t *testing.T) {
		list, err := model.ExpandHostlist("node00[3-4]")
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			id := d.submit(t, &latticev1.AllocationRequest{NodesMin: 2, Command: []string{"true"}, NodeList: list})
			if a := d.waitState(t, id, model.StateCompleted); !slices.Equal(a.Nodes, list) {
				t.Fatalf("nodes %v, want %v", a.Nodes, list)
			}
		}
	})
	t.Run("exclude keeps off those nodes", func(t *testing.T) {
		ex, _ := model.ExpandHostlist("node00[1-3]")
		for range 3 {
			id := d.submit(t, &latticev1.AllocationRequest{NodesMin: 1, Command: []string{"true"}, ExcludeNodes: ex})
			if a := d.waitState(t, id, model.StateCompleted); slices.ContainsFunc(a.Nodes, func(n string) bool { return slices.Contains(ex, n) }) {
				t.Fatalf("ran on %v, excluded %v", a.Nodes, ex)
			}
		}
	})
	t.Run("a request that never fits is refused, unless held", func(t *testing.T) {
		_, err := d.allocs.Submit(ctx, &latticev1.SubmitRequest{Request: &latticev1.AllocationRequest{NodesMin: 60, Command: []string{"true"}}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "nodes: 60 requested, vCluster hpc-batch can have at most") {
			t.Fatalf("60 nodes: %v", err)
		}
		_, err = d.allocs.Submit(ctx, &latticev1.SubmitRequest{Request: &latticev1.AllocationRequest{NodesMin: 2, Command: []string{"true"}, GpusPerNode: 4}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "meet its constraints") {
			t.Fatalf("GPUs nobody has: %v", err)
		}
		id := d.submit(t, &latticev1.AllocationRequest{NodesMin: 60, Command: []string{"true"}, Hold: true})
		d.stays(t, id, model.ReasonJobHeldUser, 300*time.Millisecond)
		// Checkpointable work may borrow: 6 nodes fit hpc-batch (4 own + ml-training's lendable).
		if _, err := d.allocs.Submit(ctx, &latticev1.SubmitRequest{Request: &latticev1.AllocationRequest{NodesMin: 6, Command: []string{"true"}, Checkpoint: "signal", WalltimeSeconds: 60}}); err != nil {
			t.Fatalf("6 borrowing nodes: %v", err)
		}
	})
	t.Run("qos table and partitions", func(t *testing.T) {
		list, err := d.allocs.ListQOS(ctx, &latticev1.ListQOSRequest{})
		if err != nil || !slices.ContainsFunc(list.Qos, func(q *latticev1.QOS) bool { return q.Name == "debug" }) {
			t.Fatalf("list: %v %v", err, list)
		}
		if _, err := d.allocs.SetQOS(ctx, &latticev1.SetQOSRequest{Qos: &latticev1.QOS{Name: "debug", PriorityClass: 8, MaxWalltimeSeconds: 1800}}); err != nil {
			t.Fatal(err)
		}
		_, err = d.allocs.Submit(ctx, &latticev1.SubmitRequest{Request: &latticev1.AllocationRequest{NodesMin: 1, Command: []string{"true"}, Qos: "debug", WalltimeSeconds: 7200}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "qos debug") {
			t.Fatalf("2h in debug: %v", err)
		}
		_, err = d.allocs.Submit(ctx, &latticev1.SubmitRequest{Request: &latticev1.AllocationRequest{NodesMin: 1, Command: []string{"true"}, Qos: "premium"}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "invalid qos") {
			t.Fatalf("unknown qos: %v", err)
		}
		if _, err := d.allocs.SetQOS(ctx, &latticev1.SetQOSRequest{Qos: &latticev1.QOS{Name: "premium", PriorityClass: 9, Vcluster: "ml-training"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := d.allocs.SetPartition(ctx, &latticev1.SetPartitionRequest{Name: "regular", Vcluster: "hpc-batch"}); err != nil {
			t.Fatal(err)
		}
		id := d.submit(t, &latticev1.AllocationRequest{NodesMin: 1, Command: []string{"true"}, Qos: "premium"})
		if a := d.waitState(t, id, model.StateCompleted); a.Request.PriorityClass != 9 || a.Request.Vcluster != "ml-training" || a.Request.Qos != "premium" {
			t.Fatalf("premium: %+v", a.Request)
		}
		id = d.submit(t, &latticev1.AllocationRequest{NodesMin: 1, Command: []string{"true"}, Vcluster: "regular"})
		if a := d.waitState(t, id, model.StateCompleted); a.Request.Vcluster != "hpc-batch" {
			t.Fatalf("partition regular ran in %s", a.Request.Vcluster)
		}
	})
}
