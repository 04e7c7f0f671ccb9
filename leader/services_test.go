package leader

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// svcHost applies proposals to an FSM, as a one-member quorum would.
type svcHost struct {
	t     *testing.T
	nodes int // s0 … s(nodes-1)
	fsm   *quorum.FSM
	index uint64
	now   time.Time
}

func (h *svcHost) View(fn func(*quorum.State)) { h.fsm.View(fn) }

func (h *svcHost) Propose(_ context.Context, c quorum.Command) (*quorum.Result, error) {
	if c.CommandHeader().Time.IsZero() {
		c.CommandHeader().Time = h.now
	}
	data, err := quorum.Encode(c)
	if err != nil {
		return nil, err
	}
	h.index++
	r := h.fsm.Apply(&raft.Log{Index: h.index, Type: raft.LogCommand, Data: data}).(*quorum.Result)
	var bad []string
	h.fsm.View(func(st *quorum.State) { bad = quorum.CheckInvariants(st) })
	if len(bad) > 0 {
		h.t.Fatalf("after %s: %s", c.Type(), strings.Join(bad, "; "))
	}
	return r, nil
}

func (h *svcHost) ok(c quorum.Command) *quorum.Result {
	h.t.Helper()
	r, _ := h.Propose(context.Background(), c)
	if r.Rejection != nil {
		h.t.Fatalf("%s rejected: %s", c.Type(), r.Rejection.Message)
	}
	return r
}

func (h *svcHost) service() *model.Service {
	var v *model.Service
	h.fsm.View(func(st *quorum.State) { v = st.Service("web") })
	return v
}

func (h *svcHost) alloc(id uint64) *model.Allocation {
	var a *model.Allocation
	h.fsm.View(func(st *quorum.State) { a = st.Allocation(id) })
	return a
}

// runPending puts every pending instance on a free node and reports it
// running.
func (h *svcHost) runPending() {
	h.t.Helper()
	var pend []uint64
	used := map[string]bool{}
	h.fsm.View(func(st *quorum.State) {
		for _, id := range st.Service("web").Instances {
			a := st.Allocation(id)
			if a.State == model.StatePending {
				pend = append(pend, id)
			}
			for _, n := range a.Nodes {
				if a.State.Active() {
					used[n] = true
				}
			}
		}
	})
	for _, id := range pend {
		for i := range h.nodes {
			n := fmt.Sprintf("s%d", i)
			if used[n] {
				continue
			}
			var v uint64
			h.fsm.View(func(st *quorum.State) { v = st.Version })
			r := h.ok(&quorum.AssignBatch{VCluster: "svc", Items: []quorum.AssignItem{{AllocID: id, Nodes: []string{n}, Version: v}}})
			if !r.Items[0].Committed {
				continue
			}
			used[n] = true
			h.ok(&quorum.UpdateAllocs{Updates: []quorum.AllocUpdate{{AllocID: id, State: model.StateRunning}}})
			break
		}
	}
}

func (h *svcHost) live() (ids []uint64) {
	h.fsm.View(func(st *quorum.State) {
		for _, id := range st.Service("web").Instances {
			if a := st.Allocation(id); !a.State.Terminal() && !a.CancelRequested {
				ids = append(ids, id)
			}
		}
	})
	return ids
}

