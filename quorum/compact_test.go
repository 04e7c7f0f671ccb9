package quorum

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

func submitArray(f *fixture, tasks int, script string, env []string) uint64 {
	f.t.Helper()
	r := f.ok(&Submit{Items: []SubmitItem{{Request: model.Request{VCluster: "batch", Script: script, Env: env,
		NodesMin: 1, Array: &model.ArraySpec{Start: 0, End: tasks - 1, Step: 1}}}}})
	return r.IDs[0]
}

func TestEndedAllocationsDropScriptAndEnv(t *testing.T) {
	tests := []struct {
		name string
		end  func(f *fixture, id uint64)
	}{
		{"cancelled pending", func(f *fixture, id uint64) { f.ok(&Cancel{IDs: []uint64{id}}) }},
		{"completed", func(f *fixture, id uint64) {
			f.assign("batch", id, "b0")
			f.ok(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: id, State: model.StateRunning}}})
			f.ok(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: id, State: model.StateCompleted}}})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			id := submitArray(f, 2, "#!/bin/sh\ntrue\n", []string{"A=1"})
			if a := f.s.Allocation(id); a.Script == "" || len(a.Env) != 1 {
				t.Fatalf("pending allocation lost its request: %+v", a.Request)
			}
			tc.end(f, id)
			a := f.s.Allocation(id)
			if !a.State.Terminal() || a.Script != "" || a.Env != nil {
				t.Fatalf("ended allocation %s keeps script %q env %v", a.State, a.Script, a.Env)
			}
			if other := f.s.Allocation(id + 1); other.Script == "" {
				t.Fatal("the other task lost its script")
			}
		})
	}
}

func TestSnapshotWritesAnArraysScriptOnce(t *testing.T) {
	f := newFixture(t)
	script := "#!/bin/sh\n" + strings.Repeat("# padding line of a long batch script\n", 256)
	id := submitArray(f, 200, script, []string{"A=1", "B=2"})
	solo := f.submit("batch", 1)
	// A task that ended dropped its script; it must stay dropped.
	f.ok(&Cancel{IDs: []uint64{id + 3}})

	var buf bytes.Buffer
	if err := f.s.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(buf.Bytes(), []byte("padding line of a long")); n != 256 {
		t.Fatalf("script written %d times (counting its 256 lines), want once", n/256)
	}
	if buf.Len() > 200*1024 {
		t.Fatalf("snapshot of 200 tasks is %d bytes; the script alone is %d", buf.Len(), len(script))
	}
	s, err := ReadSnapshot(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	for i := range uint64(200) {
		a := s.Allocation(id + i)
		want := script
		if i == 3 {
			want = ""
		}
		if a.Script != want || (want != "" && len(a.Env) != 2) {
			t.Fatalf("task %d restored with %d script bytes, env %v", i, len(a.Script), a.Env)
		}
	}
	if s.Allocation(solo).Script != "" || len(s.Allocation(solo).Command) == 0 {
		t.Fatal("a single allocation changed on restore")
	}
	var again bytes.Buffer
	if err := s.WriteSnapshot(&again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Fatal("restored state writes different bytes")
	}
	if v := CheckInvariants(s); len(v) > 0 {
		t.Fatal(v)
	}
}

func TestSnapshotSharedScriptMissingIsCorrupt(t *testing.T) {
	f := newFixture(t)
	submitArray(f, 3, "#!/bin/sh\ntrue\n", nil)
	var buf bytes.Buffer
	if err := f.s.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, l := range strings.SplitAfter(buf.String(), "\n") {
		if !strings.HasPrefix(l, `{"kind":"script"`) && !strings.HasPrefix(l, `{"kind":"checksum"`) {
			kept = append(kept, l)
		}
	}
	// Rewrite without the script record but with a valid checksum, so
	// only the missing reference can fail.
	_, err := ReadSnapshot(strings.NewReader(withChecksum(t, strings.Join(kept, ""))))
	if err == nil || !strings.Contains(err.Error(), "no script record") {
		t.Fatalf("got %v, want an error naming the missing script record", err)
	}
}

// TestSnapshotBeforeSharedScriptsLoads reads a snapshot written by the code
// before array scripts were shared (testdata, generated from commit c1717aa
// with an array of 4 tasks, each carrying its script and env, and a
// cancelled allocation).
func TestSnapshotBeforeSharedScriptsLoads(t *testing.T) {
	b, err := os.ReadFile("testdata/snapshot-format1-before-shared-scripts.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ReadSnapshot(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for id := uint64(1); id <= 4; id++ {
		if a := s.Allocation(id); a == nil || !strings.Contains(a.Script, "echo hello") || len(a.Env) != 2 {
			t.Fatalf("task %d: %+v", id, a)
		}
	}
	if v := CheckInvariants(s); len(v) > 0 {
		t.Fatal(v)
	}
	var out bytes.Buffer
	if err := s.WriteSnapshot(&out); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "echo hello"); n != 1 {
		t.Fatalf("rewritten snapshot carries the script %d times, want 1", n)
	}
}

