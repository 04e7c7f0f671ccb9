package vcluster

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/predict"
	"github.com/latticehpc/lattice/solver"
)

// ReasonArrayTaskLimit holds an array task back while its array runs as many
// tasks as its %MAX allows (Slurm's JobArrayTaskLimit).
const ReasonArrayTaskLimit = "JobArrayTaskLimit"

// DefaultFairShareHalfLife is the half-life of decayed tenant usage (f3).
const DefaultFairShareHalfLife = 7 * 24 * time.Hour

// TenantLoad is what a tenant runs right now (the quorum keeps it as an index).
type TenantLoad struct {
	Nodes   int
	Running int
}

// Snapshot is the committed state one cycle of one vCluster reads. The
// production loop fills it from the quorum under a read lock; the replay
// simulator fills it from its simulated state. Both then call BuildInput, so
// both run the very same scheduling logic.
type Snapshot struct {
	Now      time.Time
	VCluster *model.VCluster
	// VClusters holds every vCluster by name: their lending policy (Lends,
	// MaxLendable, Backoff) decides which of their idle nodes this one may
	// borrow. When it is nil, Lenders is used instead (the replay).
	VClusters map[string]*model.VCluster
	// Lenders holds the names of vClusters whose idle nodes may be borrowed,
	// with no lending limit and the default back-off; read only when
	// VClusters is nil.
	Lenders map[string]bool
	// LendLimits holds, by home vCluster and node name, when the home's own
	// plan reserves an idle node (its Board entry): a borrowed job must end
	// by then. Missing = no limit. The loop fills it from its Board.
	LendLimits map[string]map[string]time.Time
	// Nodes is every node in the system, in a stable order (by name).
	Nodes []*model.Node
	// Allocations maps id to every non-terminal allocation (at least: the
	// ones on Nodes and the pending ones of this vCluster).
	Allocations map[uint64]*model.Allocation
	// Pending lists this vCluster's pending allocations in id order.
	Pending []*model.Allocation
	// Tenants by name; TenantLoad by name (missing = nothing running).
	Tenants    map[string]*model.Tenant
	TenantLoad map[string]TenantLoad
	// TenantsByName, when set, holds the values of Tenants sorted by name
	// (a tenant's Name is its key in Tenants), so that a cycle need neither
	// sort nor look them up (the replay keeps it). Optional: when its length
	// differs from Tenants' or its names are not strictly ascending, it is
	// ignored.
	TenantsByName []*model.Tenant
	// Groups is the number of dragonfly groups in the system.
	Groups int
	// PowerHeadroomWatts: < 0 = unlimited.
	PowerHeadroomWatts int64
	// EnergyPrice normalised to [0,1] at Now; < 0 = unknown.
	EnergyPrice float64
	// Energy is the price schedule and shifting rule; nil = none.
	Energy *solver.Energy
	// FairShareHalfLife decays tenant usage; 0 = DefaultFairShareHalfLife.
	FairShareHalfLife time.Duration
	// Completed lists recently completed allocations of this vCluster
	// (terminal, with StartTime and EndTime), when the state reader keeps
	// them: the runtime predictor learns from them (see Predictor). Only
	// COMPLETED ones count; order does not matter.
	Completed []*model.Allocation
	// Predictor predicts runtimes for backfilling and reservations (never to
	// end a job). nil = learn one from Completed (none when it is empty:
	// then every job is planned with its walltime). The replay keeps its
	// own, fed as jobs end. Prediction is derived state, never committed.
	Predictor *predict.History
	// QOS holds the site's QOS table by name: a victim's QOS may set its
	// preemption mode (model.VictimAction). nil = no QOS sets one.
	QOS map[string]*model.QOS
	// Corrector is how a running allocation that outlives its prediction
	// is planned from then on: predict.CorrectTsafrir (step by step) or
	// predict.CorrectReqtime (its walltime); "" = DefaultCorrector.
	Corrector string
	// OmitReservationNodes is solver.Input's: the plan's reservations
	// name no nodes (the replay, which reads only the starts).
	OmitReservationNodes bool
	// StarvationWait: while a pending job has waited longer, running work
	// is planned with its walltimes, not its predictions (the starvation
	// guard). 0 = DefaultStarvationWait, < 0 = never.
	StarvationWait time.Duration
	// StarvationFactor is the relative starvation guard: once the head of
	// the queue has waited longer than this factor × the wait EASY's
	// reservation gave it when it became the head (walltime release
	// times), running work is planned with its walltimes until it starts.
	// 0 = DefaultStarvationFactor, < 0 = off. It needs EasyStarts.
	StarvationFactor float64
	// JobStarvationFactor is the per-job starvation guard: every pending
	// job gets a bound when the guard first sees it — the start
	// conservative backfilling would promise it then, with walltimes —
	// and once it has waited longer than this factor × that wait it is
	// protected (solver.Job.Protected: a reservation before the others are
	// decided) and running work is planned with walltimes. 0 = off (the
	// default: measured, it trades bounded slowdown for max wait; see
	// docs/solver.md), else at least 1. It needs EasyStarts.
	JobStarvationFactor float64
	// UserGuardFactor is the per-user guard (EasyStarts.protect): a tenant
	// whose jobs have recently started later than the bounds conservative
	// backfilling promised them on arrival has its jobs protected once
	// they have waited this factor × their bound's wait. 0 =
	// DefaultUserGuardFactor, < 0 = off. It needs EasyStarts, and plans
	// with a predictor (without one the queue is first come, first served).
	UserGuardFactor float64
	// EasyStarts is the relative guard's memory, kept by the caller from
	// one cycle to the next; nil = the relative guard is off (so the same
	// snapshot always gives the same input).
	EasyStarts *EasyStarts
	// Service is the fair share of service's memory: the tenants' recent
	// average bounded slowdowns over this vCluster's completed jobs
	// (predict.Service, fed by ObserveCompleted), read when the vCluster's
	// FairShare is service or job-service, or its ServiceProtect is on
	// (ServiceSettings). nil = learnt from Completed (LearnService); the
	// loop keeps its own from one cycle to the next (ServiceMemory), the
	// replay its own, fed as jobs end.
	Service *predict.Service
	// Reservations are the node reservations (model.Reservation); those
	// over by Now are ignored. The replay has none.
	Reservations []*model.Reservation
}

