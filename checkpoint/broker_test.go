package checkpoint

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

func TestProactive(t *testing.T) {
	p := DefaultParams()
	p.FailureRatePerNodeHour = 1e-3
	jobs := []Job{
		job(1).nodes(64).ran(10 * time.Minute).build(),                          // too young
		job(2).nodes(64).ran(10 * time.Hour).mode(model.CheckpointNone).build(), // cannot
		job(9).nodes(16).ran(10 * time.Hour).build(),                            // ties with 3
		job(4).nodes(4).ran(10 * time.Hour).build(),                             // smallest margin
		job(5).nodes(64).ran(10 * time.Hour).build(),                            // largest margin
		job(3).nodes(16).ran(10 * time.Hour).build(),
		job(6).nodes(64).ran(10 * time.Hour).checkpointed(10 * time.Minute).build(), // too soon
	}
	tests := []struct {
		name  string
		limit int
		want  []uint64
	}{
		{"no limit", 0, []uint64{5, 3, 9, 4}},
		{"negative limit", -1, []uint64{5, 3, 9, 4}},
		{"limit 2", 2, []uint64{5, 3}},
		{"limit 1", 1, []uint64{5}},
		{"limit above the count", 10, []uint64{5, 3, 9, 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := slices.Clone(jobs)
			got := Proactive(p, jobs, at(0), tc.limit)
			if !slices.Equal(got, tc.want) {
				t.Errorf("Proactive = %v, want %v", got, tc.want)
			}
			if !slices.Equal(jobs, before) {
				t.Error("Proactive modified its input")
			}
			rev := slices.Clone(jobs)
			slices.Reverse(rev)
			if got := Proactive(p, rev, at(0), tc.limit); !slices.Equal(got, tc.want) {
				t.Errorf("Proactive of the reversed input = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("nothing due", func(t *testing.T) {
		if got := Proactive(p, jobs[:2], at(1), 0); len(got) != 0 {
			t.Errorf("Proactive = %v, want none", got)
		}
		if got := Proactive(p, nil, at(1), 0); len(got) != 0 {
			t.Errorf("Proactive(nil) = %v, want none", got)
		}
	})
}

func TestSignalDue(t *testing.T) {
	hour := func() *jobBuilder { return job(1).walltime(time.Hour) }
	tests := []struct {
		name string
		job  Job
		secs int
		want bool
	}{
		{"one second before the lead time", hour().ran(55*time.Minute - time.Second).build(), 300, false},
		{"at the lead time", hour().ran(55 * time.Minute).build(), 300, true},
		{"after the lead time", hour().ran(56 * time.Minute).build(), 300, true},
		{"walltime overrun", hour().ran(2 * time.Hour).build(), 300, true},
		{"just started", hour().ran(0).build(), 300, false},
		{"no signal asked", hour().ran(59 * time.Minute).build(), 0, false},
		{"negative lead", hour().ran(59 * time.Minute).build(), -5, false},
		{"lead equals the walltime", hour().ran(0).build(), 3600, true},
		{"lead above the walltime", hour().ran(0).build(), 7200, true},
		{"huge lead", hour().ran(time.Second).build(), math.MaxInt, true},
		{"not started", hour().notStarted().build(), 7200, false},
		{"starts after now", hour().ran(-time.Minute).build(), 7200, false},
		{"no walltime", job(1).walltime(0).ran(time.Hour).build(), 300, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := SignalDue(tc.job, tc.secs, now); got != tc.want {
				t.Errorf("SignalDue(start %v, walltime %v, %d, now) = %v, want %v",
					now.Sub(tc.job.Start), tc.job.Walltime, tc.secs, got, tc.want)
			}
		})
	}
}

// TestPreemptionCostOrder checks that victims are ordered as the model says:
// each pair's first job must cost more than its second.
func TestPreemptionCostOrder(t *testing.T) {
	p := DefaultParams()
	none := model.CheckpointNone
	tests := []struct {
		name          string
		costly, cheap Job
	}{
		{"non-checkpointable long runner over a checkpointable one of the same size",
			job(1).nodes(16).ran(10 * time.Hour).mode(none).build(), job(2).nodes(16).ran(10 * time.Hour).build()},
		{"more nodes, checkpointable",
			job(1).nodes(32).ran(10 * time.Hour).build(), job(2).nodes(16).ran(10 * time.Hour).build()},
		{"more nodes, not checkpointable",
			job(1).nodes(32).ran(10 * time.Hour).mode(none).build(), job(2).nodes(16).ran(10 * time.Hour).mode(none).build()},
		{"longer run, not checkpointable",
			job(1).nodes(16).ran(10 * time.Hour).mode(none).build(), job(2).nodes(16).ran(2 * time.Hour).mode(none).build()},
		{"near its end over far from it, checkpointable",
			job(1).nodes(16).ran(23*time.Hour + 50*time.Minute).build(), job(2).nodes(16).ran(10 * time.Hour).build()},
		{"slow checkpoint over fast",
			job(1).nodes(16).ran(10 * time.Hour).minutes(30).build(), job(2).nodes(16).ran(10 * time.Hour).minutes(1).build()},
		{"never checkpointed over just checkpointed",
			job(1).nodes(16).ran(10 * time.Hour).build(), job(2).nodes(16).ran(10 * time.Hour).checkpointed(time.Minute).build()},
		{"running over not started",
			job(1).nodes(1).ran(time.Minute).build(), job(2).nodes(64).notStarted().build()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hi, lo := PreemptionCost(p, tc.costly, now), PreemptionCost(p, tc.cheap, now)
			if !(hi > lo) {
				t.Errorf("PreemptionCost %g, want above %g", hi, lo)
			}
		})
	}
}

func TestPreemptionCostValues(t *testing.T) {
	p := DefaultParams()
	noEnd := p
	noEnd.EndProximityWindow = 0
	tests := []struct {
		name string
		p    Params
		job  Job
		want float64
	}{
		{"not checkpointable: elapsed × nodes", noEnd, job(1).nodes(4).ran(3 * time.Hour).mode(model.CheckpointNone).build(), 12},
		{"not checkpointable ignores a last checkpoint", noEnd,
			job(1).nodes(4).ran(3 * time.Hour).checkpointed(time.Hour).mode(model.CheckpointNone).build(), 12},
		{"checkpointable: the checkpoint's cost", noEnd, job(1).nodes(4).ran(3 * time.Hour).build(),
			4*(5.0/60)*1.2 + 4*0.01},
		{"checkpointable: less unsaved work than a write", noEnd,
			job(1).nodes(4).ran(3 * time.Hour).checkpointed(time.Minute).build(), 4.0 / 60},
		{"not started", p, job(1).nodes(4).notStarted().build(), 0},
		{"end proximity one window before the end", p,
			job(1).nodes(2).ran(23 * time.Hour).mode(model.CheckpointNone).build(), 2*23 + 2*math.Exp(-1)},
		{"end proximity at the end", p,
			job(1).nodes(2).ran(25 * time.Hour).mode(model.CheckpointNone).build(), 2*25 + 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			near(t, "PreemptionCost", PreemptionCost(tc.p, tc.job, now), tc.want)
		})
	}
}

// TestPreemptionCostNearEnd checks that, with a checkpointable job's lost
// work constant, its cost only grows as it nears its end.
func TestPreemptionCostNearEnd(t *testing.T) {
	p := DefaultParams()
	prev := -1.0
	for ran := time.Hour; ran <= 25*time.Hour; ran += 10 * time.Minute {
		c := PreemptionCost(p, job(1).nodes(8).ran(ran).build(), now)
		if c < prev {
			t.Fatalf("ran %v: cost %g below %g ten minutes earlier", ran, c, prev)
		}
		prev = c
	}
}
