package replay

import (
	"path/filepath"
	"testing"

	"github.com/latticehpc/lattice/power"
)

// TestEnergyShift replays the HPC2N trace (240 nodes, 100/400 W per node,
// an 80 kW budget) with the lattice policy, without and with a daily
// time-of-use tariff: with the tariff, flexible work runs a measurably
// larger share of its node-hours in cheap hours, energy costs less, the
// peak draw stays within the budget, and the cost in bounded slowdown is
// reported.
func TestEnergyShift(t *testing.T) {
	tr, err := ReadFile(filepath.Join("testdata", "hpc2n.swf"), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if testing.Short() {
		tr = tr.First(1000)
	}
	energy, err := LoadEnergy(filepath.Join("testdata", "tou-daily.txt"), power.DefaultShift())
	if err != nil {
		t.Fatal(err)
	}
	const budget = 80000
	base := Config{Policy: PolicyLattice, PowerBudgetWatts: budget}
	// Price the run without shifting with the same tariff: the rule off.
	flat := base
	off := *energy
	off.Shift.MaxDelay = 0
	flat.Energy = &off
	shifted := base
	shifted.Energy = energy

	a, err := Run(tr, flat)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(tr, shifted)
	if err != nil {
		t.Fatal(err)
	}
	ea, eb := a.Energy, b.Energy
	for name, m := range map[string]*EnergyMetrics{"without shifting": ea, "with shifting": eb} {
		if m.PeakWatts > budget {
			t.Errorf("%s: peak draw %.0f W above the budget %d W", name, m.PeakWatts, budget)
		}
	}
	t.Logf("jobs %d; flexible node-hours in cheap hours %.1f%% -> %.1f%% (all work %.1f%% -> %.1f%%); energy cost %.0f -> %.0f (%.1f%%); "+
		"%d jobs held; peak %.1f / %.1f kW (budget %d kW); avg bounded slowdown %.2f -> %.2f; avg wait %.0f s -> %.0f s",
		len(tr.Jobs), 100*ea.FlexibleCheapShare, 100*eb.FlexibleCheapShare, 100*ea.CheapShare, 100*eb.CheapShare,
		ea.Cost, eb.Cost, 100*(eb.Cost-ea.Cost)/ea.Cost, eb.Deferred, ea.PeakWatts/1000, eb.PeakWatts/1000, budget/1000,
		a.AvgBoundedSlowdown, b.AvgBoundedSlowdown, a.AvgWait, b.AvgWait)
	if eb.FlexibleCheapShare < ea.FlexibleCheapShare+0.03 {
		t.Errorf("flexible work in cheap hours %.3f -> %.3f: want at least 3 points more", ea.FlexibleCheapShare, eb.FlexibleCheapShare)
	}
	if eb.Cost >= ea.Cost {
		t.Errorf("energy cost %.0f -> %.0f: shifting must save", ea.Cost, eb.Cost)
	}
	if eb.Deferred == 0 || ea.Deferred != 0 {
		t.Errorf("held jobs: %d without the rule, %d with it", ea.Deferred, eb.Deferred)
	}
	if b.Jobs != len(tr.Jobs) {
		t.Errorf("%d of %d jobs ran", b.Jobs, len(tr.Jobs))
	}
}
