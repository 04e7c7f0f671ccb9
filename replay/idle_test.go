package replay

import (
	"math"
	"testing"
)

// TestIdleHandTraces checks the idle classes against schedules worked out
// by hand (submit, run = estimate, size).
func TestIdleHandTraces(t *testing.T) {
	tests := []struct {
		name     string
		policy   string
		capacity int
		jobs     []tj
		// Node-seconds per class; capacity × makespan − work is their sum.
		noFit, held, empty float64
		makespan           float64
	}{{
		// A (1 node) runs 0–10; B needs both nodes, so the other node idles
		// with nothing that fits: 10 node-s. B runs 10–20.
		name: "nothing fits", policy: PolicyFCFS, capacity: 2,
		jobs:  []tj{{id: 1, submit: 0, run: 10, est: 10, size: 1}, {id: 2, submit: 0, run: 10, est: 10, size: 2}},
		noFit: 10, makespan: 20,
	}, {
		// A (3 nodes) runs 0–10; B (4 nodes, the head) from 10; C (1 node,
		// 20 s) fits the idle node but would delay B: held 10 node-s. C
		// runs 20–40 alone: 3 nodes idle with nothing queued, 60 node-s.
		name: "held by a reservation", policy: PolicyEASY, capacity: 4,
		jobs: []tj{{id: 1, submit: 0, run: 10, est: 10, size: 3}, {id: 2, submit: 0, run: 10, est: 10, size: 4},
			{id: 3, submit: 0, run: 20, est: 20, size: 1}},
		held: 10, empty: 60, makespan: 40,
	}, {
		// A gap in arrivals: A runs 0–10 on 1 of 2 nodes (10 node-s
		// empty), nothing runs 10–30 (40 node-s empty), B runs 30–40 on
		// both.
		name: "empty queue", policy: PolicyEASY, capacity: 2,
		jobs:  []tj{{id: 1, submit: 0, run: 10, est: 10, size: 1}, {id: 2, submit: 30, run: 10, est: 10, size: 2}},
		empty: 50, makespan: 40,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Run(tinyTrace(tt.capacity, tt.jobs...), Config{Policy: tt.policy})
			if err != nil {
				t.Fatal(err)
			}
			if res.Makespan != tt.makespan {
				t.Fatalf("makespan %v, want %v", res.Makespan, tt.makespan)
			}
			d := float64(tt.capacity) * tt.makespan
			want := IdleMetrics{NoFit: tt.noFit / d, Held: tt.held / d, Empty: tt.empty / d}
			if res.Idle != want {
				t.Errorf("idle %+v, want %+v", res.Idle, want)
			}
		})
	}
}

// TestIdleAddsUp: on a real trace, under every policy and with decisions
// every minute, the idle classes add up to 1 − utilization; the same on a
// trace with borrowing vClusters.
func TestIdleAddsUp(t *testing.T) {
	tr := loadTrace(t, "hpc2n.swf").First(800)
	check := func(t *testing.T, tr *Trace, cfg Config) {
		res, err := Run(tr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		i := res.Idle
		if i.NoFit < 0 || i.Held < 0 || i.Empty < 0 {
			t.Fatalf("negative idle share: %+v", i)
		}
		if sum := i.NoFit + i.Held + i.Empty; math.Abs(sum-(1-res.Utilization)) > 1e-9 {
			t.Errorf("idle %+v adds up to %v, want 1 − utilization = %v", i, sum, 1-res.Utilization)
		}
	}
	for _, p := range Policies {
		t.Run(p, func(t *testing.T) { check(t, tr, Config{Policy: p}) })
	}
	t.Run("lattice every minute", func(t *testing.T) { check(t, tr, Config{Policy: PolicyLattice, Cycle: 60e9}) })
	t.Run("mixed", func(t *testing.T) { check(t, mixedTrace(t, 1500), Config{Policy: PolicyLattice}) })
}
