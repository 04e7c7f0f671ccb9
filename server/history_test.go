package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
	"github.com/latticehpc/lattice/rpc/convert"
)

func ids(as []*model.Allocation) []uint64 {
	out := make([]uint64, len(as))
	for i, a := range as {
		out[i] = a.ID
	}
	return out
}

// TestPrunedAllocationsStayListable: retention moves ended allocations out
// of the live state into the history of ended jobs; Get and List still
// find them.
func TestPrunedAllocationsStayListable(t *testing.T) {
	d := startDevWith(t, t.TempDir(), 1, []string{"hpc-batch"}, func(c *Config) {
		c.Retention, c.PruneInterval = time.Millisecond, 20*time.Millisecond
	})
	ctx := context.Background()
	var ended []string
	for range 3 {
		ended = append(ended, d.submit(t, &latticev1.AllocationRequest{NodesMin: 1, WalltimeSeconds: 60,
			Script: "#!/bin/sh\nsleep 1000\n"}))
	}
	if _, err := d.allocs.Cancel(ctx, &latticev1.CancelRequest{Ids: ended}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the cancelled allocations to be pruned", func() bool {
		n := 0
		d.srv.view(func(st *quorum.State) { n = st.AllocationCount() })
		return n == 0
	})
	got, err := d.allocs.Get(ctx, &latticev1.GetAllocationRequest{Id: ended[1]})
	if err != nil || got.State != string(model.StateCancelled) {
		t.Fatalf("get of a pruned allocation: %v, %v", got, err)
	}
	for _, req := range []*latticev1.ListAllocationsRequest{
		{States: []string{"CANCELLED"}},
		{},
		{Ids: ended},
	} {
		resp, err := d.allocs.List(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Allocations) != 3 {
			t.Fatalf("list %v: %d allocations", req, len(resp.Allocations))
		}
	}
	resp, err := d.allocs.List(ctx, &latticev1.ListAllocationsRequest{States: []string{"PENDING"}})
	if err != nil || len(resp.Allocations) != 0 {
		t.Fatalf("pending listing: %v %v", resp, err)
	}
}

// TestSubmitBatchChecksEachRequest: a batch answers every request in order;
// one refused by the server's checks or by the FSM leaves the others
// submitted.
func TestSubmitBatchChecksEachRequest(t *testing.T) {
	d := startDevWith(t, t.TempDir(), 2, []string{"hpc-batch"}, nil)
	ctx := context.Background()
	good := &latticev1.AllocationRequest{NodesMin: 1, WalltimeSeconds: 60, Command: []string{"true"}}
	resp, err := d.allocs.SubmitBatch(ctx, &latticev1.SubmitBatchRequest{Requests: []*latticev1.SubmitRequest{
		{Request: good, ClientRequestId: "x1"},
		{Request: &latticev1.AllocationRequest{NodesMin: 0, WalltimeSeconds: 60, Command: []string{"true"}}},
		{Request: &latticev1.AllocationRequest{NodesMin: 1, WalltimeSeconds: 60, Command: []string{"true"}, Vcluster: "nowhere"}},
		nil,
		{Request: &latticev1.AllocationRequest{NodesMin: 1, WalltimeSeconds: 60, Script: "#!/bin/sh\ntrue\n",
			Array: &latticev1.ArraySpec{Start: 0, End: 3, Step: 1}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	rs := resp.Results
	if len(rs) != 5 || len(rs[0].Ids) != 1 || len(rs[4].Ids) != 4 || rs[4].DisplayId != fmt.Sprint(rs[4].Ids[0]) {
		t.Fatalf("results %v", rs)
	}
	for i, want := range map[int]string{1: "invalid nodes", 2: `invalid vcluster "nowhere"`, 3: "entrypoint"} {
		if rs[i].Code != "InvalidArgument" || !strings.Contains(rs[i].Error, want) || len(rs[i].Ids) != 0 {
			t.Errorf("result %d: %v, want InvalidArgument naming %q", i, rs[i], want)
		}
	}
	again, err := d.allocs.SubmitBatch(ctx, &latticev1.SubmitBatchRequest{Requests: []*latticev1.SubmitRequest{{Request: good, ClientRequestId: "x1"}}})
	if err != nil || again.Results[0].Ids[0] != rs[0].Ids[0] {
		t.Fatalf("retried request id: %v %v", again, err)
	}
	if _, err := d.allocs.SubmitBatch(ctx, &latticev1.SubmitBatchRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("empty batch: %v", err)
	}
}

// A history record listed directly gives what the record as an allocation
// would.
func TestEndedToProtoIsAllocToProto(t *testing.T) {
	code := 3
	r := &quorum.HistoryRecord{ID: 12, ArrayJobID: 10, ArrayIndex: 2, Name: "n", User: "u", Tenant: "t", Project: "p", VCluster: "v",
		QOS: "normal", PriorityClass: 4, NodesMin: 2, NodesMax: 3, WalltimeSeconds: 600, GPUType: "a100", GPUsPerNode: 2, WorkDir: "/w",
		State: model.StateFailed, Reason: "NonZeroExit", ExitCode: &code, Nodes: "n[001-002]",
		SubmitMs: 1000, EligibleMs: 1500, StartMs: 2000, EndMs: 3000, RequeueCount: 1, CheckpointCount: 2}
	want := listed(convert.AllocToProto(r.Allocation()))
	if got := endedToProto(r); !proto.Equal(got, want) {
		t.Fatalf("endedToProto:\n%v\nallocToProto:\n%v", got, want)
	}
}