// ServiceSettings is how vc's settings read the fair share of service: the
// term f3 reads (model.VCluster.FairShare), whether jobs are protected
// (model.VCluster.ServiceProtect), and whether a Service memory is needed
// at all.
func ServiceSettings(vc *model.VCluster) (term ServiceTerm, protect, needed bool) {
	switch vc.EffectiveFairShare() {
	case model.FairShareService:
		term = ServiceByTenant
	case model.FairShareJobService:
		term = ServiceByJob
	default:
		term = ServiceNoTerm
	}
	protect = vc.Protects()
	return term, protect, term != ServiceNoTerm || protect
}

// serviceProtects tells whether job j is protected by the fair share of
// service against the threshold thr. ServiceProtect
// (model.VCluster.ServiceProtect) protects
// (solver.Job.Protected: a reservation whatever the depth) a pending job
// whose bounded slowdown, were it to start now, is above Service's
// threshold x* (predict.Service.Threshold) and would take its tenant's
// average, below x* so far, above it — the jobs whose waits lower Jain's
// index over the tenants' slowdowns most. Its length is its prediction,
// else predict.UnknownLength of its walltime. Protected jobs are decided
// before the head (solver.Input.ProtectedFirst) unless a starvation guard
// is on (the head has waited past its bound): then after it, like the
// per-job guard's.
func serviceProtects(s *Snapshot, j *solver.Job, thr float64) bool {
	elig := j.EligibleTime
	if elig.IsZero() {
		elig = j.SubmitTime
	}
	if elig.IsZero() || j.Walltime <= 0 {
		return false
	}
	length := j.Predicted
	if length <= 0 || length >= j.Walltime {
		length = predict.UnknownLength(j.Walltime)
	}
	x := predict.BoundedSlowdown(s.Now.Sub(elig), length)
	if x <= thr {
		return false
	}
	mean, weight := s.Service.Tenant(j.Tenant, s.Now)
	return mean < thr && (weight*mean+x)/(weight+1) > thr
}

// serviceAverage is solver.Input.ServiceAverage: everyone's recent average
// bounded slowdown with the per-job fair share of service, else 0 (off).
func serviceAverage(s *Snapshot, term ServiceTerm) float64 {
	if term != ServiceByJob {
		return 0
	}
	return s.Service.Average()
}

// ServiceTerm is how f3 reads the fair share of service (Snapshot.Service),
// from model.VCluster.FairShare (ServiceSettings).
type ServiceTerm int

const (
	// ServiceByTenant: f3 is at least how far the tenant's average bounded
	// slowdown over its completed jobs is above everyone's
	// (solver.Tenant.ServiceBehind).
	ServiceByTenant ServiceTerm = iota
	// ServiceByJob: a job's f3 is at least how far its tenant's average
	// would be above everyone's if it started now, its wait counted
	// (solver.Input.ServiceAverage, predict.PendingBehind).
	ServiceByJob
	// ServiceNoTerm: f3 by usage alone (model.FairShareUsage; Service
	// serves only ServiceProtect).
	ServiceNoTerm
)

// DefaultStarvationWait is the wait beyond which the starvation guard plans
// running work with walltimes (Snapshot.StarvationWait).
const DefaultStarvationWait = 72 * time.Hour

func (s *Snapshot) starvationWait() time.Duration {
	if s.StarvationWait == 0 {
		return DefaultStarvationWait
	}
	return s.StarvationWait
}

// DefaultCorrector is the corrector the loops use.
const DefaultCorrector = predict.CorrectReqtime

// LearnCompleted returns a predictor learnt from the completed allocations
// (nil when none completed with a known start and end).
func LearnCompleted(done []*model.Allocation) *predict.History {
	h, _ := LearnCompletedScored(done)
	return h
}

// LearnCompletedScored is LearnCompleted, and how the predictor did on
// those allocations as it learnt them (predict.LearnScored).
func LearnCompletedScored(done []*model.Allocation) (*predict.History, predict.Accuracy) {
	var runs []predict.Run
	for _, a := range done {
		if a == nil || a.State != model.StateCompleted || a.StartTime.IsZero() || a.EndTime.Before(a.StartTime) {
			continue
		}
		runs = append(runs, predict.Run{User: predictUser(a), Name: a.Name, End: a.EndTime, ID: a.ID, Runtime: a.EndTime.Sub(a.StartTime), Requested: a.Walltime})
	}
	if len(runs) == 0 {
		return nil, predict.Accuracy{}
	}
	return predict.LearnScored(predict.ModelLattice, runs)
}

// predicted is what the plan assumes allocation a runs: its prediction
// (bounded by its walltime), or its walltime without a predictor.
func predicted(h *predict.History, a *model.Allocation) time.Duration {
	if h == nil || a.Walltime <= 0 {
		return a.Walltime
	}
	return h.Predict(predictUser(a), a.Name, a.Walltime)
}

