package leader

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

func nodesOf(n int) []*model.Node {
	out := make([]*model.Node, n)
	for i := range out {
		out[i] = &model.Node{Name: string(rune('a' + i)), Health: model.NodeReady}
	}
	return out
}

var settings = Settings{DegradedAfter: 30 * time.Second, NodeTimeout: 300 * time.Second, MassSilenceFraction: 0.5}

// One node silent past the timeout, alone: failed.
func TestJudgeFailsALoneSilentNode(t *testing.T) {
	nodes := nodesOf(4)
	silence := []time.Duration{301 * time.Second, time.Second, time.Second, time.Second}
	v := Judge(nodes, silence, settings)
	if !slices.Equal(v.Down, []string{"a"}) || v.Mass || len(v.Held) != 0 {
		t.Errorf("verdict %+v, want a down", v)
	}
}

// Most nodes silent at once: none is failed; they are NotResponding with a
// reason that says why, and stay so without a command every pass.
func TestJudgeHoldsFailuresOnMassSilence(t *testing.T) {
	nodes := nodesOf(4)
	silence := []time.Duration{400 * time.Second, 400 * time.Second, 400 * time.Second, time.Second}
	v := Judge(nodes, silence, settings)
	if !v.Mass || len(v.Down) != 0 || v.HeldMass != 3 {
		t.Fatalf("verdict %+v, want mass silence with three held", v)
	}
	var held []string
	for reason, names := range v.Held {
		if !strings.Contains(reason, "3 of 4 nodes went silent at once") {
			t.Errorf("reason %q", reason)
		}
		held = append(held, names...)
	}
	slices.Sort(held)
	if !slices.Equal(held, []string{"a", "b", "c"}) {
		t.Errorf("held %v", held)
	}
	for _, n := range nodes[:3] {
		n.Health, n.StateReason = model.NodeNotResponding, "not responding: 3 of 4 nodes went silent at once; the leader holds their failure"
	}
	if v := Judge(nodes, silence, settings); len(v.Held) != 0 || len(v.Down) != 0 || !v.Mass {
		t.Errorf("second pass %+v, want nothing to commit", v)
	}
	// Half exactly is not more than half: two of four are failed.
	silence = []time.Duration{400 * time.Second, 400 * time.Second, time.Second, time.Second}
	if v := Judge(nodesOf(4), silence, settings); v.Mass || len(v.Down) != 2 {
		t.Errorf("two of four silent: %+v, want both down", v)
	}
	// 1 never holds.
	off := settings
	off.MassSilenceFraction = 1
	if v := Judge(nodesOf(4), []time.Duration{400 * time.Second, 400 * time.Second, 400 * time.Second, 400 * time.Second}, off); v.Mass || len(v.Down) != 4 {
		t.Errorf("fraction 1: %+v, want all down", v)
	}
}

// A node that runs something is failed only once its agent has certainly
// stopped it: FenceAfter + FenceMargin after it was last heard.
func TestJudgeHoldsARunningNodeUntilFenced(t *testing.T) {
	nodes := nodesOf(4)
	nodes[0].Allocation, nodes[0].FenceAfter = 7, 600*time.Second
	nodes[1].FenceAfter = 600 * time.Second // idle: nothing to fence
	silence := []time.Duration{400 * time.Second, 400 * time.Second, time.Second, time.Second}
	v := Judge(nodes, silence, settings)
	if !slices.Equal(v.Down, []string{"b"}) || v.HeldFence != 1 {
		t.Fatalf("verdict %+v, want b down and a held", v)
	}
	for reason, names := range v.Held {
		if !slices.Equal(names, []string{"a"}) || !strings.Contains(reason, "allocation 7") {
			t.Errorf("held %v for %q", names, reason)
		}
	}
	silence[0] = 600*time.Second + FenceMargin
	if v := Judge(nodes, silence, settings); !slices.Contains(v.Down, "a") {
		t.Errorf("past the fence: %+v, want a down", v)
	}
}
