package solver

import (
	"testing"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/power"
)

// At noon (t0) under a tariff that is cheap from 22:00, flexible work (low
// class, or checkpointable) waits with EnergyPrice; urgent work starts; f7
// follows the schedule; interactive vClusters never wait for a price.
func TestEnergyShiftHoldsFlexibleWork(t *testing.T) {
	prices, err := power.ParseTable("00:00 40, 07:00 140, 22:00 60")
	if err != nil {
		t.Fatal(err)
	}
	urgent := jobN(2, 1).prio(8)
	ckpt := jobN(3, 1).prio(8)
	ckpt.j.Checkpoint = model.CheckpointSignal
	in := input(groups(4), jobN(1, 1), urgent, ckpt)
	sh := power.DefaultShift()
	sh.MaxStretch = 0 // one-hour jobs may wait the whole 12 h
	in.Energy = &Energy{Prices: prices, Shift: sh}
	plan := Solve(in)
	if plan.start(2) == nil {
		t.Fatal("urgent work must start")
	}
	for _, id := range []uint64{1, 3} {
		if plan.start(id) != nil {
			t.Fatalf("flexible job %d started at noon", id)
		}
		if e := explanation(plan, id); e.Reason != model.ReasonEnergyPrice || e.Factors[6] != 0 {
			t.Fatalf("job %d: reason %q f7 %g; want EnergyPrice, 0 (dearest hour)", id, e.Reason, e.Factors[6])
		}
	}
	// Past its deadline (eligible 12 h ago), flexible work runs whatever the price.
	late := input(groups(4), jobN(1, 1).waited(13*60*60*1e9))
	late.Energy = in.Energy
	if Solve(late).start(1) == nil {
		t.Fatal("a job at its deadline must start")
	}
	inter := input(groups(4), jobN(1, 1))
	inter.Type = model.TypeInteractive
	inter.Energy = in.Energy
	if Solve(inter).start(1) == nil {
		t.Fatal("interactive work never waits for a price")
	}
}

func explanation(p *Plan, id uint64) Explanation {
	for _, e := range p.Explanations {
		if e.JobID == id {
			return e
		}
	}
	return Explanation{}
}