// predictedJob is a pending job's solver.Job.Predicted: 0 (its walltime)
// without a predictor.
func predictedJob(h *predict.History, a *model.Allocation) time.Duration {
	if h == nil {
		return 0
	}
	return predicted(h, a)
}

// predictUser is whose history predicts a: the user, else the tenant.
func predictUser(a *model.Allocation) string {
	if a.User != "" {
		return a.User
	}
	return a.Tenant
}

// BuildInput turns a snapshot into the solver's input: the nodes this
// vCluster may use (its own, and the idle nodes it may borrow, see
// borrowable), the release timeline of the work on them, the nodes held for
// one of its allocations, its eligible pending allocations with holds,
// tenant shares (usage includes what running work has used so far) and
// quota room. It is a Builder used once.
func BuildInput(s *Snapshot) solver.Input {
	var b Builder
	return b.Build(s)
}

// Builder builds solver inputs exactly like BuildInput — the same snapshot
// gives the same Input — but keeps its memory from one call to the next, for
// callers that build an input every cycle (the replay simulator). The Input
// it returns, its slices and its Tenants map are valid only until the next
// call of Build on the same Builder. A Builder is not safe for concurrent
// use; the zero value is ready to use.
type Builder struct {
	// Immutable promises that the allocations of the snapshots given to
	// Build are never changed in place (the quorum's are not: every change
	// stores a new copy). Build then reuses what it derived from an
	// allocation of the previous snapshot that is still there — the same
	// pointer — so the per-allocation work of a cycle follows what changed
	// (new, started, changed allocations), not the length of the queue.
	// The input is the same either way. The leader's loops set it; the
	// replay, which changes its allocations in place, does not.
	Immutable bool
	// recs are the pending allocations of the last Build, in its order,
	// with what Build derived from them, and jobs their solver.Jobs
	// (parallel to recs; with every one placed, the input's Pending as
	// it is). With Immutable they are updated in place (see pendingRecs);
	// spare and spareJobs hold what is still to be read when an insertion
	// would overwrite it.
	recs, spare     []pendingRec
	jobs, spareJobs []solver.Job
	recsOwnOnly     bool             // CheckpointableOnlyOnBorrowed the recs were derived with
	recsPred        *predict.History // the predictor of the recs' Predicted

	homes       []homeLending
	cand        []bool // by node: another vCluster's node this one may borrow
	candLimit   []time.Time
	tenantIdx   map[string]int32 // index of a tenant in idxNames
	idxNames    []string         // the names tenantIdx was built for
	runUsage    []float64        // by tenant index: running usage
	nodes       []solver.Node
	running     []solver.Running
	pending     []solver.Job
	tenants     map[string]solver.Tenant
	seenRunning map[uint64]bool
	activeTasks map[uint64]int
	names       []string
	tenantList  []*model.Tenant
	decayed     []float64
	svcWanted   []bool // by tenant index: has a job to place (ServiceByJob)
}

