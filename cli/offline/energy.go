package offline

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/replay"
)

// applyReplayEnergy reads the power-model flags into cfg.
func applyReplayEnergy(c *cli.Context, cfg *replay.Config) error {
	if s := c.String("node-watts"); s != "" {
		idle, busy, err := model.ParseWatts(s)
		if err != nil {
			return err
		}
		cfg.IdleWatts, cfg.BusyWatts = idle, busy
	}
	if s := c.String("power-budget-kw"); s != "" {
		w, err := model.ParseKilowatts("power-budget-kw", s)
		if err != nil {
			return err
		}
		cfg.PowerBudgetWatts = w
	}
	path := c.String("energy-prices")
	if path == "" {
		return nil
	}
	sh := replay.DefaultShift()
	sh.MaxDelay, sh.MinSaving = c.Duration("energy-max-delay"), c.Float64("energy-min-saving")
	sh.MaxClass, sh.MaxStretch = c.Int("energy-max-class"), c.Float64("energy-max-stretch")
	if sh.MaxDelay == 0 {
		sh.MinSaving = max(sh.MinSaving, 0.01) // off: nothing to validate
	}
	e, err := replay.LoadEnergy(path, sh)
	if err != nil {
		return err
	}
	cfg.Energy = e
	return nil
}

// replayEnergyRows are the table's rows of a replay with a power model.
var replayEnergyRows = []struct {
	label string
	value func(e *replay.EnergyMetrics) string
}{
	{"peak draw (kW)", func(e *replay.EnergyMetrics) string { return fmtF(e.PeakWatts/1000, 1) }},
	{"energy (MWh)", func(e *replay.EnergyMetrics) string { return fmtF(e.EnergyKWh/1000, 2) }},
	{"energy cost", func(e *replay.EnergyMetrics) string { return fmtF(e.Cost, 0) }},
	{"node-hours in cheap hours", func(e *replay.EnergyMetrics) string { return fmtF(e.CheapShare, 3) }},
	{"flexible node-hours in cheap hours", func(e *replay.EnergyMetrics) string { return fmtF(e.FlexibleCheapShare, 3) }},
	{"jobs held for energy", func(e *replay.EnergyMetrics) string { return fmt.Sprint(e.Deferred) }},
}

// replayEnergyWidth is the width of the energy rows' labels (0 without them).
func replayEnergyWidth(ms []replay.Metrics) int {
	w := 0
	for _, m := range ms {
		if m.Energy != nil {
			for _, r := range replayEnergyRows {
				w = max(w, len(r.label))
			}
		}
	}
	return w
}

// replayEnergyTable appends the energy rows (policies side by side) when
// any replay has a power model.
func replayEnergyTable(w io.Writer, ms []replay.Metrics, width int) {
	any := false
	for _, m := range ms {
		any = any || m.Energy != nil
	}
	if !any {
		return
	}
	for _, r := range replayEnergyRows {
		fmt.Fprintf(w, "%-*s\t", width, r.label)
		for _, m := range ms {
			v := "-"
			if m.Energy != nil {
				v = r.value(m.Energy)
			}
			fmt.Fprintf(w, "%s\t", v)
		}
		fmt.Fprintln(w)
	}
}
