package replay

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/power"
	"github.com/latticehpc/lattice/predict"
	"github.com/latticehpc/lattice/solver"
	"github.com/latticehpc/lattice/vcluster"
)

// Epoch is the wall-clock time of virtual time 0 in the lattice policy's
// snapshots (the solver sees times, not offsets).
var Epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// latticePolicy runs production's scheduling logic: it keeps a simulated
// committed state (model nodes, allocations, tenants), and for each vCluster
// at each decision builds a vcluster.Snapshot, turns it into the solver's
// input with vcluster.BuildInput — the very step the production loop takes —
// and applies the Starts of solver.Solve's plan.
type latticePolicy struct {
	vcs     []*model.VCluster
	lenders map[string]bool
	nodes   []*model.Node
	nodeIdx map[string]int32
	allocs  map[uint64]*model.Allocation
	tenants map[string]*model.Tenant
	load    map[string]vcluster.TenantLoad
	groups  int
	// byName lists the tenants sorted by name (Snapshot.TenantsByName).
	byName []*model.Tenant
	// build and solve keep their memory from one decision to the next.
	build   vcluster.Builder
	easy    vcluster.EasyStarts // the relative starvation guard's memory
	solve   solver.Solver
	pending []*model.Allocation // scratch
	// mark[n] == stamp when node n is already given to the start being
	// checked.
	mark  []uint32
	stamp uint32
	// hist learns runtimes as jobs end (nil: plan with walltimes).
	hist *predict.History
	// svc learns the tenants' bounded slowdowns as jobs end, by pool (as
	// each live loop learns its vCluster's); nil: the pools' settings do
	// not read it.
	svc []*predict.Service
}

// observeDecision, when set (by tests), sees every decision's solver input
// (with the reservations' nodes named, which the replay otherwise omits)
// and plan.
var observeDecision func(*solver.Input, *solver.Plan)

// nodeName is the name of node i; names sort like indexes.
func nodeName(i int) string { return fmt.Sprintf("n%07d", i) }

func newLattice(s *sim) (*latticePolicy, error) {
	lp := &latticePolicy{
		lenders: map[string]bool{},
		nodeIdx: make(map[string]int32, len(s.nodeJob)),
		mark:    make([]uint32, len(s.nodeJob)),
		allocs:  map[uint64]*model.Allocation{},
		tenants: map[string]*model.Tenant{},
		load:    map[string]vcluster.TenantLoad{},
		groups:  s.groups,
	}
	switch s.cfg.Predictor {
	case "", predict.ModelLattice:
		lp.hist = predict.NewHistory(predict.ModelLattice)
	case PredictorOff:
	default:
		return nil, fmt.Errorf("replay: predictor %q: allowed %s, %s", s.cfg.Predictor, predict.ModelLattice, PredictorOff)
	}
	for _, p := range s.pools {
		spec := p.spec
		vc := &model.VCluster{
			Name: spec.Name, Type: spec.Type, WeightsProfile: spec.WeightsProfile,
			ReservationDepth: model.DefaultReservationDepth,
			AllowLending:     spec.AllowLending, AllowBorrowing: spec.AllowBorrowing,
		}
		if vc.Type == "" {
			vc.Type = model.TypeHPCBatch
		}
		switch {
		case s.cfg.WeightsProfile != "":
			vc.WeightsProfile = s.cfg.WeightsProfile
		case vc.WeightsProfile == "" && len(s.tr.VClusters) > 0:
			// A declared vCluster weighs like production: by its type.
			vc.WeightsProfile = solver.ProfileForType(vc.Type)
		}
		w, err := ProfileWeights(vc.WeightsProfile)
		if err != nil {
			return nil, err
		}
		for i, v := range s.cfg.Weights {
			if i < 0 || i >= model.NumFactors || v < 0 || v > 1 {
				return nil, fmt.Errorf("replay: weight w%d=%g: allowed w1..w9 between 0 and 1", i+1, v)
			}
			w[i] = v
		}
		if len(s.cfg.Weights) > 0 {
			// As vcluster set: weights set one by one are normalised to
			// sum to 1 (NormaliseWeights), refused when they sum to 0.
			if w, _, err = NormaliseWeights(w); err != nil {
				return nil, err
			}
		}
		vc.Weights = w
		switch {
		case s.cfg.ReservationDepth != 0:
			vc.ReservationDepth = s.cfg.ReservationDepth
		case spec.ReservationDepth != 0:
			vc.ReservationDepth = spec.ReservationDepth
		}
		if vc.ReservationDepth == ReservationsNone {
			vc.ReservationDepth = 0
		}
		if vc.ReservationDepth < model.ReservationsAll {
			return nil, fmt.Errorf("replay: reservation depth %d: allowed N >= 1 or all", vc.ReservationDepth)
		}
		vc.FairShare, vc.ServiceProtect = s.cfg.FairShare, s.cfg.ServiceProtect
		vc.RunningEnds, vc.PredictedStarts = s.cfg.RunningEnds, s.cfg.PredictedStarts
		if _, _, need := vcluster.ServiceSettings(vc); need {
			if lp.svc == nil {
				lp.svc = make([]*predict.Service, len(s.pools))
			}
			lp.svc[len(lp.vcs)] = &predict.Service{HalfLife: vcluster.DefaultFairShareHalfLife}
		}
		lp.vcs = append(lp.vcs, vc)
		if vc.AllowLending {
			lp.lenders[vc.Name] = true
		}
		for n := p.lo; n < p.hi; n++ {
			node := &model.Node{
				Name: nodeName(n), HomeVCluster: vc.Name, CurrentVCluster: vc.Name,
				Group: n / s.groupSize, Fingerprint: "replay", State: model.NodeReady,
			}
			if s.energy != nil {
				node.IdleWatts, node.BusyWatts = s.energy.idle, s.energy.busy
			}
			lp.nodes = append(lp.nodes, node)
			lp.nodeIdx[node.Name] = int32(n)
		}
	}
	// Tenants: the trace's contracts; without any, every tenant of the trace
	// gets an equal fair-share target.
	for _, t := range s.tr.Tenants {
		lp.tenants[t.Name] = &model.Tenant{Name: t.Name, FairShareTarget: t.FairShareTarget, MaxNodes: t.MaxNodes, MaxRunning: t.MaxRunning}
	}
	if len(s.tr.Tenants) == 0 {
		var names []string
		seen := map[string]bool{}
		for _, j := range s.tr.Jobs {
			if !seen[j.Tenant] {
				seen[j.Tenant] = true
				names = append(names, j.Tenant)
			}
		}
		for _, n := range names {
			lp.tenants[n] = &model.Tenant{Name: n, FairShareTarget: 1 / float64(len(names))}
		}
	}
	for _, t := range lp.tenants {
		lp.byName = append(lp.byName, t)
	}
	slices.SortFunc(lp.byName, func(a, b *model.Tenant) int { return strings.Compare(a.Name, b.Name) })
	return lp, nil
}