// Build turns a snapshot into the solver's input; see BuildInput.
func (b *Builder) Build(s *Snapshot) solver.Input {
	vc := s.VCluster
	pred := s.Predictor
	if pred == nil && len(s.Completed) > 0 {
		pred = LearnCompleted(s.Completed)
	}
	serviceTerm, serviceProtect, needService := ServiceSettings(vc)
	if needService && s.Service == nil && len(s.Completed) > 0 {
		c := *s
		c.Service = LearnService(s.Completed)
		s = &c
	}
	corrector := s.Corrector
	if corrector == "" {
		corrector = DefaultCorrector
	}
	// The starvation guard: while a pending job has waited longer than
	// StarvationWait, running work is planned with its walltimes (EASY's
	// safe release times), so the head's reservation can no longer be
	// pushed back by running jobs that outlive their predictions.
	recs, jobs := b.pendingRecs(s, pred)
	// One pass over the records for what the cycle asks of all of them:
	// a wait past the guard, the relative guard's head, whether every one
	// is placed and whether any has an array limit.
	guarded := false
	guard := s.starvationWait()
	checkWait := pred != nil && guard > 0
	wantHead := pred != nil && s.EasyStarts != nil
	allPlaced, arrayLimits := true, false
	var head *pendingRec
	for i := range recs {
		r := &recs[i]
		if checkWait && !guarded {
			if e := r.elig; !e.IsZero() && s.Now.Sub(e) > guard {
				guarded = true
			}
		}
		if wantHead && !r.held && (head == nil || r.before(head)) {
			head = r
		}
		if !r.placed {
			allPlaced = false
		}
		if r.arrayJob != 0 && r.maxConc > 0 {
			arrayLimits = true
		}
	}
	if !guarded && wantHead {
		var a *model.Allocation
		var since time.Time
		if head != nil {
			a, since = head.a, head.since()
		}
		if s.EasyStarts.starved(s, a, since, s.starvationFactor()) {
			guarded = true
		}
	}
	// The per-job guard: jobs waiting past their bound are protected, and
	// running work is planned with walltimes while any is.
	var protected map[uint64]bool
	if s.EasyStarts != nil {
		userFactor := s.userGuardFactor()
		if pred == nil {
			userFactor = 0 // first come, first served: nobody overtakes
		}
		var strict bool
		protected, strict = s.EasyStarts.protect(s, s.JobStarvationFactor, userFactor)
		if strict {
			guarded = true
		}
	}
	// How prediction plans (model.VCluster.RunningEnds, PredictedStarts):
	// running work's release times, and the candidates' starts; either way
	// the prediction orders the queue (f2). A starvation guard turns both
	// off.
	runPred := pred
	if guarded || vc.EffectiveRunningEnds() == model.RunningEndsWalltime {
		runPred = nil
	}
	predictedStarts := pred != nil && !guarded && vc.StartsByPrediction()
	if b.tenants == nil {
		b.tenants = make(map[string]solver.Tenant, len(s.Tenants))
	}
	clear(b.tenants)
	in := solver.Input{
		Now:                  s.Now,
		VCluster:             vc.Name,
		Type:                 vc.Type,
		Weights:              vc.Weights,
		Algorithm:            vc.EffectiveAlgorithm(),
		ReservationDepth:     vc.ReservationDepth,
		PredictedStarts:      predictedStarts,
		OmitReservationNodes: s.OmitReservationNodes,
		ServiceAverage:       serviceAverage(s, serviceTerm),
		ProtectedFirst:       serviceProtect && !guarded,
		Groups:               s.Groups,
		PowerHeadroomWatts:   s.PowerHeadroomWatts,
		EnergyPrice:          s.EnergyPrice,
		Energy:               s.Energy,
		Nodes:                slices.Grow(b.nodes[:0], len(s.Nodes)),
		Running:              b.running[:0],
		Pending:              b.pending[:0],
		Tenants:              b.tenants,
		NodeReservations:     nodeReservations(s),
	}
	if b.seenRunning == nil {
		b.seenRunning = make(map[uint64]bool)
	}
	seenRunning := b.seenRunning
	clear(seenRunning)
	borrows := vc.Borrows()
	if borrows {
		b.borrowable(s)
	}
	// Tenants in name order, and their indexes (kept while the names stay).
	names, tenants := b.sortedTenants(s)
	if b.tenantIdx == nil || !slices.Equal(names, b.idxNames) {
		if b.tenantIdx == nil {
			b.tenantIdx = make(map[string]int32, len(names))
		}
		clear(b.tenantIdx)
		for i, name := range names {
			b.tenantIdx[name] = int32(i)
		}
		b.idxNames = append(b.idxNames[:0], names...)
	}
	b.runUsage = grow(b.runUsage, len(names))
	var unlisted float64 // running usage of tenants not in s.Tenants
	// Neighbouring nodes mostly run the same allocation: look it up, and
	// compute its expected end, once per run of nodes. A run's node-seconds
	// so far are charged to its tenant when the run ends.
	var (
		lastID     uint64
		lastAlloc  *model.Allocation
		lastEnd    time.Time
		endKnown   bool
		runNodes   int
		listed     bool   // an own busy node was seen: lastListed is in Running
		lastListed uint64 // the allocation of the last own busy node
	)
	for i, n := range s.Nodes {
		if n.Allocation != 0 {
			if n.Allocation != lastID || lastAlloc == nil {
				if runNodes > 0 {
					unlisted += b.charge(s, lastAlloc, runNodes)
				}
				lastID, lastAlloc, endKnown, runNodes = n.Allocation, s.Allocations[n.Allocation], false, 0
			}
			runNodes++
		} else if runNodes > 0 {
			// A run is neighbouring nodes of one allocation.
			unlisted += b.charge(s, lastAlloc, runNodes)
			runNodes = 0
		}
		own := n.CurrentVCluster == vc.Name
		if !own && !(borrows && b.cand[i]) {
			continue
		}
		k := len(in.Nodes)
		in.Nodes = in.Nodes[:k+1] // capacity for every node is there
		sn := &in.Nodes[k]
		// Field by field: cheaper than a composite literal's copy. Every
		// field is written, FreeAt below (the buffer holds old nodes).
		sn.Name = n.Name
		sn.Group = n.Group
		sn.Fingerprint = n.Fingerprint
		sn.GPUType = n.GPUType
		sn.GPUs = n.GPUs
		sn.Features = n.Features
		sn.IdleWatts = n.IdleWatts
		if n.Idle() {
			sn.IdleWatts = n.Watts() // measured when a measurement is in force
		}
		sn.BusyWatts = n.BusyWatts
		sn.State = n.State
		sn.Own = own
		sn.Allocation = n.Allocation
		sn.FreeAt = time.Time{}
		sn.LendUntil = time.Time{}
		sn.ReservedFor, sn.ReservedUntil = 0, time.Time{}
		if !own {
			sn.LendUntil = b.candLimit[i]
			continue // idle
		}
		if n.ReservedFor != 0 && s.Now.Before(n.ReservedUntil) && holdLive(s, n.ReservedFor) {
			sn.ReservedFor, sn.ReservedUntil = n.ReservedFor, n.ReservedUntil
		}
		if n.SuspendedAlloc != 0 {
			if id, ok := suspendedFor(s, n.SuspendedAlloc); ok {
				// The frozen processes of a suspended allocation stay here:
				// only the job it was suspended for may start on it.
				sn.ReservedFor, sn.ReservedUntil = id, s.Now.Add(suspendHoldSpan)
			}
		}
		if n.Allocation == 0 {
			continue
		}
		if a := lastAlloc; a != nil {
			if !endKnown {
				lastEnd, endKnown = expectedEnd(a, s.Now, runPred, corrector), true
			}
			sn.FreeAt = lastEnd
			if !(listed && a.ID == lastListed) && !seenRunning[a.ID] {
				seenRunning[a.ID] = true
				in.Running = append(in.Running, solver.Running{
					ID: a.ID, Tenant: a.Tenant, Nodes: len(a.Nodes), Start: a.StartTime, End: sn.FreeAt,
				})
			}
			listed, lastListed = true, a.ID
		} else {
			// Busy with something the snapshot does not hold: assume it
			// frees at its walltime's upper bound, i.e. not within this plan.
			sn.FreeAt = s.Now.Add(model.MaxWalltime)
		}
		if n.ReturnRequested && n.Borrowed() {
			// Borrowed and reclaimed by its home: it goes home when its
			// work ends, so it never takes new work here.
			sn.FreeAt = time.Time{}
		}
	}
	if runNodes > 0 {
		unlisted += b.charge(s, lastAlloc, runNodes)
	}

	// Array concurrency: count active tasks per array, when a pending
	// allocation has a limit to check.
	var activeTasks map[uint64]int
	if arrayLimits {
		if b.activeTasks == nil {
			b.activeTasks = make(map[uint64]int)
		}
		activeTasks = b.activeTasks
		clear(activeTasks)
		for _, a := range s.Allocations {
			if a.ArrayJobID != 0 && a.State.Active() {
				activeTasks[a.ArrayJobID]++
			}
		}
	}
	// Every record placed (the common case): the input's Pending is the
	// jobs as they are, their per-cycle fields (Hold, Protected) written
	// below; else the placed ones are copied.
	var thr float64 // x*, with ServiceProtect
	if serviceProtect {
		thr = s.Service.Threshold()
	}
	// With the per-job fair share of service, the solver reads the
	// service memory of the tenants with a job to place only: the others'
	// (a decayed weight each, an exp2) are not worked out.
	svcWanted := b.svcWanted[:0]
	if serviceTerm == ServiceByJob {
		svcWanted = grow(b.svcWanted, len(names))
		clear(svcWanted)
	}
	b.svcWanted = svcWanted
	if allPlaced {
		in.Pending = jobs
	} else {
		in.Pending = slices.Grow(in.Pending, len(recs))
	}
	k := 0
	for i := range recs {
		r := &recs[i]
		if !r.placed {
			continue // waits on a dependency: not the solver's to place
		}
		if !allPlaced {
			in.Pending = append(in.Pending, jobs[i])
		}
		j := &in.Pending[k]
		k++
		j.Hold, j.Protected = "", false
		// Held, or before its begin time: scored and explained, never started.
		switch {
		case r.held:
			j.Hold = model.ReasonJobHeldUser
			if r.admin {
				j.Hold = model.ReasonJobHeldAdmin
			}
		case !r.begin.IsZero() && s.Now.Before(r.begin):
			j.Hold = model.ReasonBeginTime
		}
		j.Protected = protected[j.ID] || (thr > 0 && serviceProtects(s, j, thr)) // per cycle: never kept in the reused record
		if len(svcWanted) > 0 {
			if ti, ok := b.tenantIndex(j.Tenant); ok {
				svcWanted[ti] = true
			}
		}
		if r.arrayJob != 0 && r.maxConc > 0 && j.Hold == "" {
			if activeTasks[r.arrayJob] >= r.maxConc {
				j.Hold = ReasonArrayTaskLimit
			} else {
				// Later tasks of the same array see the slot as taken.
				activeTasks[r.arrayJob]++
			}
		}
	}

	// Tenants: usage shares and quota room. A tenant's usage is its
	// decayed usage plus the node-seconds its running allocations have
	// used so far: the quorum charges a run only when it ends (the whole
	// run, from StartTime), so nothing is counted twice, and a tenant with
	// a long runner does not look idle meanwhile.
	halfLife := s.FairShareHalfLife
	if halfLife <= 0 {
		halfLife = DefaultFairShareHalfLife
	}
	total := unlisted
	decayed := slices.Grow(b.decayed[:0], len(names))
	for i, t := range tenants {
		u := DecayedUsage(t, s.Now, halfLife) + b.runUsage[i]
		decayed = append(decayed, u)
		total += u // in name order: the same snapshot gives the same bits
	}
	b.decayed = decayed
	for i, name := range names {
		t := tenants[i]
		st := solver.Tenant{FairShareTarget: t.FairShareTarget, NodesLeft: -1, RunningLeft: -1}
		if total > 0 {
			st.UsageShare = decayed[i] / total
		}
		switch serviceTerm {
		case ServiceByTenant:
			st.ServiceBehind = s.Service.Behind(name)
		case ServiceByJob:
			if svcWanted[i] {
				st.ServiceMean, st.ServiceWeight = s.Service.Tenant(name, s.Now)
			}
		}
		if t.MaxNodes > 0 || t.MaxRunning > 0 {
			load := s.TenantLoad[name]
			if t.MaxNodes > 0 {
				st.NodesLeft = max(0, t.MaxNodes-load.Nodes)
			}
			if t.MaxRunning > 0 {
				st.RunningLeft = max(0, t.MaxRunning-load.Running)
			}
		}
		in.Tenants[name] = st
	}
	b.nodes, b.running = in.Nodes, in.Running
	if !allPlaced {
		b.pending = in.Pending
	}
	// Nothing listed is a nil slice, as it always was.
	if len(in.Nodes) == 0 {
		in.Nodes = nil
	}
	if len(in.Running) == 0 {
		in.Running = nil
	}
	if len(in.Pending) == 0 {
		in.Pending = nil
	}
	return in
}

