package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// TestVClusterServiceSettings: the fair share of service, the service
// protection, running ends and predicted starts are vCluster settings (SetVCluster, VClusterInfo, the
// committed vCluster), kept when other settings change; a bad mode is
// InvalidArgument naming the field and the allowed values; and the live
// loop schedules with them on, learning from the jobs that complete.
func TestVClusterServiceSettings(t *testing.T) {
	d := startDevWith(t, t.TempDir(), 2, []string{"hpc-batch"}, nil)
	admin := latticev1.NewAdminServiceClient(d.conn)
	ctx := context.Background()
	// A backfill vCluster's planning defaults: walltime ends, predicted
	// starts; set back to the old policy, kept, then the default again.
	list, err := admin.ListVClusters(ctx, &latticev1.ListVClustersRequest{})
	if err != nil || len(list.GetVclusters()) != 1 {
		t.Fatalf("list: %v, %v", list, err)
	}
	first := list.GetVclusters()[0]
	if first.GetRunningEnds() != "walltime" || !first.GetPredictedStarts() {
		t.Fatalf("defaults: running ends %q, predicted starts %v", first.GetRunningEnds(), first.GetPredictedStarts())
	}
	if info, err := admin.SetVCluster(ctx, &latticev1.SetVClusterRequest{Name: "hpc-batch", RunningEnds: "Predicted", SetPredictedStarts: true}); err != nil {
		t.Fatal(err)
	} else if info.GetRunningEnds() != "predicted" || info.GetPredictedStarts() {
		t.Fatalf("set: running ends %q, predicted starts %v", info.GetRunningEnds(), info.GetPredictedStarts())
	}
	_, err = admin.SetVCluster(ctx, &latticev1.SetVClusterRequest{Name: "hpc-batch", RunningEnds: "estimate"})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `invalid running-ends "estimate": allowed predicted, walltime`) {
		t.Fatalf("bad running ends: %v", err)
	}
	if info, err := admin.SetVCluster(ctx, &latticev1.SetVClusterRequest{Name: "hpc-batch", RunningEnds: "walltime", SetPredictedStarts: true, PredictedStarts: true}); err != nil {
		t.Fatal(err)
	} else if info.GetRunningEnds() != "walltime" || !info.GetPredictedStarts() {
		t.Fatalf("set back: running ends %q, predicted starts %v", info.GetRunningEnds(), info.GetPredictedStarts())
	}
	info, err := admin.SetVCluster(ctx, &latticev1.SetVClusterRequest{Name: "hpc-batch", FairShare: "Job-Service", SetServiceProtect: true, ServiceProtect: true})
	if err != nil {
		t.Fatal(err)
	}
	if info.GetFairShare() != "job-service" || !info.GetServiceProtect() {
		t.Fatalf("info: fair share %q, service protect %v", info.GetFairShare(), info.GetServiceProtect())
	}
	info, err = admin.SetVCluster(ctx, &latticev1.SetVClusterRequest{Name: "hpc-batch", CycleMs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if info.GetFairShare() != "job-service" || !info.GetServiceProtect() {
		t.Fatalf("another setting changed them: fair share %q, service protect %v", info.GetFairShare(), info.GetServiceProtect())
	}
	_, err = admin.SetVCluster(ctx, &latticev1.SetVClusterRequest{Name: "hpc-batch", FairShare: "slowdown"})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `invalid fair-share "slowdown": allowed usage, service, job-service`) {
		t.Fatalf("bad mode: %v", err)
	}
	for i := range 3 {
		id := d.submit(t, &latticev1.AllocationRequest{Tenant: []string{"t", "u", "t"}[i], NodesMin: 2, NodesMax: 2, Script: "true"})
		waitFor(t, 20*time.Second, "job to end", func() bool {
			a := d.get(t, id)
			st, _ := model.ParseAllocState(a.GetState())
			if !st.Terminal() {
				t.Logf("%s %s %s", id, a.GetState(), a.GetReason())
			}
			return st.Terminal()
		})
		if a := d.waitEnded(t, id); a.GetState() != string(model.StateCompleted) {
			t.Fatalf("job %d ended %s", i, a.GetState())
		}
	}
	var vc model.VCluster
	d.srv.view(func(st *quorum.State) { vc = *st.VCluster("hpc-batch") })
	if vc.FairShare != model.FairShareJobService || !vc.Protects() || vc.RunningEnds != model.RunningEndsWalltime || !vc.StartsByPrediction() {
		t.Errorf("committed: %+v", vc)
	}
}
