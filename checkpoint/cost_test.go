package checkpoint

import (
	"math"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

func TestEvaluate(t *testing.T) {
	highFailure := func(p *Params) { p.FailureRatePerNodeHour = 1e-3 }
	noFailure := func(p *Params) { p.FailureRatePerNodeHour = 0 }
	tests := []struct {
		name     string
		params   func(*Params) // changes to DefaultParams; nil = none
		job      Job
		pressure float64
		want     bool
		reason   string
	}{
		{"young job", highFailure, job(1).nodes(64).ran(10 * time.Minute).build(), 1,
			false, ReasonMinRunTime},
		{"young job one second short of the minimum run time", highFailure,
			job(1).nodes(64).ran(30*time.Minute - time.Second).build(), 1, false, ReasonMinRunTime},
		{"long runner never checkpointed, high failure rate", highFailure,
			job(1).nodes(64).ran(10 * time.Hour).class(10).build(), 0, true, ReasonValueAboveCost},
		{"long runner never checkpointed, default failure rate", nil,
			job(1).nodes(64).ran(10 * time.Hour).class(10).build(), 0, true, ReasonValueAboveCost},
		{"long runner that cannot fail or be preempted", noFailure,
			job(1).nodes(64).ran(10 * time.Hour).class(10).build(), 0, false, ReasonValueNotAboveCost},
		{"not checkpointable", highFailure,
			job(1).nodes(64).ran(10 * time.Hour).mode(model.CheckpointNone).build(), 1, false, ReasonNotCheckpointable},
		{"empty mode", highFailure,
			job(1).nodes(64).ran(10 * time.Hour).mode("").build(), 1, false, ReasonNotCheckpointable},
		{"hook mode", highFailure,
			job(1).nodes(64).ran(10 * time.Hour).mode(model.CheckpointHook).build(), 0, true, ReasonValueAboveCost},
		{"not started", highFailure, job(1).nodes(64).notStarted().build(), 1, false, ReasonNotStarted},
		{"starts after now", highFailure, job(1).nodes(64).ran(-time.Hour).build(), 1, false, ReasonNotStarted},
		{"checkpointed 30m ago", highFailure,
			job(1).nodes(64).ran(10 * time.Hour).checkpointed(30 * time.Minute).build(), 1, false, ReasonMinInterval},
		{"checkpointed 61m ago", highFailure,
			job(1).nodes(64).ran(10 * time.Hour).checkpointed(61 * time.Minute).build(), 0, true, ReasonValueAboveCost},
		{"minimum interval 0 allows a checkpoint right after one",
			func(p *Params) { p.MinInterval = 0; p.FailureRatePerNodeHour = 1 },
			job(1).nodes(64).ran(10 * time.Hour).checkpointed(10 * time.Minute).build(), 0, true, ReasonValueAboveCost},
		{"checkpoint from an earlier run, long ago", highFailure,
			job(1).nodes(64).ran(10 * time.Hour).checkpointed(30 * time.Hour).build(), 0, true, ReasonValueAboveCost},
		{"3m left, default write time 5m", highFailure,
			job(1).nodes(64).ran(24*time.Hour - 3*time.Minute).build(), 1, false, ReasonEndsBeforeWrite},
		{"3m left, user write time 2m", highFailure,
			job(1).nodes(64).ran(24*time.Hour - 3*time.Minute).minutes(2).build(), 1, true, ReasonValueAboveCost},
		{"20m left, user write time 30m", highFailure,
			job(1).nodes(64).ran(24*time.Hour - 20*time.Minute).minutes(30).build(), 1, false, ReasonEndsBeforeWrite},
		{"walltime overrun", highFailure,
			job(1).nodes(64).ran(25 * time.Hour).build(), 1, false, ReasonEndsBeforeWrite},
		{"small job on own nodes, no backlog", nil,
			job(1).ran(3 * time.Hour).build(), 0, false, ReasonValueNotAboveCost},
		{"small job on own nodes, full backlog", nil,
			job(1).ran(3 * time.Hour).build(), 1, true, ReasonValueAboveCost},
		{"small job on borrowed nodes, no backlog", nil,
			job(1).ran(3 * time.Hour).borrowed().build(), 0, true, ReasonValueAboveCost},
		{"small job of the top class, light backlog", nil,
			job(1).ran(3 * time.Hour).class(10).build(), 0.2, false, ReasonValueNotAboveCost},
		{"no nodes", highFailure, job(1).nodes(0).ran(10 * time.Hour).build(), 1, false, ReasonValueNotAboveCost},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultParams()
			if tc.params != nil {
				tc.params(&p)
			}
			d := Evaluate(p, tc.job, at(tc.pressure))
			if d.Checkpoint != tc.want || d.Reason != tc.reason {
				t.Fatalf("Evaluate = %v (%s), want %v (%s); decision %+v", d.Checkpoint, d.Reason, tc.want, tc.reason, d)
			}
			if d.ID != tc.job.ID {
				t.Errorf("ID = %d, want %d", d.ID, tc.job.ID)
			}
			if d.Checkpoint && !(d.Value > d.Cost) {
				t.Errorf("checkpoint with Value %g <= Cost %g", d.Value, d.Cost)
			}
			checkSums(t, d)
		})
	}
}