// sortedTenants lists the tenants of s in name order, and their names:
// s.TenantsByName when it is usable, else the keys of s.Tenants sorted here.
func (b *Builder) sortedTenants(s *Snapshot) ([]string, []*model.Tenant) {
	names := slices.Grow(b.names[:0], len(s.Tenants))
	if list := s.TenantsByName; len(list) == len(s.Tenants) {
		for i, t := range list {
			if i > 0 && list[i-1].Name >= t.Name {
				break
			}
			names = append(names, t.Name)
		}
		if len(names) == len(list) {
			b.names = names
			return names, list
		}
		names = names[:0]
	}
	for name := range s.Tenants {
		names = append(names, name)
	}
	slices.Sort(names)
	tenants := slices.Grow(b.tenantList[:0], len(names))
	for _, name := range names {
		tenants = append(tenants, s.Tenants[name])
	}
	b.names, b.tenantList = names, tenants
	return names, tenants
}

// charge adds to its tenant's running usage the node-seconds a run of
// nodes of allocation a has used so far; it returns them instead when the
// tenant is not in the snapshot.
func (b *Builder) charge(s *Snapshot, a *model.Allocation, nodes int) float64 {
	if a == nil || !a.State.Active() || a.StartTime.IsZero() || !a.StartTime.Before(s.Now) {
		return 0
	}
	u := float64(nodes) * s.Now.Sub(a.StartTime).Seconds()
	i, ok := b.tenantIndex(a.Tenant)
	if !ok {
		return u
	}
	b.runUsage[i] += u
	return 0
}

