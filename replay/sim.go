package replay

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/solver"
)

// Policy names.
const (
	PolicyLattice      = "lattice"
	PolicyFCFS         = "fcfs"
	PolicyEASY         = "easy"
	PolicyConservative = "conservative"
)

// Policies lists the known policies.
var Policies = []string{PolicyLattice, PolicyFCFS, PolicyEASY, PolicyConservative, PolicySJBF, PolicyEASYPP}

// PredictorOff plans the lattice policy with walltimes only.
const PredictorOff = "off"

// DefaultGroupSize is the size of a synthetic dragonfly group.
const DefaultGroupSize = 32

// ReservationsNone asks the lattice policy for no protected reservation
// (pure greedy); Config.ReservationDepth 0 means the default (1, EASY-like).
const ReservationsNone = -2

// Config is one replay's setting.
type Config struct {
	Policy string
	// GroupSize is the number of nodes per synthetic dragonfly group; 0 =
	// DefaultGroupSize.
	GroupSize int
	// WeightsProfile names the lattice policy's weights profile; "" = the
	// solver's default.
	WeightsProfile string
	// Weights overrides single weights after the profile is applied: index
	// 0..8 = w1..w9 (sweeps).
	Weights map[int]float64
	// ReservationDepth for the lattice policy: 0 = default (1), N >= 1,
	// model.ReservationsAll, or ReservationsNone.
	ReservationDepth int
	// Cycle, when > 0, schedules only every Cycle (from the first submit)
	// instead of at every arrival and completion.
	Cycle time.Duration
	// PerEvent decides after every single arrival and completion, the
	// arrivals first at equal times (the order of the SC'15 authors'
	// simulator, whose published EASY figures it reproduces more closely),
	// instead of once per distinct time after all its completions and
	// arrivals. Not with Cycle.
	PerEvent bool
	// Progress, when set, is called with the number of finished jobs every
	// few thousand completions and once at the end.
	Progress func(done, total int)
	// Series records queue length and utilization over time (for plots).
	Series bool
	// Energy is a time-of-use price schedule (its start at trace time 0)
	// and the rule that holds flexible work for cheap hours; the lattice
	// policy follows it, every policy is priced by it. nil = none.
	Energy *solver.Energy
	// IdleWatts and BusyWatts per node (0:0 = 100:400 when a schedule or
	// a budget is set) and the system power budget (0 = none), which the
	// lattice policy keeps; with any of them the metrics carry Energy.
	IdleWatts, BusyWatts int
	PowerBudgetWatts     int64
	// StarvationWait is the lattice policy's starvation guard
	// (vcluster.Snapshot.StarvationWait): 0 = the default, < 0 = off.
	StarvationWait time.Duration
	// StarvationFactor is the lattice policy's relative starvation guard
	// (vcluster.Snapshot.StarvationFactor): 0 = the default, < 0 = off.
	StarvationFactor float64
	// JobStarvationFactor is the lattice policy's per-job starvation guard
	// (vcluster.Snapshot.JobStarvationFactor): 0 = off (the default).
	JobStarvationFactor float64
	// UserGuardFactor is the lattice policy's per-user guard
	// (vcluster.Snapshot.UserGuardFactor): 0 = the default, < 0 = off.
	UserGuardFactor float64
	// PredictedStarts: the lattice policy fits starts into holes by
	// predicted runtimes (model.VCluster.PredictedStarts); nil = the
	// vCluster's default (model.VCluster.StartsByPrediction).
	PredictedStarts *bool
	// RunningEnds is when the lattice policy expects running work to end
	// (model.VCluster.RunningEnds): predicted or walltime; "" = the
	// vCluster's default (model.VCluster.EffectiveRunningEnds).
	RunningEnds model.RunningEndsMode
	// FairShare is what the lattice policy's f3 ranks tenants by
	// (model.VCluster.FairShare): usage, service (also a tenant's recent
	// average bounded slowdown above everyone's) or job-service (job by
	// job, each job's wait counted in its tenant's average); "" = the
	// vCluster's default (model.VCluster.EffectiveFairShare).
	FairShare model.FairShareMode
	// ServiceProtect: the lattice policy protects the jobs whose slowdown
	// would leave their tenant above Jain's threshold
	// (model.VCluster.ServiceProtect); nil = the vCluster's default
	// (model.VCluster.Protects).
	ServiceProtect *bool
	// Predictor is the lattice policy's runtime predictor: "" or "lattice"
	// (package predict's default model), or PredictorOff (walltimes).
	Predictor string
	// Corrector is how easy++ (and the lattice policy) corrects a job that outlives its prediction:
	// predict.CorrectTsafrir (the default) or predict.CorrectReqtime.
	Corrector string
}

