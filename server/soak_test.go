package server

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// soakAuditor checks the state after every committed command: every
// invariant (quorum.CheckInvariants), that no node is borrowed back by the
// vCluster it was reclaimed from within its home's back-off, and it counts
// what happened.
type soakAuditor struct {
	mu         sync.Mutex
	violations []string
	commands   int
	current    map[string]string // node → current vCluster after the last command
	borrows    map[string]int    // node → times lent out
	preempted  map[uint64]int64  // allocation → last Preemption time seen (unix ns)
	reclaims   int
	preempts   int
}

func newSoakAuditor() *soakAuditor {
	return &soakAuditor{current: map[string]string{}, borrows: map[string]int{}, preempted: map[uint64]int64{}}
}

func (a *soakAuditor) audit(c quorum.Command, s *quorum.State) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.commands++
	for _, v := range quorum.CheckInvariants(s) {
		if len(a.violations) < 50 {
			a.violations = append(a.violations, fmt.Sprintf("after %s: %s", c.Type(), v))
		}
	}
	t := c.CommandHeader().Time
	for _, n := range s.Nodes() {
		prev := a.current[n.Name]
		a.current[n.Name] = n.CurrentVCluster
		if prev == "" || prev == n.CurrentVCluster || !n.Borrowed() {
			continue
		}
		a.borrows[n.Name]++
		if home := s.VCluster(n.HomeVCluster); home != nil && n.ReclaimedFrom == n.CurrentVCluster && t.Before(n.ReclaimedAt.Add(home.Backoff())) {
			a.violations = append(a.violations, fmt.Sprintf("node %s lent back to %s at %s, within the back-off of its reclaim at %s",
				n.Name, n.CurrentVCluster, t.Format(time.RFC3339Nano), n.ReclaimedAt.Format(time.RFC3339Nano)))
		}
	}
	if _, ok := c.(*quorum.Reclaim); !ok {
		if _, ok := c.(*quorum.Preempt); !ok {
			return
		}
	}
	for _, al := range s.Active() {
		if p := al.Preemption; p != nil && a.preempted[al.ID] != p.Time.UnixNano() {
			a.preempted[al.ID] = p.Time.UnixNano()
			if p.Kind == model.PreemptReclaim {
				a.reclaims++
			} else {
				a.preempts++
			}
		}
	}
}

