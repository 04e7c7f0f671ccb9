package admission

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/latticehpc/lattice/auth"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
	"github.com/latticehpc/lattice/solver"
)

// testState is committed state with a vCluster of 4 nodes (4 CPUs each),
// a tenant "physics" and a QOS "high" (class 5, at most 2 nodes).
func testState(t *testing.T) func(func(*quorum.State)) {
	t.Helper()
	fsm := quorum.NewFSM()
	profile := solver.ProfileForType(model.TypeHPCBatch)
	w, _ := solver.Profile(profile)
	vc := model.VCluster{Name: "hpc-batch", Type: model.TypeHPCBatch, WeightsProfile: profile, Weights: w,
		CycleInterval: model.DefaultCycleInterval, MinInterval: model.DefaultMinInterval,
		ReservationDepth: model.DefaultReservationDepth, Algorithm: model.AlgorithmFor(model.TypeHPCBatch), MaxLendFraction: 1,
		ReclaimGrace: model.DefaultReclaimGrace, ReclaimBackoff: model.DefaultReclaimBackoff, PreemptHorizon: model.DefaultPreemptHorizon}
	var nodes []model.Node
	for i := range 4 {
		nodes = append(nodes, model.Node{Name: fmt.Sprintf("n%d", i), HomeVCluster: "hpc-batch", IdleWatts: 100, BusyWatts: 300, Fingerprint: "fp", CPUs: 4})
	}
	now := time.Unix(1_800_000_000, 0).UTC()
	for i, c := range []quorum.Command{
		&quorum.SetVCluster{VCluster: vc},
		&quorum.SetDefaults{DefaultVCluster: "hpc-batch"},
		&quorum.RegisterNodes{Agent: "a", Nodes: nodes},
		&quorum.SetTenant{Tenant: model.Tenant{Name: "physics"}},
		&quorum.SetQOS{QOS: model.QOS{Name: "high", PriorityClass: 5, MaxNodes: 2}},
	} {
		c.CommandHeader().Time = now
		data, err := quorum.Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		if r := fsm.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: data}).(*quorum.Result); r.Rejection != nil {
			t.Fatalf("%T: %s", c, r.Rejection.Message)
		}
	}
	return fsm.View
}