// alloc returns job j's allocation, creating it when the job is first seen.
func (lp *latticePolicy) alloc(s *sim, j int32) *model.Allocation {
	id := uint64(j) + 1
	if a := lp.allocs[id]; a != nil {
		return a
	}
	job := &s.tr.Jobs[j]
	r := &s.jobs[j]
	a := &model.Allocation{
		ID: id,
		Request: model.Request{
			Name: strconv.FormatUint(job.ID, 10), Tenant: job.Tenant, VCluster: lp.vcs[r.pool].Name,
			NodesMin: job.Size, NodesMax: job.Size, Walltime: job.Estimate,
			PriorityClass: job.PriorityClass, Checkpoint: job.Checkpoint, CheckpointMinutes: job.CheckpointMinutes,
		},
		State:        model.StatePending,
		SubmitTime:   Epoch.Add(job.Submit),
		EligibleTime: Epoch.Add(r.eligible),
	}
	if a.Checkpoint == "" {
		a.Checkpoint = model.CheckpointNone
	}
	lp.allocs[id] = a
	return a
}

func (lp *latticePolicy) schedule(s *sim, p int) error {
	pl := &s.pools[p]
	vc := lp.vcs[p]
	lp.pending = lp.pending[:0]
	for _, j := range pl.queue {
		lp.pending = append(lp.pending, lp.alloc(s, j))
	}
	now := Epoch.Add(s.now)
	snap := vcluster.Snapshot{
		Now:                now,
		VCluster:           vc,
		Lenders:            lp.lenders,
		Nodes:              lp.nodes,
		Allocations:        lp.allocs,
		Pending:            lp.pending,
		Tenants:            lp.tenants,
		TenantLoad:         lp.load,
		TenantsByName:      lp.byName,
		Groups:             lp.groups,
		PowerHeadroomWatts: -1,
		EnergyPrice:        -1,
		Predictor:          lp.hist,
		Corrector:          s.cfg.Corrector,
		// Only the starts are read; a test observing whole plans
		// (observeDecision: the decision digests) gets them named.
		OmitReservationNodes: observeDecision == nil,
		StarvationWait:       s.cfg.StarvationWait,
		StarvationFactor:     s.cfg.StarvationFactor,
		JobStarvationFactor:  s.cfg.JobStarvationFactor,
		UserGuardFactor:      s.cfg.UserGuardFactor,
		EasyStarts:           &lp.easy,
	}
	if lp.svc != nil {
		snap.Service = lp.svc[p]
	}
	if es := s.energy; es != nil {
		snap.PowerHeadroomWatts = power.Headroom(es.budget, es.draw(s.tr.Capacity, s.busy))
		snap.Energy = es.e
	}
	// Production's BuildInput and Solve, keeping their memory: the input
	// and the plan live until the next decision.
	in := lp.build.Build(&snap)
	plan := lp.solve.Solve(&in)
	if observeDecision != nil {
		observeDecision(&in, plan)
	}
	if s.energy != nil && s.energy.e != nil {
		for i := range plan.Explanations {
			if plan.Explanations[i].Reason == model.ReasonEnergyPrice {
				if s.energy.deferredSet == nil {
					s.energy.deferredSet = map[int32]bool{}
				}
				s.energy.deferredSet[int32(plan.Explanations[i].JobID-1)] = true
			}
		}
	}
	for _, st := range plan.Starts {
		j := int(st.JobID) - 1
		if j < 0 || j >= len(s.jobs) || !s.jobs[j].queued || s.jobs[j].started || int(s.jobs[j].pool) != p {
			return fmt.Errorf("replay: lattice: the solver started allocation %d, which is not pending in vCluster %s", st.JobID, vc.Name)
		}
		job := &s.tr.Jobs[j]
		if len(st.Nodes) != job.Size {
			return fmt.Errorf("replay: lattice: the solver gave allocation %d %d nodes, it asked for %d", st.JobID, len(st.Nodes), job.Size)
		}
		idx := make([]int32, 0, len(st.Nodes))
		lp.stamp++
		if lp.stamp == 0 { // wrapped: forget every old mark
			clear(lp.mark)
			lp.stamp = 1
		}
		for _, name := range st.Nodes {
			n, ok := lp.nodeIdx[name]
			if !ok || s.nodeJob[n] >= 0 || lp.mark[n] == lp.stamp {
				return fmt.Errorf("replay: lattice: the solver placed allocation %d on node %s, which is unknown, busy or given twice", st.JobID, name)
			}
			lp.mark[n] = lp.stamp
			idx = append(idx, n)
		}
		s.start(j, idx)
		a := lp.alloc(s, int32(j))
		a.State = model.StateRunning
		a.StartTime = now
		a.Nodes = slices.Clone(st.Nodes) // the plan is read-only and may share arrays
		for _, n := range idx {
			node := lp.nodes[n]
			node.Allocation = a.ID
			node.CurrentVCluster = vc.Name
		}
		l := lp.load[job.Tenant]
		l.Nodes += job.Size
		l.Running++
		lp.load[job.Tenant] = l
	}
	return nil
}

