package replay

import (
	"testing"
	"time"
)

type tj struct {
	id          uint64
	submit, run int // seconds
	est, size   int
	tenant      string
	deps        []uint64
}

func tinyTrace(capacity int, jobs ...tj) *Trace {
	tr := &Trace{Name: "tiny", Capacity: capacity}
	for _, j := range jobs {
		tenant := j.tenant
		if tenant == "" {
			tenant = "t"
		}
		tr.Jobs = append(tr.Jobs, Job{ID: j.id, Submit: time.Duration(j.submit) * time.Second,
			Runtime: time.Duration(j.run) * time.Second, Estimate: time.Duration(j.est) * time.Second,
			Size: j.size, Tenant: tenant, DependsOn: j.deps})
	}
	sortJobs(tr.Jobs)
	return tr
}

// starts replays and returns each job's start in seconds, by job number.
func starts(t *testing.T, tr *Trace, cfg Config) map[uint64]int {
	t.Helper()
	s, err := newSim(tr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.run(); err != nil {
		t.Fatal(err)
	}
	out := map[uint64]int{}
	for i, r := range s.jobs {
		if !r.done {
			t.Fatalf("job %d not done", tr.Jobs[i].ID)
		}
		out[tr.Jobs[i].ID] = int(r.start / time.Second)
	}
	return out
}

// TestBaselineSchedules checks each baseline against schedules derived by
// hand. Trace "backfill" on 4 nodes (submit, run = estimate, size):
//
//	A: 0, 10, 2   B: 1, 10, 3   C: 2, 10, 4   D: 3, 30, 1
//
// fcfs: A at 0; B waits for A (10); C for B (20); D behind C (30).
// easy: at 1 B is the head, shadow 10 (A's end frees 4 ≥ 3), extra 4−3 = 1;
// C (4 nodes) does not fit now; at 3 D fits (2 free), ends at 33 > 10 but
// needs 1 ≤ extra 1: backfilled at 3. B at 10. C needs 4 nodes: it waits for
// D's end at 33.
// conservative: B reserved [10,20); C reserved [20,30) on all 4 nodes; D
// would overlap C's reservation from 3, so it is reserved at 30: A 0, B 10,
// C 20, D 30 (the same as fcfs here: D may not delay C).
//
// Trace "shadow" on 4 nodes (submit, run, estimate, size):
//
//	A: 0, 10, 10, 2   B: 1, 5, 5, 4   C: 2, 5, 8, 1   D: 3, 1, 8, 1
//
// easy: B's shadow is 10 with no extra node; C ends by its estimate at
// 2+8 = 10 ≤ 10: backfilled at 2 (really ends at 7); D would end by 11 > 10
// and no extra node: waits; B at 10, D after B at 15.
// fcfs: A 0, B 10, C 15, D 15.
//
// Trace "tie" on 8 nodes (submit, run = estimate, size):
//
//	A, B, C: 0, 10, 2   H: 1, 5, 5   D: 2, 30, 2
//
// easy: at 1 H (5 nodes, 2 free) is the head; A's end gives 4, B's 6 ≥ 5:
// the shadow is 10, and C ends then too, so 8 − 5 = 3 nodes are extra (not
// 6 − 5 = 1: every job ending at the shadow time counts); D (2 ≤ 3) is
// backfilled at 2 although it ends after the shadow. H at 10. The same for
// sjbf and easy++ (one user, no runs completed: predictions = estimates).
func TestBaselineSchedules(t *testing.T) {
	backfill := tinyTrace(4,
		tj{id: 1, submit: 0, run: 10, est: 10, size: 2},
		tj{id: 2, submit: 1, run: 10, est: 10, size: 3},
		tj{id: 3, submit: 2, run: 10, est: 10, size: 4},
		tj{id: 4, submit: 3, run: 30, est: 30, size: 1},
	)
	shadow := tinyTrace(4,
		tj{id: 1, submit: 0, run: 10, est: 10, size: 2},
		tj{id: 2, submit: 1, run: 5, est: 5, size: 4},
		tj{id: 3, submit: 2, run: 5, est: 8, size: 1},
		tj{id: 4, submit: 3, run: 1, est: 8, size: 1},
	)
	tie := tinyTrace(8,
		tj{id: 1, submit: 0, run: 10, est: 10, size: 2},
		tj{id: 2, submit: 0, run: 10, est: 10, size: 2},
		tj{id: 3, submit: 0, run: 10, est: 10, size: 2},
		tj{id: 4, submit: 1, run: 5, est: 5, size: 5},
		tj{id: 5, submit: 2, run: 30, est: 30, size: 2},
	)
	tieWant := map[uint64]int{1: 0, 2: 0, 3: 0, 4: 10, 5: 2}
	for _, tc := range []struct {
		name   string
		tr     *Trace
		policy string
		want   map[uint64]int
	}{
		{"tie/easy", tie, PolicyEASY, tieWant},
		{"tie/sjbf", tie, PolicySJBF, tieWant},
		{"tie/easy++", tie, PolicyEASYPP, tieWant},
		{"backfill/fcfs", backfill, PolicyFCFS, map[uint64]int{1: 0, 2: 10, 3: 20, 4: 30}},
		{"backfill/easy", backfill, PolicyEASY, map[uint64]int{1: 0, 2: 10, 3: 33, 4: 3}},
		{"backfill/conservative", backfill, PolicyConservative, map[uint64]int{1: 0, 2: 10, 3: 20, 4: 30}},
		{"shadow/fcfs", shadow, PolicyFCFS, map[uint64]int{1: 0, 2: 10, 3: 15, 4: 15}},
		{"shadow/easy", shadow, PolicyEASY, map[uint64]int{1: 0, 2: 10, 3: 2, 4: 15}},
		{"shadow/conservative", shadow, PolicyConservative, map[uint64]int{1: 0, 2: 10, 3: 2, 4: 15}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := starts(t, tc.tr, Config{Policy: tc.policy})
			for id, w := range tc.want {
				if got[id] != w {
					t.Errorf("job %d starts at %d, want %d (all: %v)", id, got[id], w, got)
				}
			}
		})
	}
}