// TestEvaluateTerms checks every term against the formulas of docs/checkpoint.md
// worked out by hand.
func TestEvaluateTerms(t *testing.T) {
	p := Params{DefaultCheckpointMinutes: 6, FailureRatePerNodeHour: 0.01, ReclaimRatePerHour: 0.1,
		PreemptRatePerHour: 0.2, PreemptabilityWeight: 0.5, BacklogWeight: 0.1, ComputeWasteFraction: 0.2,
		StorageCostNodeHours: 0.01, MinInterval: time.Hour, MinRunTime: time.Hour}
	e1 := 1 - math.Exp(-1)
	tests := []struct {
		name string
		job  Job
		want Decision
	}{
		{"borrowed: reclaim rate", job(7).nodes(10).ran(4 * time.Hour).checkpointed(2 * time.Hour).
			walltime(14 * time.Hour).borrowed().build(),
			// W = 2h·10 = 20 node-hours; R = 10h; λnR = 1; ρR = 1; w = 0.1h.
			Decision{ID: 7, Checkpoint: true, Reason: ReasonValueAboveCost, WorkAtRisk: 20,
				RecomputeSaved: 20 * e1, Preemptability: 0.5 * 20 * e1, BacklogRelief: 0.1 * 0.5 * 20,
				WriteTime: 1, ComputeWaste: 0.2, StorageCost: 0.1}},
		{"own nodes, class 5: half the preempt rate", job(8).nodes(10).ran(4 * time.Hour).checkpointed(2 * time.Hour).
			walltime(14 * time.Hour).class(5).minutes(12).build(),
			// ρ = 0.2·5/10 = 0.1 per hour; w = 0.2h.
			Decision{ID: 8, Checkpoint: true, Reason: ReasonValueAboveCost, WorkAtRisk: 20,
				RecomputeSaved: 20 * e1, Preemptability: 0.5 * 20 * e1, BacklogRelief: 0.1 * 0.5 * 20,
				WriteTime: 2, ComputeWaste: 0.4, StorageCost: 0.1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Evaluate(p, tc.job, at(0.5))
			if d.ID != tc.want.ID || d.Checkpoint != tc.want.Checkpoint || d.Reason != tc.want.Reason {
				t.Errorf("decision %+v, want %+v", d, tc.want)
			}
			near(t, "WorkAtRisk", d.WorkAtRisk, tc.want.WorkAtRisk)
			near(t, "RecomputeSaved", d.RecomputeSaved, tc.want.RecomputeSaved)
			near(t, "Preemptability", d.Preemptability, tc.want.Preemptability)
			near(t, "BacklogRelief", d.BacklogRelief, tc.want.BacklogRelief)
			near(t, "WriteTime", d.WriteTime, tc.want.WriteTime)
			near(t, "ComputeWaste", d.ComputeWaste, tc.want.ComputeWaste)
			near(t, "StorageCost", d.StorageCost, tc.want.StorageCost)
			checkSums(t, d)
		})
	}
}

// TestEvaluateBacklog checks that backlog pressure raises Value monotonically
// (strictly while work is at risk), leaves Cost alone, and is clamped to 0..1.
func TestEvaluateBacklog(t *testing.T) {
	p := DefaultParams()
	jobs := []struct {
		name string
		job  Job
	}{
		{"small own", job(1).ran(3 * time.Hour).build()},
		{"large borrowed", job(2).nodes(128).ran(5 * time.Hour).borrowed().build()},
		{"checkpointed recently", job(3).nodes(8).ran(5 * time.Hour).checkpointed(20 * time.Minute).build()},
	}
	for _, tc := range jobs {
		t.Run(tc.name, func(t *testing.T) {
			prev := Evaluate(p, tc.job, at(0))
			for i := 1; i <= 10; i++ {
				d := Evaluate(p, tc.job, at(float64(i)/10))
				if !(d.Value > prev.Value) || !(d.BacklogRelief > prev.BacklogRelief) {
					t.Fatalf("pressure %.1f: Value %g (relief %g), not above %g (relief %g) at %.1f",
						float64(i)/10, d.Value, d.BacklogRelief, prev.Value, prev.BacklogRelief, float64(i-1)/10)
				}
				if d.Cost != prev.Cost {
					t.Fatalf("pressure changed Cost: %g -> %g", prev.Cost, d.Cost)
				}
				if prev.Checkpoint && !d.Checkpoint && d.Reason == ReasonValueNotAboveCost {
					t.Fatalf("more pressure turned a checkpoint down at %.1f", float64(i)/10)
				}
				prev = d
			}
			if got, want := Evaluate(p, tc.job, at(5)).Value, Evaluate(p, tc.job, at(1)).Value; got != want {
				t.Errorf("pressure 5: Value %g, want the value at 1, %g", got, want)
			}
			for _, bad := range []float64{-1, math.NaN(), math.Inf(-1)} {
				if got, want := Evaluate(p, tc.job, at(bad)).Value, Evaluate(p, tc.job, at(0)).Value; got != want {
					t.Errorf("pressure %g: Value %g, want the value at 0, %g", bad, got, want)
				}
			}
		})
	}
}