// The controller's rules, on a fake clock: start at the minimum; scale up
// on the metric (HPA's formula, clamped) no sooner than the cooldown; scale
// down only to the highest recommendation of the stabilization window;
// restart an instance that exits with a doubling back-off and say
// CrashLoopBackOff when it keeps failing; move an instance off a drained
// node.
func TestServiceController(t *testing.T) {
	h := &svcHost{t: t, nodes: 6, fsm: quorum.NewFSM(), now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h.ok(&quorum.SetVCluster{VCluster: model.VCluster{Name: "svc", Type: model.TypeService}})
	var nodes []model.Node
	for i := range 6 {
		nodes = append(nodes, model.Node{Name: fmt.Sprintf("s%d", i), HomeVCluster: "svc", IdleWatts: 1, BusyWatts: 2})
	}
	h.ok(&quorum.RegisterNodes{Agent: "a", Nodes: nodes})
	h.ok(&quorum.SetService{Create: true, Spec: model.ServiceSpec{Name: "web", VCluster: "svc", MinNodes: 1, MaxNodes: 4,
		Metric: "load", Target: 10, Cooldown: 10 * time.Second, Stabilization: 30 * time.Second, Command: []string{"serve"}}})
	samples := NewServiceSamples()
	c := &ServiceController{Host: h, Samples: samples, Clock: func() time.Time { return h.now }, BackoffReset: 20 * time.Second}
	step := func(d time.Duration) {
		h.now = h.now.Add(d)
		c.Cycle(context.Background())
		h.runPending()
	}
	load := func(v float64) {
		var xs []ServiceSample
		for _, id := range h.live() {
			xs = append(xs, ServiceSample{Alloc: id, Has: true, Value: v, At: h.now})
		}
		samples.Record(xs)
	}
	step(time.Second)
	if got := len(h.live()); got != 1 {
		t.Fatalf("started %d instances, want the minimum 1", got)
	}
	load(25) // ceil(1 × 25/10) = 3, but the cooldown from creation holds it
	step(time.Second)
	if v := h.service(); v.Desired != 1 {
		t.Fatalf("scaled within the cooldown: desired %d", v.Desired)
	}
	step(10 * time.Second)
	if v := h.service(); v.Desired != 3 || v.LastDecision == nil || v.LastDecision.Direction != model.ScaleUp || len(h.live()) != 3 {
		t.Fatalf("scale-up: desired %d decision %+v live %d", v.Desired, v.LastDecision, len(h.live()))
	}
	load(100) // 3 × 10 = 30 → clamped to 4
	step(11 * time.Second)
	if v := h.service(); v.Desired != 4 || !strings.Contains(v.LastDecision.Reason, "clamped") {
		t.Fatalf("clamp: %d %+v", v.Desired, v.LastDecision)
	}
	load(10.5) // within the tolerance: no change
	step(11 * time.Second)
	if v := h.service(); v.Desired != 4 {
		t.Fatalf("changed within the tolerance: %d", v.Desired)
	}
	load(5) // asks for 2, but 4 was recommended within the window
	step(11 * time.Second)
	if v := h.service(); v.Desired != 4 {
		t.Fatalf("scaled down inside the stabilization window: %d", v.Desired)
	}
	for range 4 {
		load(5)
		step(11 * time.Second)
	}
	if v := h.service(); v.Desired != 2 || v.LastDecision.Direction != model.ScaleDown || len(h.live()) != 2 {
		t.Fatalf("scale-down: desired %d %+v live %d", v.Desired, v.LastDecision, len(h.live()))
	}

	// Crash loop: the same instance slot fails quickly again and again.
	var delays []time.Duration
	for i := range 4 {
		live := h.live()
		id := live[len(live)-1] // the newest: the restarted one after the first
		if i == 0 {
			// Both have run long: the first failure starts a row of one.
			id = live[0]
		}
		code := 1
		h.ok(&quorum.UpdateAllocs{Updates: []quorum.AllocUpdate{{AllocID: id, State: model.StateFailed, Reason: model.ReasonNonZeroExit, ExitCode: &code}}})
		load(10)
		step(100 * time.Millisecond)
		v := h.service()
		delays = append(delays, v.RestartAfter.Sub(h.now))
		if len(h.live()) != 1 {
			t.Fatalf("failure %d: restarted before its back-off", i)
		}
		if (i+1 >= CrashLoopFailures) != (v.Reason == model.ReasonCrashLoopBackOff) {
			t.Fatalf("failure %d: reason %q", i+1, v.Reason)
		}
		for tries := 0; len(h.live()) < 2; tries++ {
			if tries > 600 {
				t.Fatalf("failure %d: never restarted", i+1)
			}
			load(10) // on target: the desired count stays 2
			step(time.Second)
		}
	}
	for i := 1; i < len(delays); i++ {
		if delays[i] <= delays[i-1] {
			t.Errorf("back-off did not grow: %v", delays)
		}
	}
	// An instance that runs long enough ends the crash loop.
	load(10)
	step(25 * time.Second)
	load(10)
	step(time.Second)
	if v := h.service(); v.Reason != "" || v.Failures != 0 {
		t.Errorf("crash loop not cleared after a long run: %q %d", v.Reason, v.Failures)
	}

	// Draining a node moves its instance.
	id := h.live()[0]
	node := h.alloc(id).Nodes[0]
	h.ok(&quorum.SetNodeState{Nodes: []string{node}, Action: quorum.ActionDrain})
	step(time.Second)
	if a := h.alloc(id); !a.CancelRequested {
		t.Fatalf("the instance on the drained node is not being stopped: %+v", a)
	}
	live := h.live()
	if len(live) != 2 {
		t.Fatalf("no replacement: live %v", live)
	}
	for _, l := range live {
		if n := h.alloc(l).Nodes; len(n) > 0 && n[0] == node {
			t.Errorf("replacement %d on the drained node", l)
		}
	}
}

// A service that cannot place every instance it wants (the machine is
// full) still scales down when its load drops: the instances still pending
// do not block the decision.
func TestServiceShrinksWhileUnplaced(t *testing.T) {
	h := &svcHost{t: t, nodes: 2, fsm: quorum.NewFSM(), now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h.ok(&quorum.SetVCluster{VCluster: model.VCluster{Name: "svc", Type: model.TypeService}})
	h.ok(&quorum.RegisterNodes{Agent: "a", Nodes: []model.Node{{Name: "s0", HomeVCluster: "svc"}, {Name: "s1", HomeVCluster: "svc"}}})
	h.ok(&quorum.SetService{Create: true, Spec: model.ServiceSpec{Name: "web", VCluster: "svc", MinNodes: 1, MaxNodes: 4,
		Metric: "load", Target: 10, Cooldown: time.Second, Stabilization: 5 * time.Second, Command: []string{"serve"}}})
	samples := NewServiceSamples()
	c := &ServiceController{Host: h, Samples: samples, Clock: func() time.Time { return h.now }}
	load := func(v float64) {
		var xs []ServiceSample
		h.fsm.View(func(st *quorum.State) {
			for _, id := range st.Service("web").Instances {
				if a := st.Allocation(id); a.State == model.StateRunning && !a.CancelRequested {
					xs = append(xs, ServiceSample{Alloc: id, Has: true, Value: v, At: h.now})
				}
			}
		})
		samples.Record(xs)
	}
	for range 3 {
		h.now = h.now.Add(2 * time.Second)
		c.Cycle(context.Background())
		h.runPending()
		load(100)
	}
	if v := h.service(); v.Desired != 4 || len(h.live()) != 4 {
		t.Fatalf("desired %d, live %d; want 4 (two of them pending: two nodes)", v.Desired, len(h.live()))
	}
	for range 6 {
		load(1)
		h.now = h.now.Add(2 * time.Second)
		c.Cycle(context.Background())
		h.runPending()
	}
	if v := h.service(); v.Desired != 1 || len(h.live()) != 1 {
		t.Fatalf("after the load dropped: desired %d, live %d; want 1", v.Desired, len(h.live()))
	}
}