// jobRun is a job's life in one simulation.
type jobRun struct {
	eligible time.Duration
	start    time.Duration
	end      time.Duration
	nodes    []int32
	pool     int32
	waitDeps int32
	runIdx   int32 // index in its pool's running list while it runs
	queued   bool
	started  bool
	done     bool
	groups   int16
	// predicted is the runtime the policy predicted at the start (0 = none).
	predicted time.Duration
	// avoidable: spread over groups although one group's free nodes could
	// have held it at its start.
	avoidable bool
}

// pool is one vCluster's share of the machine: its home nodes [lo, hi) and
// its queue.
type pool struct {
	spec   VClusterSpec
	lo, hi int
	// queue holds eligible jobs not started, in (submit, id) order.
	queue []int32
	// running holds its started jobs not yet finished.
	running []int32
	// groupFree counts free home nodes per group.
	groupFree []int
	free      int
	// startedInPass counts jobs started since the last compaction.
	startedInPass int
	// sizeCount counts queued jobs by size; minSize is the smallest queued
	// size (valid when the queue is not empty).
	sizeCount []int32
	minSize   int
	// lenders are the pools whose idle nodes this one may use (lattice
	// borrowing).
	lenders []int
}

// scheduler is one policy.
type scheduler interface {
	// schedule starts jobs of p at s.now through s.start.
	schedule(s *sim, p int) error
}

// finishObserver is told about finished jobs (the lattice policy's
// fair-share accounting and allocation map).
type finishObserver interface {
	finished(s *sim, j int)
}

// predictor is a policy that plans with predicted runtimes (for the
// accuracy metrics).
type predictor interface {
	predicted(s *sim, j int) time.Duration
}

// arrivalObserver is told about jobs as they become eligible (easy++
// predicts their runtime then).
type arrivalObserver interface {
	arrived(s *sim, j int)
}

// sim is the discrete-event simulation in virtual time.
type sim struct {
	tr        *Trace
	cfg       Config
	label     string // the policy as asked for (easy++:reqtime)
	groupSize int
	groups    int
	jobs      []jobRun
	pools     []pool
	// nodeJob is the job running on each node (-1 = idle); nodePool is each
	// node's home pool; freeBits has a 1 for every idle node.
	nodeJob  []int32
	nodePool []int32
	freeBits []uint64
	busy     int
	// successors[j] lists the jobs waiting on j.
	successors [][]int32
	completion jobHeap
	now        time.Duration
	policy     scheduler
	series     *Series
	done       int
	nextArr    int
	energy     *energyState // nil without a power model
	// idle integrates the idle nodes by class (IdleMetrics); idleUsers
	// lists the pools that may start work on each pool's nodes.
	idle      idleAcc
	idleUsers [][]int32
	// groupMark[g] == markGen: group g holds a node of the job starting
	// (start counts the groups a job spans).
	groupMark []uint32
	markGen   uint32
	// ctx stops the replay when done (nil: never).
	ctx context.Context
}

// Run replays the trace under one policy and returns its metrics.
func Run(tr *Trace, cfg Config) (*Result, error) {
	return RunContext(context.Background(), tr, cfg)
}

