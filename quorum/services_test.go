package quorum

import (
	"bytes"
	"testing"

	"github.com/latticehpc/lattice/model"
)

// A service's life through the codec with the invariants checked after
// every command: created at its minimum, its controller's steps start,
// stop and forget instances (one-node allocations of the service, with its
// drain time), the maximum holds whatever is proposed, a snapshot keeps it,
// and deleting it cancels its instances.
func TestServiceLifecycle(t *testing.T) {
	f := newFixture(t)
	spec := model.ServiceSpec{Name: "web", VCluster: "batch", MinNodes: 1, MaxNodes: 3, Metric: "load", Target: 10,
		Command: []string{"serve"}, DrainTime: 7e9}
	spec.ApplyDefaults() // as the handler does before propose
	f.ok(&SetService{Spec: spec, Create: true})
	f.rejected(&SetService{Spec: spec, Create: true}, "already exists")
	v := f.s.Service("web")
	if v == nil || v.Desired != 1 || v.Cooldown != model.DefaultServiceCooldown || v.Tenant != model.DefaultTenant {
		t.Fatalf("created: %+v", v)
	}
	req := f.s.Service("web").InstanceRequest()
	f.rejected(&ScaleService{Name: "web", Desired: 1, Start: 1}, "one-node request")
	r := f.ok(&ScaleService{Name: "web", Desired: 1, Start: 1, Request: &req})
	if len(r.IDs) != 1 {
		t.Fatalf("start: ids %v", r.IDs)
	}
	a := f.alloc(r.IDs[0])
	if a.Service != "web" || a.NodesMin != 1 || a.NodesMax != 1 || a.Walltime != model.MaxWalltime || a.StopGrace != 7e9 || a.State != model.StatePending {
		t.Fatalf("instance: %+v", a)
	}
	f.rejected(&ScaleService{Name: "web", Desired: 4}, "invalid desired")
	f.rejected(&ScaleService{Name: "web", Desired: 3, Start: 3, Request: &req}, "at most 3")
	d := &model.ServiceDecision{From: 1, To: 3, Direction: model.ScaleUp, Reason: "load 30 > target 10"}
	r2 := f.ok(&ScaleService{Name: "web", Desired: 3, Start: 2, Decision: d, Request: &req})
	v = f.s.Service("web")
	if v.Desired != 3 || len(v.Instances) != 3 || v.LastDecision == nil || v.LastDecision.To != 3 || !v.LastChange.Equal(f.now) {
		t.Fatalf("scaled: %+v", v)
	}
	f.run("batch", r.IDs[0], "b0")
	f.rejected(&ScaleService{Name: "web", Desired: 3, Forget: []uint64{r.IDs[0]}}, "has not ended")
	f.ok(&ScaleService{Name: "web", Desired: 1, Stop: []uint64{r.IDs[0], r2.IDs[0]}})
	if a := f.alloc(r.IDs[0]); !a.CancelRequested {
		t.Errorf("a stopped running instance is not being cancelled: %+v", a)
	}
	if a := f.alloc(r2.IDs[0]); a.State != model.StateCancelled {
		t.Errorf("a stopped pending instance is %s", a.State)
	}
	f.ok(&ScaleService{Name: "web", Desired: 1, Forget: []uint64{r2.IDs[0]}})
	if got := f.s.Service("web").Instances; len(got) != 2 {
		t.Errorf("instances after forget: %v", got)
	}
	back := restored(t, f.s)
	if !bytes.Equal(stateSnapshot(t, back), stateSnapshot(t, f.s)) || back.Service("web") == nil {
		t.Fatal("the snapshot does not keep the service")
	}
	up := spec
	up.MaxNodes = 5
	f.rejected(&SetService{Spec: model.ServiceSpec{Name: "web", VCluster: "batch", MinNodes: 2, MaxNodes: 1, Command: []string{"x"}}}, "min <= max")
	f.ok(&SetService{Spec: up})
	if v := f.s.Service("web"); v.MaxNodes != 5 || v.Desired != 1 {
		t.Errorf("updated: %+v", v)
	}
	f.ok(&DeleteService{Name: "web"})
	if f.s.Service("web") != nil || f.alloc(r2.IDs[1]).State != model.StateCancelled {
		t.Error("delete left the service or its pending instance")
	}
	f.rejected(&DeleteService{Name: "web"}, "does not exist")
}
