package vcluster

import (
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/predict"
)

// The fair share of service's memory (Snapshot.Service) is learnt from
// completed allocations the same way in the replay and in the live loop:
// each completion is observed once, in the order of its end, by
// ObserveCompleted — its tenant, its end, its wait (from its eligible time,
// else its submission, to its start) and its run. predict.Service keeps a
// decayed mean per tenant and one over everyone (each run weighted
// 2^(−age/half-life), DefaultFairShareHalfLife like the usage), so its memory
// is O(tenants) whatever the number of runs, and it is pure and
// deterministic: the same completions in the same order give the same bits.
//
// The replay feeds it as its jobs end. The live loop reads the recent
// completions of its vCluster from the committed state (CompletedReader: the
// last 5,000, oldest first) and keeps a ServiceMemory that observes every
// completion the first time a window shows it; a loop that starts (a new
// leader) learns from the window it first reads. Only COMPLETED allocations
// count (a failed or cancelled run says nothing about the service the tenant
// got), and service is derived state: never committed.

// ObserveCompleted records completed allocation a in svc: its tenant's run
// that ended at a.EndTime after waiting from its eligible time (else its
// submission) to its start. It ignores a when it is not COMPLETED with a
// start and an end.
func ObserveCompleted(svc *predict.Service, a *model.Allocation) {
	if svc == nil || !serviceRun(a) {
		return
	}
	elig := a.EligibleTime
	if elig.IsZero() {
		elig = a.SubmitTime
	}
	svc.Observe(a.Tenant, a.EndTime, a.StartTime.Sub(elig), a.EndTime.Sub(a.StartTime))
}

// serviceRun tells whether a says what service its tenant got.
func serviceRun(a *model.Allocation) bool {
	return a != nil && a.State == model.StateCompleted && !a.StartTime.IsZero() && !a.EndTime.Before(a.StartTime)
}

// LearnService returns the fair share of service learnt from the completed
// allocations done, given oldest first (as CompletedReader gives them), with
// the default half-life.
func LearnService(done []*model.Allocation) *predict.Service {
	svc := &predict.Service{HalfLife: DefaultFairShareHalfLife}
	for _, a := range done {
		ObserveCompleted(svc, a)
	}
	return svc
}

// ServiceMemory is the live loop's fair share of service: a predict.Service
// fed each completion once, as successive windows of recent completions show
// them (Update). It keeps the IDs of the last window (at most its length),
// so its memory is bounded by the window and the tenants. The zero value is
// ready to use; it is not safe for concurrent use.
type ServiceMemory struct {
	svc  *predict.Service
	from []*model.Allocation // the window last read
	seen map[uint64]bool     // the IDs of from
}

// Update observes the completions of done (oldest first) that the last
// window did not hold, in their order, and returns the memory. The same
// window as last time (the same slice) costs nothing.
func (m *ServiceMemory) Update(done []*model.Allocation) *predict.Service {
	if m.svc == nil {
		m.svc = &predict.Service{HalfLife: DefaultFairShareHalfLife}
	}
	if len(done) == len(m.from) && (len(done) == 0 || &done[0] == &m.from[0]) {
		return m.svc
	}
	seen := make(map[uint64]bool, len(done))
	for _, a := range done {
		if a == nil {
			continue
		}
		seen[a.ID] = true
		if !m.seen[a.ID] {
			ObserveCompleted(m.svc, a)
		}
	}
	m.from, m.seen = done, seen
	return m.svc
}
