package replay

import (
	"fmt"
	"os"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/power"
	"github.com/latticehpc/lattice/solver"
)

// Power model defaults of a replay with a price schedule or a budget.
const (
	DefaultIdleWatts = 100
	DefaultBusyWatts = 400
)

// EnergyMetrics is what a replay with a power model reports: the peak
// estimated draw, the energy and its cost under the price schedule, and how
// much of the work ran in cheap hours (a normalised price below one half).
type EnergyMetrics struct {
	PeakWatts   float64 `json:"peak_watts"`
	BudgetWatts float64 `json:"budget_watts"`
	EnergyKWh   float64 `json:"energy_kwh"`
	// Cost is Σ draw·price over time, in the schedule's currency when its
	// prices are per MWh (0 without a schedule).
	Cost float64 `json:"energy_cost"`
	// NodeHours and CheapShare: busy node-hours and the share of them run
	// in cheap hours; Flexible*: the same for flexible work (checkpointable
	// or of a low priority class, power.Shift.Flexible).
	NodeHours          float64 `json:"node_hours"`
	CheapShare         float64 `json:"cheap_node_hours_share"`
	FlexibleNodeHours  float64 `json:"flexible_node_hours"`
	FlexibleCheapShare float64 `json:"flexible_cheap_share"`
	// Deferred counts jobs the energy rule held at least once.
	Deferred int `json:"energy_deferred_jobs"`
}

// LoadEnergy reads a price schedule file (power.Parse: a daily or weekly
// table, or a CSV of timestamped prices) for a replay; shift is the rule
// for flexible work (validated).
func LoadEnergy(path string, shift power.Shift) (*solver.Energy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &model.FieldError{Field: "energy-prices", Value: path, Allowed: "a readable price schedule file (daily/weekly table or CSV TIME,PRICE)"}
	}
	s, err := power.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := shift.Validate(); err != nil {
		return nil, err
	}
	return &solver.Energy{Prices: s, Shift: shift}, nil
}

// energyState is the power model of one simulation.
type energyState struct {
	e           *solver.Energy // prices rebased on Epoch; nil = no schedule
	idle, busy  int
	budget      int64
	m           EnergyMetrics
	cheapFlex   float64
	cheapAll    float64
	deferredSet map[int32]bool
}

func newEnergyState(cfg *Config, capacity int) (*energyState, error) {
	if cfg.Energy == nil && cfg.PowerBudgetWatts == 0 && cfg.IdleWatts == 0 && cfg.BusyWatts == 0 {
		return nil, nil
	}
	es := &energyState{idle: cfg.IdleWatts, busy: cfg.BusyWatts, budget: cfg.PowerBudgetWatts}
	if es.idle == 0 && es.busy == 0 {
		es.idle, es.busy = DefaultIdleWatts, DefaultBusyWatts
	}
	if es.idle < 0 || es.busy < es.idle {
		return nil, fmt.Errorf("replay: node watts %d:%d: allowed IDLE:BUSY with 0 <= IDLE <= BUSY", es.idle, es.busy)
	}
	if es.budget < 0 {
		return nil, fmt.Errorf("replay: power budget %d W: allowed >= 0 (0 = none)", es.budget)
	}
	if min := int64(es.idle)*int64(capacity) + int64(es.busy-es.idle); es.budget > 0 && es.budget < min {
		return nil, fmt.Errorf("replay: power budget %d W: allowed 0 (none) or at least %d W (every node idle and one busy)", es.budget, min)
	}
	if cfg.Energy != nil {
		if cfg.Energy.Prices == nil {
			return nil, fmt.Errorf("replay: an energy setting without a price schedule")
		}
		if err := cfg.Energy.Shift.Validate(); err != nil && cfg.Energy.Shift.MaxDelay != 0 {
			return nil, err
		}
		es.e = &solver.Energy{Prices: cfg.Energy.Prices.Rebase(Epoch), Shift: cfg.Energy.Shift}
	}
	es.m.BudgetWatts = float64(es.budget)
	return es, nil
}

func (es *energyState) draw(capacity, busy int) int64 {
	return int64(es.idle)*int64(capacity) + int64(es.busy-es.idle)*int64(busy)
}

// advance accounts for [from, to) with busy nodes busy.
func (es *energyState) advance(from, to time.Duration, capacity, busy int) {
	if to <= from {
		return
	}
	w := float64(es.draw(capacity, busy))
	es.m.EnergyKWh += w * (to - from).Hours() / 1000
	if es.e != nil {
		es.m.Cost += w * es.e.Prices.PriceSeconds(Epoch.Add(from), Epoch.Add(to)) / 3.6e9
	}
}

// observe records the draw after a scheduling pass.
func (es *energyState) observe(capacity, busy int) {
	es.m.PeakWatts = max(es.m.PeakWatts, float64(es.draw(capacity, busy)))
}

// started accounts a job's node-hours, and those in cheap hours.
func (es *energyState) started(job *Job, start time.Duration) {
	nh := float64(job.Size) * job.Runtime.Hours()
	es.m.NodeHours += nh
	flexible := es.e != nil && es.e.Shift.Flexible(job.PriorityClass, job.Checkpoint)
	if flexible {
		es.m.FlexibleNodeHours += nh
	}
	if es.e == nil {
		return
	}
	cheap := float64(job.Size) * es.e.Prices.CheapSeconds(Epoch.Add(start), Epoch.Add(start+job.Runtime)) / 3600
	es.cheapAll += cheap
	if flexible {
		es.cheapFlex += cheap
	}
}

func (es *energyState) metrics() *EnergyMetrics {
	m := es.m
	if m.NodeHours > 0 {
		m.CheapShare = es.cheapAll / m.NodeHours
	}
	if m.FlexibleNodeHours > 0 {
		m.FlexibleCheapShare = es.cheapFlex / m.FlexibleNodeHours
	}
	m.Deferred = len(es.deferredSet)
	return &m
}

// wake is the next time the energy rule may let held work start: the next
// price change or the earliest deadline of queued flexible work, whichever
// comes first (-1 = none).
func (s *sim) energyWake() time.Duration {
	es := s.energy
	if es == nil || es.e == nil || s.cfg.Policy != PolicyLattice || s.queued() == 0 {
		return -1
	}
	wake := es.e.Prices.NextChange(Epoch.Add(s.now)).Sub(Epoch)
	for p := range s.pools {
		for _, j := range s.pools[p].queue {
			job := &s.tr.Jobs[j]
			if !es.e.Shift.Flexible(job.PriorityClass, job.Checkpoint) {
				continue
			}
			if dl := s.jobs[j].eligible + es.e.Shift.Delay(job.Estimate); dl > s.now && dl < wake {
				wake = dl
			}
		}
	}
	return wake
}

// DefaultShift is power.DefaultShift, for callers that set the rule's
// fields without naming the power package.
func DefaultShift() power.Shift { return power.DefaultShift() }
