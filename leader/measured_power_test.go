package leader

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

func TestMeasuredPowerKeepsFreshFigures(t *testing.T) {
	var p measuredPower
	t0 := time.Unix(1000, 0)
	p.record([]string{"n1"}, []int32{300}, t0)
	p.record([]string{"n2", "n3"}, []int32{250, 0}, t0.Add(10*time.Second)) // n3 unmeasured
	p.record([]string{"n4"}, nil, t0.Add(10*time.Second))                   // an agent that does not measure
	if w, n := p.total(t0.Add(-time.Second)); w != 550 || n != 2 {
		t.Errorf("total %d W on %d nodes, want 550 on 2", w, n)
	}
	if w, n := p.total(t0.Add(5 * time.Second)); w != 250 || n != 1 {
		t.Errorf("after n1 went stale: %d W on %d nodes, want 250 on 1", w, n)
	}
}

// What the leader commits: fresh measurements that changed (or were taken
// while the node runs other work than the committed one), and clears of
// committed ones with no fresh reading.
func TestMeasuredChanges(t *testing.T) {
	fsm := quorum.NewFSM()
	cmds := []quorum.Command{
		&quorum.SetVCluster{VCluster: testVCluster("hpc-batch")},
		&quorum.RegisterNodes{Agent: "a", Nodes: []model.Node{
			{Name: "n1", HomeVCluster: "hpc-batch", IdleWatts: 100, BusyWatts: 400},
			{Name: "n2", HomeVCluster: "hpc-batch", IdleWatts: 100, BusyWatts: 400},
			{Name: "n3", HomeVCluster: "hpc-batch", IdleWatts: 100, BusyWatts: 400},
			{Name: "n4", HomeVCluster: "hpc-batch", IdleWatts: 100, BusyWatts: 400}}},
		&quorum.NodePower{Nodes: []quorum.NodeMeasurement{{Name: "n2", Watts: 90}, {Name: "n3", Watts: 90}, {Name: "n4", Watts: 90}}},
	}
	for i, c := range cmds {
		data, err := quorum.Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		if r := fsm.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: data}).(*quorum.Result); r.Rejection != nil {
			t.Fatal(r.Rejection.Message)
		}
	}
	fresh := map[string]int{
		"n1": 80, // new
		"n2": 92, // within 5 %: kept
		"n3": 60, // changed
		// n4: no fresh reading: cleared
	}
	var got []quorum.NodeMeasurement
	fsm.View(func(st *quorum.State) { got = measuredChanges(st, fresh) })
	want := []quorum.NodeMeasurement{{Name: "n1", Watts: 80}, {Name: "n3", Watts: 60}, {Name: "n4"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("changes %v, want %v", got, want)
	}
}