// tenantIndex is tenantIdx[name]: with a handful of tenants (a site's
// usual few), comparing the names is cheaper than hashing one.
func (b *Builder) tenantIndex(name string) (int32, bool) {
	if len(b.idxNames) <= 8 {
		for i, n := range b.idxNames {
			if n == name {
				return int32(i), true
			}
		}
		return 0, false
	}
	i, ok := b.tenantIdx[name]
	return i, ok
}

// homeLending is what a borrower needs to know of one home vCluster in a
// cycle: whether it lends, its back-off, and how many more of its nodes it
// may lend now.
type homeLending struct {
	name    string
	vc      *model.VCluster // nil: from Snapshot.Lenders (no limit)
	lends   bool
	backoff time.Duration
	nodes   int // nodes whose home it is
	lent    int // of those, lent out now
	cands   int // idle ones this vCluster may borrow
}

// home returns the entry of home vCluster name, creating it (the last one
// found is checked first: nodes of one home are mostly neighbours).
func (b *Builder) home(s *Snapshot, name string, last int) int {
	if last >= 0 && last < len(b.homes) && b.homes[last].name == name {
		return last
	}
	for i := range b.homes {
		if b.homes[i].name == name {
			return i
		}
	}
	h := homeLending{name: name, backoff: model.DefaultReclaimBackoff}
	if s.VClusters != nil {
		if v := s.VClusters[name]; v != nil {
			h.vc, h.lends, h.backoff = v, v.Lends(), v.Backoff()
		}
	} else {
		h.lends = s.Lenders[name]
	}
	b.homes = append(b.homes, h)
	return len(b.homes) - 1
}

// borrowable marks in b.cand the idle nodes of other vClusters this one
// may borrow now, with their lending limits in b.candLimit — the rules the
// quorum enforces on a borrow:
//   - the node is Ready and idle, at home (never re-lent), and its home lends;
//   - it was not reclaimed from this vCluster within its home's back-off;
//   - it is held for no allocation (Node.ReservedFor);
//   - its home's plan does not reserve it now (LendLimits; a later
//     reservation becomes the node's LendUntil);
//   - at most MaxLendable of a home's nodes are lent at once: when more are
//     idle than it may still lend, those without a limit, then those with
//     the latest, then by node order, are offered.
//
// (That only checkpointable work may use them, when the vCluster says so,
// is a per-job rule: solver.Job.OwnNodesOnly.)
func (b *Builder) borrowable(s *Snapshot) {
	vc := s.VCluster
	b.homes = b.homes[:0]
	b.cand = grow(b.cand, len(s.Nodes))
	b.candLimit = grow(b.candLimit, len(s.Nodes))
	last := -1
	over := false
	for i, n := range s.Nodes {
		h := b.home(s, n.HomeVCluster, last)
		last = h
		hl := &b.homes[h]
		hl.nodes++
		if n.Borrowed() {
			hl.lent++
		}
		if n.CurrentVCluster == vc.Name || !hl.lends || n.Borrowed() || !n.Schedulable() {
			continue
		}
		if n.ReclaimedFrom == vc.Name && s.Now.Before(n.ReclaimedAt.Add(hl.backoff)) {
			continue
		}
		if n.ReservedFor != 0 && s.Now.Before(n.ReservedUntil) && holdLive(s, n.ReservedFor) {
			continue
		}
		if n.SuspendedAlloc != 0 {
			continue // frozen work of its home waits there
		}
		if lim, ok := s.LendLimits[n.HomeVCluster][n.Name]; ok {
			if !s.Now.Before(lim) {
				continue // its home's plan needs it now
			}
			b.candLimit[i] = lim
		}
		b.cand[i] = true
		hl.cands++
	}
	for h := range b.homes {
		hl := &b.homes[h]
		if hl.vc != nil && hl.cands > max(0, hl.vc.MaxLendable(hl.nodes)-hl.lent) {
			over = true
		}
	}
	if !over {
		return
	}
	// Some home has more idle nodes than it may still lend: offer the best.
	type cand struct {
		i     int
		limit time.Time
	}
	for h := range b.homes {
		hl := &b.homes[h]
		room := 0
		if hl.vc != nil {
			room = max(0, hl.vc.MaxLendable(hl.nodes)-hl.lent)
		}
		if hl.vc == nil || hl.cands <= room {
			continue
		}
		var cs []cand
		for i, n := range s.Nodes {
			if b.cand[i] && n.HomeVCluster == hl.name {
				cs = append(cs, cand{i, b.candLimit[i]})
			}
		}
		slices.SortStableFunc(cs, func(x, y cand) int {
			switch {
			case x.limit.IsZero() != y.limit.IsZero():
				if x.limit.IsZero() {
					return -1
				}
				return 1
			case !x.limit.Equal(y.limit):
				return y.limit.Compare(x.limit)
			}
			return 0
		})
		for _, c := range cs[room:] {
			b.cand[c.i] = false
		}
	}
}

