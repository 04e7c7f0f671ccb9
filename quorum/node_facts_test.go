package quorum

import (
	"strings"
	"testing"

	"github.com/latticehpc/lattice/model"
)

// A changed fingerprint (re-checked, or registered again) drains a node of
// a sensitive vCluster with a reason naming the change; other nodes only
// take the new fingerprint.
func TestFingerprintDrift(t *testing.T) {
	cases := []struct {
		name      string
		home      string
		change    func(f *fixture)
		wantDrain bool
		wantFP    string
	}{
		{"re-check, sensitive", "sens", func(f *fixture) {
			f.ok(&NodeFacts{Agent: "a2", Nodes: []NodeFact{{Name: "s0", Fingerprint: "fp-new", Detail: `kernel release "6.1" → "6.2"`}}})
		}, true, "fp-new"},
		{"re-registration, sensitive", "sens", func(f *fixture) {
			f.ok(&RegisterNodes{Agent: "a2", Nodes: []model.Node{{Name: "s0", HomeVCluster: "sens", Fingerprint: "fp-new", IdleWatts: 100, BusyWatts: 400}}})
		}, true, "fp-new"},
		{"same fingerprint", "sens", func(f *fixture) {
			f.ok(&NodeFacts{Agent: "a2", Nodes: []NodeFact{{Name: "s0", Fingerprint: "fp-old"}}})
		}, false, "fp-old"},
		{"re-check, not sensitive", "batch", func(f *fixture) {
			f.ok(&NodeFacts{Agent: "a2", Nodes: []NodeFact{{Name: "s0", Fingerprint: "fp-new"}}})
		}, false, "fp-new"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.ok(&SetVCluster{VCluster: model.VCluster{Name: "sens", Type: model.TypeSensitive, ReservationDepth: 1}})
			f.ok(&RegisterNodes{Agent: "a2", Nodes: []model.Node{{Name: "s0", HomeVCluster: tc.home, Fingerprint: "fp-old", IdleWatts: 100, BusyWatts: 400}}})
			tc.change(f)
			n := f.s.Node("s0")
			if n.Fingerprint != tc.wantFP {
				t.Errorf("fingerprint %q, want %q", n.Fingerprint, tc.wantFP)
			}
			if n.Drain != tc.wantDrain {
				t.Fatalf("drain %v, want %v (state %s, reason %q)", n.Drain, tc.wantDrain, n.State, n.StateReason)
			}
			if tc.wantDrain && (n.State != model.NodeDrained || !strings.HasPrefix(n.StateReason, DriftReasonPrefix)) {
				t.Errorf("drifted node is %s %q, want Drained with a drift reason", n.State, n.StateReason)
			}
		})
	}
	t.Run("another agent's node", func(t *testing.T) {
		f := newFixture(t)
		r := f.apply(&NodeFacts{Agent: "intruder", Nodes: []NodeFact{{Name: "b0", Fingerprint: "x"}, {Name: "nope", Fingerprint: "x"}}})
		if r.Items[0].Committed || r.Items[1].Committed || f.s.Node("b0").Fingerprint == "x" {
			t.Fatalf("facts of another agent's node or an unknown node committed: %+v", r.Items)
		}
	})
}

// A committed measurement stands for the configured figure while the node
// runs what it ran when measured, in the draw and in the power check.
func TestMeasuredPowerInThePowerCheck(t *testing.T) {
	f := newFixture(t)
	// 6 nodes idle at 100 W = 600 W; a budget of 1000 W lets one start
	// (+300 W) but not two (+600 W) on the configured figures.
	f.ok(&SetPowerBudget{Watts: 1000})
	two := f.submit("batch", 2)
	if it := f.assign("batch", two, "b0", "b1"); it.Committed {
		t.Fatal("a start above the budget on configured figures was committed")
	}
	// Measured: the idle nodes draw 40 W each: 6×40 = 240 W, and starting two
	// nodes adds 2×(400−40) = 720 W: 960 W fits.
	var ms []NodeMeasurement
	for _, n := range []string{"b0", "b1", "b2", "b3", "m0", "m1"} {
		ms = append(ms, NodeMeasurement{Name: n, Watts: 40})
	}
	f.ok(&NodePower{Nodes: ms})
	if d := f.s.DrawWatts(); d != 240 {
		t.Fatalf("draw %d W with measured figures, want 240", d)
	}
	if it := f.assign("batch", two, "b0", "b1"); !it.Committed {
		t.Fatalf("start refused with measured figures: %s", it.Rejection.Message)
	}
	// Busy now: the idle measurement no longer applies to b0/b1.
	if w := f.s.Node("b0").Watts(); w != 400 {
		t.Errorf("busy node counts %d W, want its configured busy 400", w)
	}
	// A measurement of another allocation than the node runs is stale.
	r := f.apply(&NodePower{Nodes: []NodeMeasurement{{Name: "b0", Watts: 350}}})
	if r.Items[0].Committed {
		t.Error("an idle measurement was committed for a busy node")
	}
	f.ok(&NodePower{Nodes: []NodeMeasurement{{Name: "b0", Watts: 350, Allocation: two}}})
	if w := f.s.Node("b0").Watts(); w != 350 {
		t.Errorf("busy node with its measurement counts %d W, want 350", w)
	}
	// Cleared: back to the configured figure.
	f.ok(&NodePower{Nodes: []NodeMeasurement{{Name: "b0"}}})
	if w := f.s.Node("b0").Watts(); w != 400 {
		t.Errorf("after clearing, %d W, want 400", w)
	}
}