func TestFSMArchivesPrunedAllocations(t *testing.T) {
	f := newFixture(t)
	a := f.submit("batch", 1)
	b := f.submit("batch", 1)
	f.ok(&Cancel{IDs: []uint64{a}})
	fsm := &FSM{state: f.s, changed: make(chan struct{})}
	var got []uint64
	var at uint64
	fsm.Archive = func(index uint64, pruned []*model.Allocation) {
		at = index
		for _, p := range pruned {
			got = append(got, p.ID)
		}
	}
	fsm.applyCommand(42, &Prune{Header: Header{Time: f.now}, Before: f.now.Add(1)})
	if at != 42 || len(got) != 1 || got[0] != a || f.s.Allocation(b) == nil {
		t.Fatalf("archived %v at %d", got, at)
	}
	fsm.applyCommand(43, &Prune{Header: Header{Time: f.now}, Before: f.now.Add(1)})
	if len(got) != 1 {
		t.Fatalf("a Prune that dropped nothing archived %v", got)
	}
}

// withChecksum appends a valid checksum record to the records in body.
func withChecksum(t *testing.T, body string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(body))
	return body + fmt.Sprintf(`{"kind":"checksum","records":%d,"sha256":"%s"}`+"\n", strings.Count(body, "\n"), hex.EncodeToString(sum[:]))
}

func TestSubmitBatchAppliesEachOnItsOwn(t *testing.T) {
	f := newFixture(t)
	ok := model.Request{VCluster: "batch", Command: []string{"true"}, NodesMin: 1}
	bad := ok
	bad.VCluster = "nowhere"
	arr := ok
	arr.Array = &model.ArraySpec{Start: 0, End: 2, Step: 1}
	r := f.ok(&SubmitBatch{Submissions: []Submit{
		{Header: Header{RequestID: "r1"}, Items: []SubmitItem{{Request: ok}}},
		{Items: []SubmitItem{{Request: bad}}},
		{Items: []SubmitItem{{Request: arr}}},
		{Header: Header{RequestID: "r1"}, Items: []SubmitItem{{Request: ok}}},
	}})
	subs := r.Submissions
	if len(subs) != 4 || len(subs[0].IDs) != 1 || subs[1].Rejection == nil || len(subs[2].IDs) != 3 {
		t.Fatalf("results %s", mustJSON(t, subs))
	}
	if !strings.Contains(subs[1].Rejection.Message, `invalid vcluster "nowhere"`) {
		t.Fatalf("rejection %q", subs[1].Rejection.Message)
	}
	if subs[3].IDs[0] != subs[0].IDs[0] || f.s.AllocationCount() != 4 {
		t.Fatalf("a repeated request id created again: %v, %d allocations", subs[3].IDs, f.s.AllocationCount())
	}
	// A later Submit or batch with the same request id answers the first outcome.
	again := f.ok(&Submit{Header: Header{RequestID: "r1"}, Items: []SubmitItem{{Request: ok}}})
	if again.IDs[0] != subs[0].IDs[0] {
		t.Fatalf("retry created %v", again.IDs)
	}
	for _, n := range []int{0, MaxBatchSubmissions + 1} {
		r := f.apply(&SubmitBatch{Submissions: make([]Submit, n)})
		if r.Rejection == nil || !strings.Contains(r.Rejection.Message, "allowed 1..10000") {
			t.Fatalf("batch of %d: %+v", n, r.Rejection)
		}
	}
	if a := f.s.Allocation(subs[0].IDs[0]); !a.SubmitTime.Equal(f.now.Add(-3 * time.Second)) {
		t.Fatalf("batch submission time %v", a.SubmitTime)
	}
}
