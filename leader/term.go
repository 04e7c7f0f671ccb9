package leader

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/latticehpc/lattice/checkpoint"
	"github.com/latticehpc/lattice/quorum"
	"github.com/latticehpc/lattice/solver"
	"github.com/latticehpc/lattice/vcluster"
)

// Host is what a term's loops need of the member that leads: proposing
// commands and reading committed state.
type Host interface {
	// Propose stamps the command's time (when unset) and proposes it.
	Propose(ctx context.Context, c quorum.Command) (*quorum.Result, error)
	// View gives read access to committed state.
	View(fn func(*quorum.State))
	// Changed returns a channel closed at the next committed change.
	Changed() <-chan struct{}
}

// TermConfig is what the member's configuration says about its leader-only
// loops. Zero durations are not defaulted here: the member's Config does it.
type TermConfig struct {
	Clock func() time.Time // mints command times
	Log   *slog.Logger

	// KillGrace is the SIGTERM→SIGKILL grace sent with cancellations.
	KillGrace time.Duration
	// Liveness (liveness_loop.go): Degraded after DegradedAfter of silence,
	// failed after NodeTimeout unless held (Judge); nothing is marked for
	// LivenessGrace after the term begins.
	DegradedAfter, NodeTimeout, LivenessGrace time.Duration
	MassSilenceFraction                       float64
	// WalltimeBackstop: backstop.go. InteractiveIdleTimeout: idle.go
	// (<= 0: never).
	WalltimeBackstop       time.Duration
	InteractiveIdleTimeout time.Duration
	// MeasuredPowerMaxAge (negative: never committed) and
	// MeasuredPowerInterval: measured_power.go.
	MeasuredPowerMaxAge, MeasuredPowerInterval time.Duration
	// Retention, HistoryRetention, PruneInterval: prune.go.
	Retention, HistoryRetention, PruneInterval time.Duration
	// Checkpoint, BrokerInterval (<= 0: 15 s), NoProactiveCheckpoints:
	// broker.go.
	Checkpoint             checkpoint.Params
	BrokerInterval         time.Duration
	NoProactiveCheckpoints bool
	// Energy is the site's price schedule (nil = none).
	Energy *solver.Energy
	// MaxStartsPerCycle and LoopProcs: schedulers.go.
	MaxStartsPerCycle int
	LoopProcs         bool
	// OnCycle sees every scheduling cycle's figures (metrics).
	OnCycle func(vcluster.CycleStats)
	// Completed feeds the schedulers' runtime predictor (kept across terms).
	Completed *Completed
	// Mail runs the site's mail hook for agents' reports (nil: none).
	Mail *Mail
	// ServiceSamples (the heartbeats' scrapes, kept by the member),
	// ServiceMetrics, ServiceInterval and ServiceBackoffReset: the services
	// controller (services.go; zero durations take its defaults).
	ServiceSamples                       *ServiceSamples
	ServiceMetrics                       *ServiceMetrics
	ServiceInterval, ServiceBackoffReset time.Duration
	Metrics                              Metrics
}

// Metrics are the series the loops count into; the member registers them
// (nil fields count nowhere).
type Metrics struct {
	Dispatched     prometheus.Counter     // assignments streamed to agents
	Checkpoints    *prometheus.CounterVec // vcluster, reason, result
	LoopPanics     *prometheus.CounterVec // vcluster
	AssignRejected *prometheus.CounterVec // code
	Reclaims       *prometheus.CounterVec // home, from
	Preemptions    *prometheus.CounterVec // vcluster
	Liveness       *LivenessMetrics
}

func (m *Metrics) defaults() {
	if m.Dispatched == nil {
		m.Dispatched = prometheus.NewCounter(prometheus.CounterOpts{Name: "unregistered"})
	}
	vec := func(v **prometheus.CounterVec, labels ...string) {
		if *v == nil {
			*v = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "unregistered"}, labels)
		}
	}
	vec(&m.Checkpoints, "vcluster", "reason", "result")
	vec(&m.LoopPanics, "vcluster")
	vec(&m.AssignRejected, "code")
	vec(&m.Reclaims, "vcluster", "from")
	vec(&m.Preemptions, "vcluster")
	if m.Liveness == nil {
		m.Liveness = NewLivenessMetrics(prometheus.NewRegistry())
	}
}