func (lp *latticePolicy) predicted(s *sim, j int) time.Duration {
	if lp.hist == nil {
		return 0
	}
	job := &s.tr.Jobs[j]
	return lp.hist.Predict(job.Tenant, "", job.Estimate)
}

// finished frees the job's nodes (borrowed ones go back home), charges its
// usage to its tenant and forgets the allocation.
func (lp *latticePolicy) finished(s *sim, j int) {
	id := uint64(j) + 1
	job := &s.tr.Jobs[j]
	for _, n := range s.jobs[j].nodes {
		node := lp.nodes[n]
		node.Allocation = 0
		node.CurrentVCluster = node.HomeVCluster
	}
	if lp.svc != nil {
		// Production's observation of a completed allocation.
		if a := lp.allocs[id]; a != nil {
			a.State, a.EndTime = model.StateCompleted, Epoch.Add(s.now)
			vcluster.ObserveCompleted(lp.svc[s.jobs[j].pool], a)
		}
	}
	delete(lp.allocs, id)
	if lp.hist != nil {
		// SWF jobs have no name: the tenant (the SWF user) predicts.
		lp.hist.Observe(job.Tenant, "", job.Runtime, job.Estimate)
	}
	now := Epoch.Add(s.now)
	if t := lp.tenants[job.Tenant]; t != nil {
		t.Usage = vcluster.DecayedUsage(t, now, vcluster.DefaultFairShareHalfLife) + float64(job.Size)*job.Runtime.Seconds()
		t.UsageTime = now
	}
	l := lp.load[job.Tenant]
	l.Nodes -= job.Size
	l.Running--
	lp.load[job.Tenant] = l
}