// TestConservativeEarlyEnd: on 2 nodes A (0, run 5, est 100, 2 nodes) and
// B (1, run 10, est 10, 2 nodes): B is reserved at 100 but A really ends at
// 5, so the rebuilt schedule starts B at 5.
func TestConservativeEarlyEnd(t *testing.T) {
	tr := tinyTrace(2, tj{id: 1, submit: 0, run: 5, est: 100, size: 2}, tj{id: 2, submit: 1, run: 10, est: 10, size: 2})
	for _, p := range []string{PolicyFCFS, PolicyEASY, PolicyConservative} {
		if got := starts(t, tr, Config{Policy: p}); got[2] != 5 {
			t.Errorf("%s: B starts at %d, want 5", p, got[2])
		}
	}
}

// TestCompletionsBeforeArrivals: A (0, run 10, 2 of 2 nodes) ends at 10
// exactly when B (10, 2 nodes) arrives: B starts at 10, not later.
func TestCompletionsBeforeArrivals(t *testing.T) {
	tr := tinyTrace(2, tj{id: 1, submit: 0, run: 10, est: 10, size: 2}, tj{id: 2, submit: 10, run: 1, est: 1, size: 2})
	if got := starts(t, tr, Config{Policy: PolicyFCFS}); got[2] != 10 {
		t.Errorf("B starts at %d, want 10", got[2])
	}
}

// TestPeriodicCycle: with --cycle 30, decisions happen only at 0, 30, 60…
// from the first submit: A (0) starts at 0, B (5, 1 node of 2 free) waits
// for the tick at 30.
func TestPeriodicCycle(t *testing.T) {
	tr := tinyTrace(2, tj{id: 1, submit: 0, run: 100, est: 100, size: 1}, tj{id: 2, submit: 5, run: 1, est: 1, size: 1})
	got := starts(t, tr, Config{Policy: PolicyEASY, Cycle: 30 * time.Second})
	if got[1] != 0 || got[2] != 30 {
		t.Errorf("starts %v, want 1:0 2:30", got)
	}
}

// TestDAGEdges: B depends on A; it is eligible when A ends (at 10), and its
// wait counts from then: 0.
func TestDAGEdges(t *testing.T) {
	tr := tinyTrace(4, tj{id: 1, submit: 0, run: 10, est: 10, size: 1}, tj{id: 2, submit: 0, run: 10, est: 10, size: 1, deps: []uint64{1}})
	res, err := Run(tr, Config{Policy: PolicyFCFS})
	if err != nil {
		t.Fatal(err)
	}
	if got := starts(t, tr, Config{Policy: PolicyFCFS}); got[2] != 10 {
		t.Errorf("B starts at %d, want 10", got[2])
	}
	if res.AvgWait != 0 {
		t.Errorf("avg wait %v, want 0 (waits count from eligibility)", res.AvgWait)
	}
}

// TestMultiGroupPlacement: 4 nodes in groups of 2. A (1 node) takes node 0;
// B (2 nodes) gets the lowest free nodes 1 and 2 — two groups although group
// 1 had both its nodes free: an avoidable spread. C (2 nodes, after A and B
// end) gets 0 and 1: one group. Share: 1 of 2 multi-node jobs.
func TestMultiGroupPlacement(t *testing.T) {
	tr := tinyTrace(4,
		tj{id: 1, submit: 0, run: 10, est: 10, size: 1},
		tj{id: 2, submit: 0, run: 10, est: 10, size: 2},
		tj{id: 3, submit: 20, run: 10, est: 10, size: 2},
	)
	res, err := Run(tr, Config{Policy: PolicyFCFS, GroupSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.MultiGroupJobs != 0.5 {
		t.Errorf("multi_group_jobs %v, want 0.5", res.MultiGroupJobs)
	}
}