// holdLive reports whether a node held for allocation id still holds: the
// quorum drops a hold once its allocation is no longer pending. An
// allocation the snapshot does not hold (another vCluster's pending one)
// is assumed pending.
func holdLive(s *Snapshot, id uint64) bool {
	a, ok := s.Allocations[id]
	return !ok || (a.State == model.StatePending && a.Held == "") // a held one holds no nodes
}

// suspendHoldSpan is how long ahead the solver sees a node held for the
// job a suspended allocation on it was suspended for: the hold lasts until
// the suspended one resumes, which no plan can date.
const suspendHoldSpan = 100 * 365 * 24 * time.Hour

// suspendedFor reports, for a node marked by suspended allocation id
// (Node.SuspendedAlloc), the only job that may start on it — the one id
// was suspended for — and whether the mark holds: an allocation the
// snapshot does not hold is assumed still suspended (the quorum drops the
// marks when it resumes or ends), for no job.
func suspendedFor(s *Snapshot, id uint64) (uint64, bool) {
	a, ok := s.Allocations[id]
	switch {
	case !ok:
		return id, true
	case !a.GangSuspended():
		return 0, false
	case a.Preemption == nil:
		return id, true
	}
	return a.Preemption.ForAlloc, true
}

// SortByID sorts allocations by id, as Snapshot.Pending is. It sorts the
// ids with their allocations beside them: a sort comparing a.ID through the
// pointers reads 100,000 allocations scattered in memory log n times each.
func SortByID(as []*model.Allocation) {
	type keyed struct {
		id uint64
		a  *model.Allocation
	}
	ks := make([]keyed, len(as))
	for i, a := range as {
		ks[i] = keyed{a.ID, a}
	}
	slices.SortFunc(ks, func(x, y keyed) int { return cmp.Compare(x.id, y.id) })
	for i := range ks {
		as[i] = ks[i].a
	}
}

// grow returns b with n zero elements, reusing its array when it can.
func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	b = b[:n]
	clear(b)
	return b
}

// DecayedUsage is a tenant's usage decayed from its UsageTime to now.
func DecayedUsage(t *model.Tenant, now time.Time, halfLife time.Duration) float64 {
	if t.Usage <= 0 {
		return 0
	}
	dt := now.Sub(t.UsageTime)
	if dt <= 0 || t.UsageTime.IsZero() {
		return t.Usage
	}
	return t.Usage * math.Exp2(-float64(dt)/float64(halfLife))
}

// expectedEnd is when an active allocation is expected to end: its start
// plus its predicted runtime (its walltime without a predictor); one that
// has not started yet (Staging) is assumed to start now. One that has
// outlived its prediction is corrected (see predict.Correct) — at the next
// cycle, so its reservation and the plans that depend on it move.
func expectedEnd(a *model.Allocation, now time.Time, h *predict.History, corrector string) time.Time {
	start := a.StartTime
	if start.IsZero() {
		start = now
	}
	p := predicted(h, a)
	if p < a.Walltime && !start.Add(p).After(now) {
		p, _ = predict.Correct(corrector, p, now.Sub(start), a.Walltime, 0)
	}
	end := start.Add(p)
	if end.Before(now) {
		// Overran its walltime and is being stopped: frees imminently.
		return now
	}
	return end
}

// pendingRec is what Build derives from one pending allocation: its
// solver.Job but for the parts that depend on the time (Hold), and what
// the starvation guards and array limits read.
type pendingRec struct {
	a        *model.Allocation
	placed   bool      // pending with an eligible time: the solver's to place
	held     bool      // Held != ""
	admin    bool      // held by an admin (model.HoldAdmin)
	begin    time.Time // BeginTime
	elig     time.Time // EligibleTime
	arrayJob uint64    // ArrayJobID when it has a %MAX (ArrayMaxConcurrent > 0)
	maxConc  int
	id       uint64 // the allocation's
	class    int    // its PriorityClass
	submit   time.Time
}

// before reports whether r (not held) replaces head as the head of the
// queue for the relative starvation guard, the records walked in order: the
// highest priority class, then the longest waiting, then the lowest id.
func (r *pendingRec) before(head *pendingRec) bool {
	switch {
	case r.class != head.class:
		return r.class > head.class
	case !r.since().Equal(head.since()):
		return !r.since().After(head.since())
	}
	return r.id <= head.id
}

// since is what the relative guard's head waits from: eligible(a).
func (r *pendingRec) since() time.Time {
	if !r.elig.IsZero() {
		return r.elig
	}
	return r.submit
}

