package checkpoint

import (
	"math"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

// now is the clock value of every test.
var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// jobBuilder builds a running Job relative to now: by default a signal-mode
// job of id 1 on 1 own node with a 24h walltime that started 2h ago and
// never checkpointed, class 0, no checkpoint estimate.
type jobBuilder struct{ j Job }

func job(id uint64) *jobBuilder {
	return &jobBuilder{Job{ID: id, Nodes: 1, Mode: model.CheckpointSignal,
		Start: now.Add(-2 * time.Hour), Walltime: 24 * time.Hour}}
}

func (b *jobBuilder) nodes(n int) *jobBuilder { b.j.Nodes = n; return b }
func (b *jobBuilder) mode(m model.CheckpointMode) *jobBuilder {
	b.j.Mode = m
	return b
}

// ran sets the start so that the job has run d by now.
func (b *jobBuilder) ran(d time.Duration) *jobBuilder { b.j.Start = now.Add(-d); return b }

// checkpointed sets the last checkpoint d before now.
func (b *jobBuilder) checkpointed(d time.Duration) *jobBuilder {
	b.j.LastCheckpoint = now.Add(-d)
	return b
}
func (b *jobBuilder) walltime(d time.Duration) *jobBuilder { b.j.Walltime = d; return b }
func (b *jobBuilder) minutes(m float64) *jobBuilder        { b.j.CheckpointMinutes = m; return b }
func (b *jobBuilder) borrowed() *jobBuilder                { b.j.OnBorrowedNodes = true; return b }
func (b *jobBuilder) class(c int) *jobBuilder              { b.j.PriorityClass = c; return b }
func (b *jobBuilder) notStarted() *jobBuilder              { b.j.Start = time.Time{}; return b }
func (b *jobBuilder) build() Job                           { return b.j }

// at is a Situation at now with the given backlog pressure.
func at(pressure float64) Situation { return Situation{Now: now, BacklogPressure: pressure} }

// near fails t unless got is within 1e-9 (relative) of want.
func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9*max(1, math.Abs(want)) {
		t.Errorf("%s = %.12g, want %.12g", what, got, want)
	}
}

// checkSums fails t unless d's Value and Cost are the sums of their parts.
func checkSums(t *testing.T, d Decision) {
	t.Helper()
	near(t, "Value", d.Value, d.RecomputeSaved+d.Preemptability+d.BacklogRelief)
	near(t, "Cost", d.Cost, d.WriteTime+d.ComputeWaste+d.StorageCost)
}