// Each check of the chain refuses with its own code, in the chain's
// order; a request that passes is stamped with its user and comes back
// with its checked copy (defaults applied).
func TestSubmitChainCodes(t *testing.T) {
	view := testState(t)
	on := &Chain{View: view, Settings: Settings{AuthOn: true, MaxArraySize: 10}}
	off := &Chain{View: view}
	alice := &auth.Identity{User: "alice", Role: auth.RoleUser, Tenants: []string{"physics"}, MaxPriority: -1}
	bob := &auth.Identity{User: "bob", Role: auth.RoleUser, Tenants: []string{"bio"}, MaxPriority: -1}
	ok := model.Request{Name: "j", Command: []string{"true"}, NodesMin: 1, Walltime: time.Hour}
	with := func(f func(r *model.Request)) model.Request {
		r := ok
		f(&r)
		return r
	}
	for _, tc := range []struct {
		name  string
		chain *Chain
		id    *auth.Identity
		sub   Submission
		code  Code
		text  string
	}{
		{"walltime beyond the wire", on, alice, Submission{Request: ok, Wire: Wire{WalltimeSeconds: 1 << 40}}, CodeWire, "walltime"},
		{"too many node names", on, alice, Submission{Request: ok, Wire: Wire{NodeNames: model.MaxHostlistNodes + 1}}, CodeWire, "nodelist"},
		{"unknown qos", on, alice, Submission{Request: with(func(r *model.Request) { r.QOS = "nope" })}, CodeSite, "high (5)"},
		{"beyond the qos", on, alice, Submission{Request: with(func(r *model.Request) { r.QOS = "high"; r.NodesMin = 3 })}, CodeSite, "qos high"},
		{"tasks no node holds", on, alice, Submission{Request: with(func(r *model.Request) { r.NodesMax = 1; r.NtasksPerNode = 5 })}, CodeTasks, "need 5 CPUs"},
		{"env beyond the limits", on, alice, Submission{Request: with(func(r *model.Request) { r.Env = []string{"X=" + strings.Repeat("x", model.MaxEnvBytes)} })}, CodeLimits, "env"},
		{"invalid", on, alice, Submission{Request: with(func(r *model.Request) { r.NodesMin, r.NodesMax = 3, 2 })}, CodeInvalid, ""},
		{"array too large", on, alice, Submission{Request: with(func(r *model.Request) { r.Array = &model.ArraySpec{Start: 0, End: 10, Step: 1} })}, CodeArraySize, "max_array_size is 10"},
		{"not in the tenant", on, bob, Submission{Request: with(func(r *model.Request) { r.Tenant = "physics" })}, CodeDenied, ""},
		{"keep without being admin", on, alice, Submission{Request: with(func(r *model.Request) { r.NodesMin = 9 }), KeepIfNeverFits: true}, CodeDenied, "only an admin"},
		{"never fits", on, alice, Submission{Request: with(func(r *model.Request) { r.NodesMin = 9 })}, CodeNeverFits, "can have at most 4"},
		{"held: kept", on, alice, Submission{Request: with(func(r *model.Request) { r.NodesMin = 9; r.Hold = true })}, "", ""},
		{"auth off: no tenant check", off, nil, Submission{Request: with(func(r *model.Request) { r.Tenant = "physics" })}, "", ""},
		{"passes", on, alice, Submission{Request: ok}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			propose, checked, err := tc.chain.Submit(tc.id, tc.sub)
			if got := CodeOf(err); got != tc.code || (err == nil) != (tc.code == "") {
				t.Fatalf("code %q (%v), want %q", got, err, tc.code)
			}
			if err != nil {
				if !strings.Contains(err.Error(), tc.text) {
					t.Fatalf("%q, want it to say %q", err, tc.text)
				}
				return
			}
			if tc.id != nil && (propose.User != tc.id.User || checked.User != tc.id.User) {
				t.Fatalf("user %q/%q, want %q", propose.User, checked.User, tc.id.User)
			}
			if tc.id != nil && checked.Tenant != "physics" {
				t.Fatalf("tenant %q, want the caller's physics", checked.Tenant)
			}
		})
	}
}

// An unknown tenant is refused with its own code, naming the known ones.
func TestAuthorizeUnknownTenant(t *testing.T) {
	c := &Chain{View: testState(t), Settings: Settings{AuthOn: true}}
	admin := &auth.Identity{User: "root", Role: auth.RoleAdmin, Tenants: []string{"*"}, MaxPriority: -1}
	r := model.Request{Tenant: "nope"}
	err := c.Authorize(admin, &r)
	if CodeOf(err) != CodeUnknownTenant || !strings.Contains(err.Error(), "[physics]") {
		t.Fatalf("%v (%q), want unknown_tenant naming physics", err, CodeOf(err))
	}
}

// Update's checks: the walltime's range, a class above the caller's
// ceiling only when it raises one of the allocations.
func TestUpdateChecks(t *testing.T) {
	if _, err := Walltime(0); CodeOf(err) != CodeInvalid {
		t.Fatalf("walltime 0: %v", err)
	}
	if d, err := Walltime(60); err != nil || d != time.Minute {
		t.Fatalf("walltime 60: %v %v", d, err)
	}
	c := &Chain{View: testState(t), Settings: Settings{AuthOn: true}}
	alice := &auth.Identity{User: "alice", Role: auth.RoleUser, Tenants: []string{"physics"}, MaxPriority: 3}
	low := []*model.Allocation{{Request: model.Request{PriorityClass: 1}}}
	high := []*model.Allocation{{Request: model.Request{PriorityClass: 9}}}
	if err := c.RaisePriority(alice, 5, low); CodeOf(err) != CodeDenied {
		t.Fatalf("raise above the ceiling: %v", err)
	}
	if err := c.RaisePriority(alice, 5, high); err != nil {
		t.Fatalf("lowering is not raising: %v", err)
	}
	if err := c.RaisePriority(alice, 3, low); err != nil {
		t.Fatalf("within the ceiling: %v", err)
	}
}