// derive fills r and its job from a, with Predicted from pred.
func (b *Builder) derive(r *pendingRec, job *solver.Job, a *model.Allocation, ownOnly bool, pred *predict.History) {
	*r = pendingRec{
		a: a, placed: a.State == model.StatePending && !a.EligibleTime.IsZero(),
		begin: a.BeginTime, elig: a.EligibleTime,
		id: a.ID, class: a.PriorityClass, submit: a.SubmitTime,
	}
	*job = solver.Job{
		ID:                a.ID,
		Tenant:            a.Tenant,
		NodesMin:          a.NodesMin,
		NodesMax:          a.NodesMax,
		Walltime:          a.Walltime,
		Predicted:         predictedJob(pred, a),
		PriorityClass:     a.PriorityClass,
		SubmitTime:        a.SubmitTime,
		EligibleTime:      a.EligibleTime,
		Constraints:       a.Constraints,
		GPUType:           a.GPUType,
		GPUsPerNode:       a.GPUsPerNode,
		Checkpoint:        a.Checkpoint,
		CheckpointMinutes: a.CheckpointMinutes,
		HotDataFraction:   -1,
		OwnNodesOnly:      ownOnly && !a.Checkpoint.Checkpointable(),
		NodeList:          a.NodeList,
		ExcludeNodes:      a.ExcludeNodes,
		Reservation:       a.Reservation,
	}
	if a.Held != "" {
		r.held, r.admin = true, a.Held == model.HoldAdmin
	}
	if a.BeginTime.After(job.EligibleTime) {
		job.EligibleTime = a.BeginTime // its wait (f2) counts from its begin time, as Slurm's age
	}
	if a.HotDataFraction != nil {
		job.HotDataFraction = *a.HotDataFraction
	}
	if a.ArrayJobID != 0 && a.ArrayMaxConcurrent > 0 {
		r.arrayJob, r.maxConc = a.ArrayJobID, a.ArrayMaxConcurrent
	}
}

// pendingRecs derives the records of s.Pending and their jobs, in its
// order. With Immutable, the records of the last Build whose allocations
// are still there (the same pointers; both lists in id order) are taken as
// they are, their Predicted redone only when the predictor changed; and
// the lists are updated in place: a record is moved only when an earlier
// one left (a run of them at once), and a new one is written where a
// record already read was, or at the end. Only an allocation that comes
// before some of the last Build's without replacing one (one pending
// again, with its old id) makes it set the unread ones aside first.
func (b *Builder) pendingRecs(s *Snapshot, pred *predict.History) ([]pendingRec, []solver.Job) {
	ownOnly := s.VCluster.CheckpointableOnlyOnBorrowed
	n := len(s.Pending)
	old, oldJobs := b.recs, b.jobs
	if !b.Immutable || ownOnly != b.recsOwnOnly {
		old, oldJobs = old[:0], oldJobs[:0]
	}
	samePred := pred == b.recsPred
	recs, jobs := b.recs, b.jobs
	written := len(recs) // records of the buffer that hold references
	if cap(recs) < n || cap(jobs) < n {
		// A new buffer (old stays readable); in place from the next Build.
		c := n + n/8
		recs, jobs, written = make([]pendingRec, 0, c), make([]solver.Job, 0, c), 0
	}
	recs, jobs = recs[:cap(recs)], jobs[:cap(jobs)]
	inPlace := len(old) > 0 && &old[0] == &recs[0]
	w, j := 0, 0
	for i := 0; i < n; {
		a := s.Pending[i]
		// Skip the records of allocations no longer pending.
		for j < len(old) && old[j].a != a && old[j].id < a.ID {
			j++
		}
		if j < len(old) && old[j].a == a {
			// A run of unchanged allocations, moved at once.
			k := 1
			for i+k < n && j+k < len(old) && old[j+k].a == s.Pending[i+k] {
				k++
			}
			if !inPlace || w != j {
				copy(recs[w:w+k], old[j:j+k])
				copy(jobs[w:w+k], oldJobs[j:j+k])
			}
			if !samePred {
				for x := w; x < w+k; x++ {
					jobs[x].Predicted = predictedJob(pred, recs[x].a)
				}
			}
			i, j, w = i+k, j+k, w+k
			continue
		}
		if j < len(old) && old[j].id == a.ID {
			j++ // changed: its new copy replaces the record
		}
		if inPlace && w >= j && j < len(old) {
			// Writing here would overwrite a record still to read: set
			// the unread ones aside and read them from there.
			b.spare = append(b.spare[:0], old[j:]...)
			b.spareJobs = append(b.spareJobs[:0], oldJobs[j:]...)
			old, oldJobs, j, inPlace = b.spare, b.spareJobs, 0, false
		}
		b.derive(&recs[w], &jobs[w], a, ownOnly, pred)
		i, w = i+1, w+1
	}
	// Drop the references of the records beyond the end (and of the
	// spare ones), so that they do not keep old allocations alive.
	if written > w {
		clear(recs[w:written])
		clear(jobs[w:written])
	}
	clear(b.spare)
	clear(b.spareJobs)
	b.spare, b.spareJobs = b.spare[:0], b.spareJobs[:0]
	b.recs, b.jobs = recs[:w], jobs[:w]
	b.recsOwnOnly, b.recsPred = ownOnly, pred
	return b.recs, b.jobs
}

// nodeReservations is solver.Input.NodeReservations: the reservations not
// over by s.Now.
func nodeReservations(s *Snapshot) []solver.NodeReservation {
	var out []solver.NodeReservation
	for _, r := range s.Reservations {
		if r.End.After(s.Now) {
			out = append(out, solver.NodeReservation{Name: r.Name, Maint: r.Maint, Start: r.Start, End: r.End, Nodes: r.Nodes})
		}
	}
	return out
}