func TestCheckpointWriteTime(t *testing.T) {
	p := DefaultParams()
	tests := []struct {
		name    string
		minutes float64
		want    time.Duration
	}{
		{"unknown", 0, 5 * time.Minute},
		{"estimate", 2.5, 150 * time.Second},
		{"negative", -3, 5 * time.Minute},
		{"NaN", math.NaN(), 5 * time.Minute},
		{"infinite", math.Inf(1), 5 * time.Minute},
		{"longer than a year", 1e12, model.MaxWalltime},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := CheckpointWriteTime(p, job(1).minutes(tc.minutes).build()); got != tc.want {
				t.Errorf("CheckpointWriteTime = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestJobFromAllocation(t *testing.T) {
	start := now.Add(-time.Hour)
	ckpt := now.Add(-10 * time.Minute)
	a := &model.Allocation{ID: 42, Request: model.Request{NodesMin: 2, NodesMax: 4, Walltime: 3 * time.Hour,
		PriorityClass: 7, Checkpoint: model.CheckpointHook, CheckpointMinutes: 1.5},
		State: model.StateRunning, Nodes: []string{"n1", "n2", "n3"}, StartTime: start, LastCheckpointAt: ckpt}
	want := Job{ID: 42, Nodes: 3, Mode: model.CheckpointHook, CheckpointMinutes: 1.5, Start: start,
		LastCheckpoint: ckpt, Walltime: 3 * time.Hour, OnBorrowedNodes: true, PriorityClass: 7}
	if got := JobFromAllocation(a, true); got != want {
		t.Errorf("JobFromAllocation = %+v, want %+v", got, want)
	}
	b := &model.Allocation{ID: 5, Request: model.Request{NodesMin: 2}}
	if got := JobFromAllocation(b, false); got.Nodes != 2 || got.Mode != model.CheckpointNone {
		t.Errorf("no nodes yet, no mode: Nodes %d Mode %q, want 2 and none", got.Nodes, got.Mode)
	}
	if got := JobFromAllocation(nil, true); got != (Job{}) {
		t.Errorf("JobFromAllocation(nil) = %+v, want the zero Job", got)
	}
}

func TestCandidate(t *testing.T) {
	base := func() *model.Allocation {
		return &model.Allocation{ID: 1, Request: model.Request{Checkpoint: model.CheckpointSignal},
			State: model.StateRunning}
	}
	tests := []struct {
		name   string
		change func(*model.Allocation)
		want   bool
	}{
		{"running, signal", func(*model.Allocation) {}, true},
		{"webhook", func(a *model.Allocation) { a.Checkpoint = model.CheckpointWebhook }, true},
		{"not checkpointable", func(a *model.Allocation) { a.Checkpoint = model.CheckpointNone }, false},
		{"already checkpointing", func(a *model.Allocation) { a.State = model.StateCheckpointing }, false},
		{"staging", func(a *model.Allocation) { a.State = model.StateStaging }, false},
		{"being cancelled", func(a *model.Allocation) { a.CancelRequested = true }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := base()
			tc.change(a)
			if got := Candidate(a); got != tc.want {
				t.Errorf("Candidate = %v, want %v", got, tc.want)
			}
		})
	}
	if Candidate(nil) {
		t.Error("Candidate(nil) = true")
	}
}

func TestBacklogPressure(t *testing.T) {
	tests := []struct {
		name            string
		queued, running float64
		want            float64
	}{
		{"empty queue", 0, 100, 0},
		{"half", 50, 100, 0.5},
		{"capped", 300, 100, 1},
		{"nothing runs", 10, 0, 1},
		{"nothing at all", 0, 0, 0},
		{"NaN queue", math.NaN(), 10, 0},
		{"NaN running", 10, math.NaN(), 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := BacklogPressure(tc.queued, tc.running); got != tc.want {
				t.Errorf("BacklogPressure(%g, %g) = %g, want %g", tc.queued, tc.running, got, tc.want)
			}
		})
	}
}