// RunContext is Run, stopped with ctx's error when ctx is done (checked
// every few thousand events).
func RunContext(ctx context.Context, tr *Trace, cfg Config) (*Result, error) {
	started := time.Now()
	s, err := newSim(tr, cfg)
	if err != nil {
		return nil, err
	}
	s.ctx = ctx
	if err := s.run(); err != nil {
		return nil, err
	}
	if s.series != nil {
		s.series.jobs(s.jobs)
	}
	res := &Result{Metrics: s.metrics(), Series: s.series}
	res.Metrics.WallSeconds = time.Since(started).Seconds()
	return res, nil
}

func newSim(tr *Trace, cfg Config) (*sim, error) {
	if tr.Capacity < 1 {
		return nil, errors.New("replay: the trace has no capacity (no jobs and no MaxProcs/MaxNodes header)")
	}
	if cfg.GroupSize == 0 {
		cfg.GroupSize = DefaultGroupSize
	}
	if cfg.GroupSize < 1 {
		return nil, fmt.Errorf("replay: group size %d: allowed >= 1", cfg.GroupSize)
	}
	if err := ValidPolicy(cfg.Policy); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	if cfg.PerEvent && cfg.Cycle > 0 {
		return nil, errors.New("replay: per-event decisions and a decision cycle exclude each other")
	}
	label := cfg.Policy
	if base, c, ok := strings.Cut(cfg.Policy, ":"); ok {
		cfg.Policy, cfg.Corrector = base, c
	}
	if c := cfg.Corrector; c != "" && !slices.Contains(Correctors, c) {
		return nil, fmt.Errorf("replay: corrector %q: allowed %s", c, strings.Join(Correctors, ", "))
	}
	s := &sim{tr: tr, cfg: cfg, groupSize: cfg.GroupSize, label: label}
	var err error
	s.groups = (tr.Capacity + cfg.GroupSize - 1) / cfg.GroupSize
	s.groupMark = make([]uint32, s.groups)
	specs := tr.VClusters
	if len(specs) == 0 {
		specs = []VClusterSpec{{Name: "replay", Nodes: tr.Capacity, Type: model.TypeHPCBatch}}
	}
	s.nodeJob = make([]int32, tr.Capacity)
	s.nodePool = make([]int32, tr.Capacity)
	s.freeBits = make([]uint64, (tr.Capacity+63)/64)
	for i := range s.nodeJob {
		s.nodeJob[i] = -1
		s.freeBits[i/64] |= 1 << (i % 64)
	}
	poolOf := map[string]int{}
	lo := 0
	for i, spec := range specs {
		p := pool{spec: spec, lo: lo, hi: lo + spec.Nodes, free: spec.Nodes, groupFree: make([]int, s.groups),
			sizeCount: make([]int32, tr.Capacity+1)}
		for n := p.lo; n < p.hi; n++ {
			s.nodePool[n] = int32(i)
			p.groupFree[n/s.groupSize]++
		}
		lo = p.hi
		s.pools = append(s.pools, p)
		poolOf[spec.Name] = i
	}
	if cfg.Policy == PolicyLattice {
		for i := range s.pools {
			for k := range s.pools {
				if k != i && s.pools[i].spec.AllowBorrowing && s.pools[k].spec.AllowLending {
					s.pools[i].lenders = append(s.pools[i].lenders, k)
				}
			}
		}
	}
	s.setIdleUsers()
	s.jobs = make([]jobRun, len(tr.Jobs))
	byID := make(map[uint64]int32, len(tr.Jobs))
	for i, j := range tr.Jobs {
		byID[j.ID] = int32(i)
		if j.VCluster != "" {
			p, ok := poolOf[j.VCluster]
			if !ok {
				return nil, fmt.Errorf("replay: job %d: unknown vcluster %q", j.ID, j.VCluster)
			}
			s.jobs[i].pool = int32(p)
		}
		if j.Size > s.pools[s.jobs[i].pool].spec.Nodes {
			return nil, fmt.Errorf("replay: job %d needs %d nodes, its vcluster has %d", j.ID, j.Size, s.pools[s.jobs[i].pool].spec.Nodes)
		}
	}
	for i, j := range tr.Jobs {
		for _, d := range j.DependsOn {
			if k, ok := byID[d]; ok && int(k) != i {
				if s.successors == nil {
					s.successors = make([][]int32, len(tr.Jobs))
				}
				s.successors[k] = append(s.successors[k], int32(i))
				s.jobs[i].waitDeps++
			}
		}
	}
	if cfg.Series {
		s.series = &Series{Capacity: tr.Capacity}
	}
	if s.energy, err = newEnergyState(&cfg, tr.Capacity); err != nil {
		return nil, err
	}
	switch cfg.Policy {
	case PolicyFCFS:
		s.policy = fcfs{}
	case PolicyEASY:
		s.policy = &easy{}
	case PolicyConservative:
		s.policy = &conservative{}
	case PolicySJBF:
		s.policy = newBackfill(s, true, false)
	case PolicyEASYPP:
		s.policy = newBackfill(s, true, true)
	case PolicyLattice:
		lp, err := newLattice(s)
		if err != nil {
			return nil, err
		}
		s.policy = lp
	default:
		return nil, fmt.Errorf("replay: unknown policy %q: allowed %v", cfg.Policy, Policies)
	}
	return s, nil
}