// TestSoakElasticSharing runs three vClusters with mixed priority classes
// and checkpoint modes, borrowing, reclaim and preemption continuously, and
// checks every commit. By default it runs 10 s; LATTICE_SOAK=10m runs the
// long soak: LATTICE_SOAK=10m go test -run TestSoakElasticSharing -timeout 30m -v ./server
func TestSoakElasticSharing(t *testing.T) {
	run := 10 * time.Second
	if v := os.Getenv("LATTICE_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("LATTICE_SOAK=%q: want a duration such as 10m", v)
		}
		run = d
	}
	aud := newSoakAuditor()
	vcs := []string{"hpc-batch", "ml-training", "interactive"}
	d := startDevWith(t, t.TempDir(), 24, vcs, func(c *Config) {
		c.AuditState = aud.audit
		c.KillGrace = time.Second
	})
	for _, vc := range vcs {
		d.setVCluster(t, &latticev1.SetVClusterRequest{Name: vc, ReclaimGraceMs: 3000, ReclaimBackoffMs: 5000, PreemptHorizonMs: 5000,
			CycleMs: 1000})
	}

	rng := rand.New(rand.NewSource(1))
	classes := []int32{0, 2, 5, 7, 10}
	var ids []string
	start := time.Now()
	for time.Since(start) < run {
		// Phases: one vCluster is busy for a while, so the others lend to it
		// and then take their nodes back.
		hot := vcs[int(time.Since(start)/(8*time.Second))%len(vcs)]
		vc := hot
		if rng.Intn(3) == 0 {
			vc = vcs[rng.Intn(len(vcs))]
		}
		secs := 1 + rng.Intn(8)
		r := &latticev1.AllocationRequest{
			Name: "soak", Vcluster: vc, NodesMin: int32(1 + rng.Intn(6)), WalltimeSeconds: 300, PriorityClass: classes[rng.Intn(len(classes))],
			Command: []string{fmt.Sprintf(`n=%d; [ "${LATTICE_RESTART_COUNT:-0}" -ge 1 ] && n=%d
trap 'touch "$LATTICE_CHECKPOINT_DONE"; exit 0' USR1
i=0; while [ $i -lt $n ]; do sleep 0.1; i=$((i+1)); done`, secs*10, secs*5)},
		}
		switch rng.Intn(10) {
		case 0, 1, 2:
			r.Checkpoint = "none"
		case 3:
			r.Checkpoint = "signal" // but it ignores the request: stopped after the grace
			r.Command = []string{fmt.Sprintf("trap '' USR1; sleep %d", secs)}
		default:
			r.Checkpoint = "signal"
		}
		resp, err := d.allocs.Submit(context.Background(), &latticev1.SubmitRequest{Request: r})
		if err != nil {
			t.Fatalf("submit: %v", err)
		}
		ids = append(ids, resp.DisplayId)
		// About one job a second: 24 nodes run ~1.5 jobs/s of this mix, so
		// the cluster is busy but not swamped.
		time.Sleep(time.Duration(500+rng.Intn(800)) * time.Millisecond)
		d.checkNoStuckCheckpoint(t)
	}

	// Drain: everything submitted ends, nothing is lost or stuck. Work may
	// queue up behind a busy phase, so the drain waits as long as
	// allocations keep ending; a minute and a half without any progress is
	// a stuck allocation.
	left, lastLeft, progressAt := -1, -1, time.Now()
	for {
		r, err := d.allocs.List(context.Background(), &latticev1.ListAllocationsRequest{
			States: []string{"PENDING", "STAGING", "RUNNING", "CHECKPOINTING", "SUSPENDED"}})
		if err != nil {
			t.Fatal(err)
		}
		left = len(r.Allocations)
		if left == 0 {
			break
		}
		if left != lastLeft {
			lastLeft, progressAt = left, time.Now()
		}
		if time.Since(progressAt) > 90*time.Second {
			var stuck []string
			for _, a := range r.Allocations {
				stuck = append(stuck, fmt.Sprintf("%s %s (%s) history %v", a.DisplayId, a.State, a.Reason, historyStates(a)))
			}
			t.Fatalf("%d allocations made no progress for 90 s:\n%s", left, strings.Join(stuck, "\n"))
		}
		d.checkNoStuckCheckpoint(t)
		time.Sleep(500 * time.Millisecond)
	}
	states := map[string]int{}
	requeues := 0
	for _, id := range ids {
		a := d.get(t, id)
		states[a.State]++
		requeues += int(a.RequeueCount)
		if a.State != string(model.StateCompleted) {
			t.Errorf("allocation %s ended %s (%s), history %v", id, a.State, a.Reason, historyStates(a))
		}
	}
	aud.mu.Lock()
	defer aud.mu.Unlock()
	maxBorrows, borrowed := 0, 0
	var names []string
	for n, k := range aud.borrows {
		borrowed += k
		maxBorrows = max(maxBorrows, k)
		names = append(names, n)
	}
	sort.Strings(names)
	t.Logf("soak %s: %d allocations %v, %d commands audited, %d borrows (max %d per node), %d reclaims, %d preemptions, %d requeues",
		run, len(ids), states, aud.commands, borrowed, maxBorrows, aud.reclaims, aud.preempts, requeues)
	if len(aud.violations) > 0 {
		t.Fatalf("%d violations:\n%s", len(aud.violations), strings.Join(aud.violations, "\n"))
	}
	if run >= time.Minute && (aud.reclaims == 0 || aud.preempts == 0 || borrowed == 0) {
		t.Fatalf("the soak did not exercise sharing: %d borrows, %d reclaims, %d preemptions", borrowed, aud.reclaims, aud.preempts)
	}
}

// checkNoStuckCheckpoint fails when an allocation stays CHECKPOINTING well
// past its deadline (the agent stops it at the deadline, kills it a grace
// later).
func (d *devStack) checkNoStuckCheckpoint(t *testing.T) {
	t.Helper()
	r, err := d.allocs.List(context.Background(), &latticev1.ListAllocationsRequest{States: []string{"CHECKPOINTING"}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, a := range r.Allocations {
		if dl := a.CheckpointDeadlineUnixMs; dl != 0 && now.After(time.UnixMilli(dl).Add(20*time.Second)) {
			t.Fatalf("allocation %s still CHECKPOINTING 20 s after its deadline", a.DisplayId)
		}
	}
}