// Term is one term's leader state, which the leader-only loops share: one
// scheduler per vCluster, the dispatcher (assignments and cancellations to
// agents, agent reports to the log), node liveness, measured power and
// the holds on nodes that connected agents claim. It lives from a won
// election (after a barrier) until leadership is lost: the member builds
// it in BeginTerm, returns its Loops, and calls End in EndTerm.
type Term struct {
	host   Host
	cfg    TermConfig
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	since  time.Time

	sched *schedulers
	disp  *dispatcher
	live  *liveness
	power measuredPower

	panicMu     sync.Mutex
	panicCounts map[string]int64 // recovered scheduler panics by vCluster
}

// NewTerm begins a term; ctx ends with it (End cancels it too).
func NewTerm(ctx context.Context, host Host, cfg TermConfig) *Term {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = func() time.Time { return time.Now().UTC() }
	}
	if cfg.Completed == nil {
		cfg.Completed = NewCompleted(host.View)
	}
	cfg.Metrics.defaults()
	ctx, cancel := context.WithCancel(ctx)
	t := &Term{host: host, cfg: cfg, log: cfg.Log, ctx: ctx, cancel: cancel, since: time.Now()}
	t.sched = newSchedulers(t)
	t.disp = newDispatcher(t)
	t.live = newLiveness(t)
	return t
}

// Context ends with the term.
func (t *Term) Context() context.Context { return t.ctx }

// Since is when the term began.
func (t *Term) Since() time.Time { return t.since }

// Loops names every leader-only loop of the term, for the Lifecycle.
func (t *Term) Loops() []Loop {
	return []Loop{
		{Name: "dispatcher", Run: t.disp.run},
		{Name: "reports", Run: t.disp.batchReports},
		{Name: "liveness", Run: t.live.run},
		{Name: "schedulers", Run: t.sched.manage},
		{Name: "prune", Run: t.prune},
		{Name: "broker", Run: t.broker},
		{Name: "walltime-backstop", Run: t.walltimeBackstop},
		{Name: "measured-power", Run: t.commitMeasuredPower},
		{Name: "idle-interactive", Run: t.endIdleInteractive},
		{Name: "resume-suspended", Run: t.resumeSuspended},
		{Name: "services", Run: t.serviceLoop},
		{Name: "cluster-id", Run: t.nameCluster},
	}
}

// End cancels the term and closes the agents' streams (they reconnect to
// the next leader).
func (t *Term) End() {
	t.cancel()
	t.disp.closeAll()
}

// recordPanic counts a scheduling cycle that panicked and was recovered;
// the other loops keep running.
func (t *Term) recordPanic(vc string, v any) {
	t.panicMu.Lock()
	if t.panicCounts == nil {
		t.panicCounts = map[string]int64{}
	}
	t.panicCounts[vc]++
	t.panicMu.Unlock()
	t.cfg.Metrics.LoopPanics.WithLabelValues(vc).Inc()
}

// Panics is how many cycles of vCluster vc panicked in this term.
func (t *Term) Panics(vc string) int64 {
	t.panicMu.Lock()
	defer t.panicMu.Unlock()
	return t.panicCounts[vc]
}

// OnApply wakes the loops that care about a committed command.
func (t *Term) OnApply(c quorum.Command, r *quorum.Result) {
	switch c.(type) {
	case *quorum.Submit, *quorum.UpdateAllocs, *quorum.Cancel, *quorum.SetNodeState,
		*quorum.RegisterNodes, *quorum.SetVCluster, *quorum.SetTenant, *quorum.SetPowerBudget:
		t.sched.wakeAll()
	}
}

// Scheduler is vCluster name's loop in this term (nil: none yet).
func (t *Term) Scheduler(name string) *vcluster.Loop { return t.sched.loop(name) }

// WakeAll wakes every scheduler loop.
func (t *Term) WakeAll() { t.sched.wakeAll() }

// Heard records that nodes are alive now; LastSeen is when a node was
// last heard in this term (zero: not yet).
func (t *Term) Heard(nodes []string)           { t.live.heard(nodes) }
func (t *Term) LastSeen(node string) time.Time { return t.live.lastSeen(node) }

// RecordPower keeps the draw an agent measured on its nodes; MeasuredPower
// totals the measurements taken since, FreshPower lists them by node.
func (t *Term) RecordPower(nodes []string, watts []int32, now time.Time) {
	t.power.record(nodes, watts, now)
}
func (t *Term) MeasuredPower(since time.Time) (watts int64, nodes int32) { return t.power.total(since) }
func (t *Term) FreshPower(since time.Time) map[string]int                { return t.power.fresh(since) }

// propose proposes with the term's context bounds applied by the caller.
func (t *Term) propose(ctx context.Context, c quorum.Command) (*quorum.Result, error) {
	return t.host.Propose(ctx, c)
}

func (t *Term) view(fn func(*quorum.State)) { t.host.View(fn) }