// run is the event loop: at each distinct time, completions first, then
// arrivals, then one scheduling pass per vCluster (every event, or on the
// cycle's ticks); with Config.PerEvent, one event at a time, arrivals
// first, each followed by the passes.
func (s *sim) run() error {
	jobs := s.tr.Jobs
	cycle := s.cfg.Cycle
	var origin time.Duration
	if len(jobs) > 0 {
		origin = jobs[0].Submit
	}
	nextTick := time.Duration(-1)
	wake := time.Duration(-1) // the energy rule's next chance to start held work
	s.now = origin
	s.idle.at = origin
	for events := 0; s.done < len(jobs); events++ {
		if events&4095 == 0 && s.ctx != nil {
			if err := s.ctx.Err(); err != nil {
				return err
			}
		}
		t := time.Duration(-1)
		if s.nextArr < len(jobs) {
			t = jobs[s.nextArr].Submit
		}
		if len(s.completion) > 0 && (t < 0 || s.completion[0].end < t) {
			t = s.completion[0].end
		}
		if nextTick >= 0 && (t < 0 || nextTick < t) {
			t = nextTick
		}
		if wake >= 0 && (t < 0 || wake < t) {
			t = wake
		}
		if t < 0 {
			return s.stuck()
		}
		if s.energy != nil {
			s.energy.advance(s.now, t, s.tr.Capacity, s.busy)
		}
		s.now = t
		s.idle.advance(t)
		if s.cfg.PerEvent {
			s.oneEvent(t)
		} else {
			for len(s.completion) > 0 && s.completion[0].end == t {
				s.finish(int(s.completion.pop().job))
			}
			for s.nextArr < len(jobs) && jobs[s.nextArr].Submit == t {
				s.arrive()
			}
		}
		if cycle > 0 {
			if nextTick < 0 && s.queued() > 0 {
				// First work since the queue ran dry: the next tick on the grid.
				nextTick = origin + (t-origin+cycle-1)/cycle*cycle
			}
			if t != nextTick {
				s.sample()
				continue
			}
		}
		for p := range s.pools {
			if len(s.pools[p].queue) == 0 || s.pools[p].minSize > s.usableFree(p) {
				// No queued job fits in the idle nodes it may use: no
				// policy can start anything, so the decision is skipped.
				continue
			}
			if err := s.policy.schedule(s, p); err != nil {
				return err
			}
			s.compact(p)
		}
		s.sample()
		if s.energy != nil {
			s.energy.observe(s.tr.Capacity, s.busy)
			if cycle == 0 {
				wake = s.energyWake()
			}
		}
		queued := s.queued()
		if cycle > 0 {
			nextTick = -1
			if queued > 0 {
				nextTick = t + cycle
			}
		}
		if queued > 0 && len(s.completion) == 0 && s.nextArr == len(jobs) && wake < 0 {
			return s.stuck()
		}
	}
	if s.cfg.Progress != nil {
		s.cfg.Progress(s.done, len(jobs))
	}
	return nil
}

