package quorum

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/latticehpc/lattice/model"
)

// TestNoClockOrRandomnessInQuorum fails the build when quorum code reads the
// clock or uses randomness: Apply must be a function of state and command.
func TestNoClockOrRandomnessInQuorum(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if p := strings.Trim(imp.Path.Value, `"`); p == "math/rand" || p == "math/rand/v2" || p == "crypto/rand" {
				t.Errorf("%s imports %s: the FSM must be deterministic", name, p)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "time" && (sel.Sel.Name == "Now" || sel.Sel.Name == "Since" || sel.Sel.Name == "Until") {
				t.Errorf("%s: time.%s reads the wall clock; mint times before Apply", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "os" && (sel.Sel.Name == "Getenv" || sel.Sel.Name == "LookupEnv" || sel.Sel.Name == "Environ") {
				t.Errorf("%s: os.%s reads the environment", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
}

// commandLog generates a long random but plausible command log, driving the
// state through every command type (valid and invalid items alike).
type commandLog struct {
	rng    *rand.Rand
	now    time.Time
	shadow *State // applied alongside, to pick plausible targets
}

func (g *commandLog) pick(n int) int { return g.rng.Intn(n) }

func (g *commandLog) next() Command {
	g.now = g.now.Add(time.Duration(1+g.pick(5000)) * time.Millisecond)
	h := Header{Time: g.now}
	if g.pick(4) == 0 {
		h.RequestID = fmt.Sprintf("req-%d", g.pick(400)) // some repeat: idempotency in play
	}
	s := g.shadow
	nodes := s.Nodes()
	var pending, active []*model.Allocation
	for _, a := range s.Allocations() {
		switch {
		case a.State == model.StatePending:
			pending = append(pending, a)
		case a.State.Active():
			active = append(active, a)
		}
	}
	vcs := []string{"batch", "ml", "int"}
	switch r := g.pick(100); {
	case r < 3:
		vc := vcs[g.pick(3)]
		return &SetVCluster{Header: h, VCluster: model.VCluster{Name: vc, Type: model.TypeHPCBatch, ReservationDepth: 1,
			AllowLending: g.pick(2) == 0, AllowBorrowing: g.pick(2) == 0, PowerCapWatts: int64(g.pick(3)) * 4000,
			Algorithm: model.Algorithms[g.pick(len(model.Algorithms))], MaxLendFraction: float64(g.pick(3)) / 2,
			Preemption: g.pick(3) != 0, CheckpointableOnlyOnBorrowed: g.pick(2) == 0, ReclaimBackoff: time.Duration(g.pick(3)) * time.Second}}
	case r < 6:
		var ns []model.Node
		for range 1 + g.pick(4) {
			ns = append(ns, model.Node{Name: fmt.Sprintf("n%03d", g.pick(40)), HomeVCluster: vcs[g.pick(3)], Group: g.pick(4),
				Fingerprint: fmt.Sprintf("fp%d", g.pick(2)), IdleWatts: 100, BusyWatts: 300 + g.pick(200), Features: []string{"ib"}})
		}
		return &RegisterNodes{Header: h, Agent: fmt.Sprintf("a%d", g.pick(3)), Nodes: ns}
	case r < 30:
		req := model.Request{VCluster: vcs[g.pick(3)], Tenant: fmt.Sprintf("t%d", g.pick(4)), Command: []string{"true"},
			Name: fmt.Sprintf("job%d", g.pick(6)), NodesMin: 1 + g.pick(4), Walltime: time.Duration(1+g.pick(120)) * time.Minute, PriorityClass: g.pick(11)}
		if g.pick(8) == 0 {
			req.Array = &model.ArraySpec{Start: g.pick(2), End: 2 + g.pick(6), Step: 1 + g.pick(2), MaxConcurrent: g.pick(3)}
		}
		if g.pick(3) == 0 && len(s.allocs) > 0 {
			req.DependsOn, req.DependencyAny = g.dependencies(s)
		}
		if g.pick(8) == 0 {
			req.DependsOn = append(req.DependsOn, model.Dependency{Condition: model.Singleton})
		}
		switch g.pick(12) { // issue 12's request fields
		case 0:
			req.Hold = true
		case 1:
			req.BeginTime = g.now.Add(time.Duration(g.pick(20)) * time.Second)
		case 2:
			req.NodeList = []string{fmt.Sprintf("n%03d", g.pick(20)), fmt.Sprintf("n%03d", 20+g.pick(20))}
			req.NodesMin = 1 + g.pick(2)
		case 3:
			req.ExcludeNodes = []string{fmt.Sprintf("n%03d", g.pick(40))}
		}
		if g.pick(4) == 0 { // scripts and environments: shared by an array's tasks, dropped at the end
			req.Command, req.Script, req.Env = nil, fmt.Sprintf("#!/bin/sh\necho %d\n", g.pick(3)), []string{"A=1"}
		}
		items := []SubmitItem{{Request: req}}
		if g.pick(8) == 0 {
			// A batch: the same twice under one request id (the second answers
			// the first), and one refused (unknown vCluster) that stops nothing.
			bad := req
			bad.VCluster = "nowhere"
			rid := fmt.Sprintf("b%d", g.pick(20))
			return &SubmitBatch{Header: h, Submissions: []Submit{{Header: Header{RequestID: rid}, Items: items},
				{Items: []SubmitItem{{Request: bad}}}, {Header: Header{RequestID: rid}, Items: items}, {Items: items}}}
		}
		if g.pick(10) != 0 {
			return &Submit{Header: h, Items: items}
		}
		// A DAG of two to five stages: fan-out, fan-in, arrays, every condition.
		conds := []model.DependencyCondition{model.AfterOK, model.AfterAny, model.AfterNotOK, model.AfterStart, model.AfterCorr}
		items[0].Request.Name = "stage0"
		for i := 1; i < 2+g.pick(4); i++ {
			it := SubmitItem{Request: req}
			it.Request.Name = fmt.Sprintf("stage%d", i)
			it.Request.DependsOn = nil
			if g.pick(3) == 0 {
				it.Request.Array = &model.ArraySpec{Start: 0, End: 1 + g.pick(4), Step: 1, MaxConcurrent: g.pick(2)}
			} else {
				it.Request.Array = nil
			}
			if g.pick(6) == 0 {
				it.Request.DependsOn = []model.Dependency{{Condition: model.Singleton}}
			}
			for k := 0; k < 1+g.pick(2); k++ {
				it.AfterItems = append(it.AfterItems, ItemDep{Condition: conds[g.pick(len(conds))], Index: g.pick(i)})
			}
			items = append(items, it)
		}
		return &Submit{Header: h, Items: items, DAG: true, Name: fmt.Sprintf("dag%d", g.pick(3))}
	case r < 55 && len(pending) > 0 && len(nodes) > 0:
		cmd := &AssignBatch{Header: h, VCluster: vcs[g.pick(3)]}
		for range 1 + g.pick(4) {
			a := pending[g.pick(len(pending))]
			var names []string
			for range a.NodesMin {
				names = append(names, nodes[g.pick(len(nodes))].Name)
			}
			version := s.Version
			if g.pick(6) == 0 && version > 3 {
				version -= uint64(g.pick(3))
			}
			cmd.Items = append(cmd.Items, AssignItem{AllocID: a.ID, Nodes: names, Version: version})
			if g.pick(2) == 0 {
				cmd.VCluster = a.VCluster
			}
		}
		return cmd
	case r < 74 && len(active) > 0 && len(pending) > 0:
		p, v := pending[g.pick(len(pending))], active[g.pick(len(active))]
		var reserve []string
		for range g.pick(3) {
			reserve = append(reserve, nodes[g.pick(len(nodes))].Name)
		}
		return &Preempt{Header: h, VCluster: vcs[g.pick(3)], ReserveUntil: g.now.Add(time.Minute),
			Items: []PreemptItem{{ForAlloc: p.ID, Victims: []uint64{v.ID}, Reserve: reserve, Version: s.Version - uint64(g.pick(2))}}}
	case r < 76 && len(active) > 0:
		return &Checkpoint{Header: h, Items: []CheckpointItem{{AllocID: active[g.pick(len(active))].ID,
			Reason: []string{CheckpointUser, CheckpointProactive, CheckpointSignal}[g.pick(3)], Deadline: g.now.Add(time.Minute)}}}
	case r < 80 && len(active) > 0:
		cmd := &UpdateAllocs{Header: h}
		for range 1 + g.pick(3) {
			a := active[g.pick(len(active))]
			st := []model.AllocState{model.StateRunning, model.StateCompleted, model.StateFailed, model.StateCheckpointing,
				model.StateSuspended, model.StatePending, model.StateCancelled}[g.pick(7)]
			u := AllocUpdate{AllocID: a.ID, State: st}
			if g.pick(3) == 0 {
				u.Reason = model.ReasonCheckpointed
			}
			if st == model.StateFailed {
				code := 1 + g.pick(3)
				u.ExitCode, u.Reason = &code, model.ReasonNonZeroExit
			}
			if st.Terminal() && g.pick(2) == 0 {
				u.EndTime = g.now.Add(-time.Duration(g.pick(90)) * time.Second) // a late report
			}
			cmd.Updates = append(cmd.Updates, u)
		}
		return cmd
	case r < 82 && len(s.allocs) > 0: // job control and site configuration (issue 12)
		ids := s.allocIDs()
		id := ids[g.pick(len(ids))]
		switch g.pick(6) {
		case 0:
			return &Hold{Header: h, IDs: []uint64{id}, Release: g.pick(2) == 0, Kind: []string{model.HoldUser, model.HoldAdmin}[g.pick(2)], Admin: g.pick(2) == 0}
		case 1:
			w := time.Duration(1+g.pick(120)) * time.Minute
			n := 1 + g.pick(3)
			return &UpdateAlloc{Header: h, IDs: []uint64{id}, Walltime: &w, NodesMin: &n, Admin: g.pick(2) == 0}
		case 2:
			return &RequeueJobs{Header: h, IDs: []uint64{id}}
		case 3:
			return &SetQOS{Header: h, QOS: model.QOS{Name: fmt.Sprintf("q%d", g.pick(3)), PriorityClass: g.pick(11)}, Delete: g.pick(3) == 0}
		case 4:
			return &SetPartition{Header: h, Name: fmt.Sprintf("p%d", g.pick(3)), VCluster: []string{"", "batch", "ml"}[g.pick(3)]}
		default:
			name := vcs[g.pick(3)]
			return &UpdateAlloc{Header: h, IDs: []uint64{id}, VCluster: &name}
		}
	case r < 85 && len(s.allocs) > 0:
		ids := s.allocIDs()
		return &Cancel{Header: h, IDs: []uint64{ids[g.pick(len(ids))], uint64(g.pick(500))}}
	case r < 89 && len(nodes) > 0:
		n := nodes[g.pick(len(nodes))]
		return &SetNodeState{Header: h, Nodes: []string{n.Name}, Allocation: n.Cleanup * uint64(g.pick(2)),
			Action: []NodeAction{ActionDrain, ActionUndrain, ActionDegraded, ActionDown, ActionUp, ActionCleaned}[g.pick(6)], Reason: "r"}
	case r < 90 && len(nodes) > 0:
		n := nodes[g.pick(len(nodes))]
		return &NodeFacts{Header: h, Nodes: []NodeFact{{Name: n.Name, Fingerprint: fmt.Sprintf("fp%d", g.pick(3)), Detail: "d"}}}
	case r < 91 && len(nodes) > 0:
		n := nodes[g.pick(len(nodes))]
		alloc := n.Allocation
		if g.pick(4) == 0 {
			alloc++ // stale
		}
		return &NodePower{Header: h, Nodes: []NodeMeasurement{{Name: n.Name, Watts: g.pick(600), Allocation: alloc}}}
	case r < 93 && len(s.allocs) > 0:
		ids := s.allocIDs()
		return &Requeue{Header: h, IDs: []uint64{ids[g.pick(len(ids))]}}
	case r < 95 && len(nodes) > 0:
		if len(pending) > 0 && g.pick(2) == 0 {
			p := pending[g.pick(len(pending))]
			lent := []string{nodes[g.pick(len(nodes))].Name}
			return &Reclaim{Header: h, VCluster: p.VCluster, ReserveUntil: g.now.Add(time.Minute),
				Items: []ReclaimItem{{ForAlloc: p.ID, Nodes: lent, Reserve: append(lent, nodes[g.pick(len(nodes))].Name), Version: s.Version}}}
		}
		return &Reclaim{Header: h, Nodes: []string{nodes[g.pick(len(nodes))].Name}}
	case r < 96 && len(nodes) > 0:
		return &ReturnNodes{Header: h, Nodes: []string{nodes[g.pick(len(nodes))].Name}}
	case r < 97:
		return &SetPowerBudget{Header: h, Watts: int64(g.pick(3)) * 10000}
	case r < 98:
		return &SetTenant{Header: h, Tenant: model.Tenant{Name: fmt.Sprintf("t%d", g.pick(4)), MaxNodes: g.pick(12), MaxRunning: g.pick(5), FairShareTarget: 0.25}}
	case r < 99 && g.pick(2) == 0:
		return &Prune{Header: h, Before: g.now.Add(-time.Duration(g.pick(60)) * time.Second)}
	case r < 99: // into the history of ended jobs (ended or not: Apply skips what has not ended)
		c := &ArchiveEnded{Header: h, DropBefore: g.now.Add(-time.Duration(g.pick(600)) * time.Second)}
		for _, id := range s.allocIDs() {
			if g.pick(3) == 0 {
				c.IDs = append(c.IDs, id)
			}
		}
		return c
	default:
		return &SetMember{Header: h, Member: Member{ID: fmt.Sprintf("m%d", g.pick(3)), RaftAddr: "r", APIAddr: "a"}}
	}
}

// dependencies picks one to three conditions on existing allocations, in
// every form: single ids, whole arrays, array tasks, all of or any of.
func (g *commandLog) dependencies(s *State) ([]model.Dependency, bool) {
	ids := s.allocIDs()
	conds := []model.DependencyCondition{model.AfterOK, model.AfterAny, model.AfterNotOK, model.AfterStart, model.AfterCorr}
	var deps []model.Dependency
	for range 1 + g.pick(3) {
		id := ids[g.pick(len(ids))]
		if a := s.allocs[id]; a.ArrayJobID != 0 && g.pick(2) == 0 {
			id = a.ArrayJobID // the whole array, while it is retained
			if s.allocs[id] == nil {
				id = a.ID
			}
		}
		deps = append(deps, model.Dependency{Condition: conds[g.pick(len(conds))], IDs: []uint64{id}, Task: g.pick(5) == 0})
	}
	return deps, g.pick(3) == 0
}

func snapshotBytes(t *testing.T, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := snap.(*fsmSnapshot).image.write(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type discardSink struct{ bytes.Buffer }

func (discardSink) ID() string    { return "test" }
func (discardSink) Cancel() error { return nil }
func (discardSink) Close() error  { return nil }

func TestDeterministicReplay(t *testing.T) {
	const commands = 3000
	seeds := []int64{1, 2, 3}
	if testing.Short() {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			g := &commandLog{rng: rand.New(rand.NewSource(seed)), now: t0, shadow: NewState()}
			// Three vClusters and some nodes to start with.
			var log [][]byte
			for i := range commands {
				c := g.next()
				if i < 3 {
					c = &SetVCluster{Header: Header{Time: g.now}, VCluster: model.VCluster{Name: []string{"batch", "ml", "int"}[i], Type: model.TypeHPCBatch,
						AllowLending: true, AllowBorrowing: true}}
				}
				data, err := Encode(c)
				if err != nil {
					t.Fatal(err)
				}
				dc, _ := Decode(data)
				g.shadow.apply(dc)
				if i%100 == 0 || os.Getenv("LATTICE_DEBUG_EVERY") != "" {
					if v := CheckInvariants(g.shadow); len(v) > 0 {
						t.Fatalf("after command %d (%s): %s", i, c.Type(), strings.Join(v, "\n"))
					}
				}
				log = append(log, data)
			}
			a, b, c := NewFSM(), NewFSM(), NewFSM()
			mid := len(log) / 2
			var midSnap discardSink
			for i, data := range log {
				l := &raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: data}
				ra := a.Apply(l)
				rb := b.Apply(l)
				if ja, jb := mustJSON(t, ra), mustJSON(t, rb); ja != jb {
					t.Fatalf("entry %d: results differ: %s vs %s", i+1, ja, jb)
				}
				if i+1 == mid {
					snap, err := a.Snapshot()
					if err != nil {
						t.Fatal(err)
					}
					if err := snap.Persist(&midSnap); err != nil {
						t.Fatal(err)
					}
					if err := c.Restore(io.NopCloser(&midSnap)); err != nil {
						t.Fatal(err)
					}
				}
				if i+1 > mid {
					c.Apply(l)
				}
			}
			sa, sb, sc := snapshotBytes(t, a), snapshotBytes(t, b), snapshotBytes(t, c)
			if !bytes.Equal(sa, sb) {
				t.Fatal("two FSMs fed the same log produced different snapshots")
			}
			if !bytes.Equal(sa, sc) {
				t.Fatalf("an FSM restored from a mid-log snapshot diverged (%d vs %d bytes)", len(sa), len(sc))
			}
			var st *State
			a.View(func(s *State) { st = s })
			if v := CheckInvariants(st); len(v) > 0 {
				t.Fatalf("final state: %s", strings.Join(v, "\n"))
			}
			// Something must have run: active or ended now, or requeued
			// (ended allocations may have been pruned by then).
			ran := st.ActiveCount() + st.idx.ended.Len()
			byState := map[string]int{}
			for _, a := range st.Allocations() {
				byState[string(a.State)+"/"+a.Reason]++
				if a.RequeueCount > 0 {
					ran++
				}
			}
			if st.AllocationCount() < 50 || ran == 0 {
				t.Fatalf("the log did not exercise much: %d allocations %v", st.AllocationCount(), byState)
			}
			t.Logf("seed %d: %d entries, version %d, %d allocations, %d nodes, snapshot %d bytes", seed, len(log), st.Version, st.AllocationCount(), st.NodeCount(), len(sa))
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
