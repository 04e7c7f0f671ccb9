package quorum

import (
	"io"

	"testing"

	"github.com/latticehpc/lattice/model"
)

// TestGroupsIndexFollowsNodes checks the dragonfly group count kept as an
// index: new nodes, a node re-registered into another group, and a restore.
func TestGroupsIndexFollowsNodes(t *testing.T) {
	f := newFixture(t) // groups 0, 1 (batch) and 2 (ml)
	if got := f.s.Groups(); got != 3 {
		t.Fatalf("Groups() = %d, want 3", got)
	}
	node := func(name string, group int) model.Node {
		return model.Node{Name: name, HomeVCluster: "batch", Group: group, IdleWatts: 100, BusyWatts: 400}
	}
	steps := []struct {
		name  string
		nodes []model.Node
		want  int
	}{
		{"a node in a new group", []model.Node{node("b9", 7)}, 4},
		{"the same node again", []model.Node{node("b9", 7)}, 4},
		{"moved to an existing group empties group 7", []model.Node{node("b9", 0)}, 3},
		{"the last node of group 2 moves away", []model.Node{{Name: "m0", HomeVCluster: "ml", Group: 5, IdleWatts: 100, BusyWatts: 400},
			{Name: "m1", HomeVCluster: "ml", Group: 5, IdleWatts: 100, BusyWatts: 400}}, 3},
	}
	for _, st := range steps {
		f.ok(&RegisterNodes{Agent: "a2", Nodes: st.nodes}) // the fixture checks every index against a rebuild
		if got := f.s.Groups(); got != st.want {
			t.Fatalf("%s: Groups() = %d, want %d", st.name, got, st.want)
		}
	}
	var restored *State
	var err error
	im := f.s.image()
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(im.write(pw)) }()
	if restored, err = ReadSnapshot(pr); err != nil {
		t.Fatal(err)
	}
	if got := restored.Groups(); got != 3 {
		t.Fatalf("after restore Groups() = %d, want 3", got)
	}
}