// arrive takes the next job of the trace: queued, unless it waits for
// dependencies.
func (s *sim) arrive() {
	j := s.nextArr
	s.nextArr++
	if s.jobs[j].waitDeps == 0 {
		s.enqueue(j)
	}
}

// oneEvent takes one event at t (Config.PerEvent): an arrival if there is
// one, else a completion (a wake or tick at t takes none).
func (s *sim) oneEvent(t time.Duration) {
	switch {
	case s.nextArr < len(s.tr.Jobs) && s.tr.Jobs[s.nextArr].Submit == t:
		s.arrive()
	case len(s.completion) > 0 && s.completion[0].end == t:
		s.finish(int(s.completion.pop().job))
	}
}

func (s *sim) stuck() error {
	left := 0
	var example uint64
	for i := range s.jobs {
		if !s.jobs[i].started {
			if left == 0 {
				example = s.tr.Jobs[i].ID
			}
			left++
		}
	}
	return fmt.Errorf("replay: %s: %d jobs can never start (e.g. job %d): nothing runs and nothing more arrives", s.cfg.Policy, left, example)
}

// enqueue makes job j eligible now and queues it in (submit, id) order.
func (s *sim) enqueue(j int) {
	r := &s.jobs[j]
	r.eligible = max(s.now, s.tr.Jobs[j].Submit)
	r.queued = true
	if obs, ok := s.policy.(arrivalObserver); ok {
		obs.arrived(s, j)
	}
	p := &s.pools[r.pool]
	size := s.tr.Jobs[j].Size
	if p.sizeCount[size]++; len(p.queue) == 0 || size < p.minSize {
		p.minSize = size
	}
	q := p.queue
	// Jobs arrive in queue order except DAG successors released late.
	if n := len(q); n == 0 || int(q[n-1]) < j {
		p.queue = append(q, int32(j))
		return
	}
	at, _ := slices.BinarySearch(q, int32(j))
	p.queue = slices.Insert(q, at, int32(j))
}

// compact drops the jobs started in this pass from p's queue. Starts at the
// front (fcfs, and most starts of the others) only move the slice's start.
func (s *sim) compact(p int) {
	pl := &s.pools[p]
	if pl.startedInPass == 0 {
		return
	}
	k := 0
	for k < len(pl.queue) && s.jobs[pl.queue[k]].started {
		k++
	}
	if k == pl.startedInPass {
		pl.queue = pl.queue[k:]
	} else {
		pl.queue = slices.DeleteFunc(pl.queue, func(j int32) bool { return s.jobs[j].started })
	}
	pl.startedInPass = 0
}

// start runs job j on nodes (nil = the lowest-numbered free nodes of its
// vCluster). The caller has checked that they are free.
func (s *sim) start(j int, nodes []int32) {
	job := &s.tr.Jobs[j]
	r := &s.jobs[j]
	pl := &s.pools[r.pool]
	if job.Size > 1 {
		for _, f := range pl.groupFree {
			if f >= job.Size {
				r.avoidable = true
				break
			}
		}
	}
	if nodes == nil {
		nodes = s.lowestFree(pl, job.Size)
	}
	pl.sizeCount[job.Size]--
	for pl.minSize < len(pl.sizeCount)-1 && pl.sizeCount[pl.minSize] == 0 {
		pl.minSize++
	}
	r.nodes = nodes
	r.started = true
	if s.energy != nil {
		s.energy.started(job, s.now)
	}
	r.start = s.now
	r.end = s.now + job.Runtime
	if pr, ok := s.policy.(predictor); ok {
		r.predicted = pr.predicted(s, j)
	}
	// Distinct groups, counted with a mark per group (this start's
	// generation): linear in the job's size, however many groups it spans.
	s.markGen++
	if s.markGen == 0 {
		clear(s.groupMark)
		s.markGen = 1
	}
	lastGroup, groups := -1, 0
	for _, n := range nodes {
		s.nodeJob[n] = int32(j)
		s.freeBits[n/64] &^= 1 << (n % 64)
		home := &s.pools[s.nodePool[n]]
		home.free--
		g := int(n) / s.groupSize
		home.groupFree[g]--
		if g != lastGroup {
			if s.groupMark[g] != s.markGen {
				s.groupMark[g] = s.markGen
				groups++
			}
			lastGroup = g
		}
	}
	if groups <= 1 {
		r.avoidable = false
	}
	r.groups = int16(min(groups, 1<<15-1))
	s.busy += len(nodes)
	r.runIdx = int32(len(pl.running))
	pl.running = append(pl.running, int32(j))
	pl.startedInPass++
	s.completion.push(jobEnd{end: r.end, job: int32(j)})
}

