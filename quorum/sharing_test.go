package quorum

import (
	"math/rand"
	"reflect"
	"testing"

	"github.com/latticehpc/lattice/model"
)

// TestStoredObjectsNeverChange: copies made for a change share slices and
// pointers with the stored objects they replace (modify, modifyNode, the
// node lists of a batch). A reader may keep any object it got, so no
// command may write into one once stored. Over a random command log, every
// node and allocation held before a command must still equal a deep copy
// taken then.
func TestStoredObjectsNeverChange(t *testing.T) {
	g := &commandLog{rng: rand.New(rand.NewSource(11)), now: t0, shadow: NewState()}
	s := g.shadow
	for i := range 1500 {
		c := g.next()
		if i < 3 {
			c = &SetVCluster{Header: Header{Time: g.now}, VCluster: model.VCluster{Name: []string{"batch", "ml", "int"}[i], Type: model.TypeHPCBatch,
				AllowLending: true, AllowBorrowing: true}}
		}
		type heldNode struct{ p, copy *model.Node }
		type heldAlloc struct{ p, copy *model.Allocation }
		var nodes []heldNode
		var allocs []heldAlloc
		for _, n := range s.Nodes() {
			nodes = append(nodes, heldNode{n, n.Clone()})
		}
		for _, a := range s.Allocations() {
			allocs = append(allocs, heldAlloc{a, a.Clone()})
		}
		data, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		dc, err := Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		s.apply(dc)
		for _, h := range nodes {
			if !reflect.DeepEqual(h.p, h.copy) {
				t.Fatalf("command %d (%s) changed stored node %s:\n%+v\nwas\n%+v", i, c.Type(), h.p.Name, h.p, h.copy)
			}
		}
		for _, h := range allocs {
			if !reflect.DeepEqual(h.p, h.copy) {
				t.Fatalf("command %d (%s) changed stored allocation %d:\n%+v\nwas\n%+v", i, c.Type(), h.p.ID, h.p, h.copy)
			}
		}
	}
	if s.AllocationCount() < 50 || s.ActiveCount()+s.idx.ended.Len() == 0 {
		t.Fatalf("the log did not exercise much: %d allocations", s.AllocationCount())
	}
}