// lowestFree picks the k lowest-numbered free home nodes of pl.
func (s *sim) lowestFree(pl *pool, k int) []int32 {
	out := make([]int32, 0, k)
	for w := pl.lo / 64; w < len(s.freeBits) && len(out) < k; w++ {
		word := s.freeBits[w]
		for word != 0 && len(out) < k {
			b := bits.TrailingZeros64(word)
			word &^= 1 << b
			n := w*64 + b
			if n < pl.lo {
				continue
			}
			if n >= pl.hi {
				return out
			}
			out = append(out, int32(n))
		}
	}
	return out
}

// finish ends job j now: frees its nodes and releases its successors.
func (s *sim) finish(j int) {
	r := &s.jobs[j]
	r.done = true
	s.done++
	for _, n := range r.nodes {
		s.nodeJob[n] = -1
		s.freeBits[n/64] |= 1 << (n % 64)
		home := &s.pools[s.nodePool[n]]
		home.free++
		home.groupFree[int(n)/s.groupSize]++
	}
	s.busy -= len(r.nodes)
	pl := &s.pools[r.pool]
	if k := r.runIdx; k >= 0 && int(k) < len(pl.running) && pl.running[k] == int32(j) {
		last := pl.running[len(pl.running)-1]
		pl.running[k] = last
		s.jobs[last].runIdx = k
		pl.running = pl.running[:len(pl.running)-1]
	}
	if obs, ok := s.policy.(finishObserver); ok {
		obs.finished(s, j)
	}
	r.nodes = nil
	if s.successors != nil {
		for _, k := range s.successors[j] {
			s.jobs[k].waitDeps--
			if s.jobs[k].waitDeps == 0 && int(k) < s.nextArr {
				s.enqueue(int(k))
			}
		}
	}
	if s.cfg.Progress != nil && s.done%1024 == 0 {
		s.cfg.Progress(s.done, len(s.jobs))
	}
}

// usableFree counts the idle nodes pool p may start work on.
func (s *sim) usableFree(p int) int {
	n := s.pools[p].free
	for _, k := range s.pools[p].lenders {
		n += s.pools[k].free
	}
	return n
}

func (s *sim) queued() int {
	q := 0
	for p := range s.pools {
		q += len(s.pools[p].queue)
	}
	return q
}

// sample records the state after an event: the idle nodes' classes and,
// when asked, the plots' series.
func (s *sim) sample() {
	s.classifyIdle()
	if s.series == nil {
		return
	}
	s.series.add(s.now, s.queued(), s.busy)
}

// estEnd is when job j's walltime runs out (what schedulers plan with).
func (s *sim) estEnd(j int32) time.Duration {
	return s.jobs[j].start + s.tr.Jobs[j].Estimate
}

// jobEnd is a completion event.
type jobEnd struct {
	end time.Duration
	job int32
}

// jobHeap is a binary min-heap of completions by (end, job).
type jobHeap []jobEnd

func (h jobHeap) less(a, b int) bool {
	if h[a].end != h[b].end {
		return h[a].end < h[b].end
	}
	return h[a].job < h[b].job
}

func (h *jobHeap) push(e jobEnd) {
	*h = append(*h, e)
	a := *h
	i := len(a) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !a.less(i, parent) {
			break
		}
		a[i], a[parent] = a[parent], a[i]
		i = parent
	}
}

func (h *jobHeap) pop() jobEnd {
	a := *h
	top := a[0]
	last := len(a) - 1
	a[0] = a[last]
	a = a[:last]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(a) && a.less(l, m) {
			m = l
		}
		if r < len(a) && a.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return top
}
