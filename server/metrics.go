package server

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/latticehpc/lattice/quorum"
	"github.com/latticehpc/lattice/vcluster"
)

// metrics are this member's Prometheus metrics, on a registry of its own.
// Names follow lattice_<subsystem>_<name>_<unit>; no per-job labels.
type metrics struct {
	reg            *prometheus.Registry
	isLeader       prometheus.Gauge
	applied        *prometheus.CounterVec
	proposeSeconds *prometheus.HistogramVec
	assignRejected *prometheus.CounterVec
	submitted      prometheus.Counter
	dispatched     prometheus.Counter
	agents         prometheus.Gauge
	cycleSeconds   *prometheus.HistogramVec
	solveSeconds   *prometheus.HistogramVec
	started        *prometheus.CounterVec
	backfilled     *prometheus.CounterVec
	deferred       *prometheus.CounterVec
	predAccuracy   *prometheus.GaugeVec
	predWalltime   *prometheus.GaugeVec
	predUnder      *prometheus.GaugeVec
	rpcSeconds     *prometheus.HistogramVec
	reclaims       *prometheus.CounterVec
	preemptions    *prometheus.CounterVec
	checkpoints    *prometheus.CounterVec
	loopPanics     *prometheus.CounterVec

	mu     sync.Mutex
	cycles map[string]lastCycle
}

type lastCycle struct {
	at   time.Time
	secs float64
}

func newMetrics(reg *prometheus.Registry) *metrics {
	m := &metrics{reg: reg, cycles: map[string]lastCycle{}}
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	m.isLeader = prometheus.NewGauge(prometheus.GaugeOpts{Name: "lattice_quorum_is_leader", Help: "1 when this member leads the quorum."})
	m.applied = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lattice_quorum_commands_applied_total", Help: "Commands applied to the state machine, by type."}, []string{"command"})
	m.proposeSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lattice_quorum_propose_duration_seconds", Help: "Time from proposal to applied result on the leader.",
		Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16)}, []string{"command"})
	m.assignRejected = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lattice_scheduler_assignments_rejected_total", Help: "Proposed assignments the quorum rejected, by code."}, []string{"code"})
	m.submitted = prometheus.NewCounter(prometheus.CounterOpts{Name: "lattice_allocations_submitted_total", Help: "Allocations submitted through this member."})
	m.dispatched = prometheus.NewCounter(prometheus.CounterOpts{Name: "lattice_dispatcher_assignments_sent_total", Help: "Assignments streamed to agents."})
	m.agents = prometheus.NewGauge(prometheus.GaugeOpts{Name: "lattice_dispatcher_agents_connected", Help: "Agents connected to this member."})
	m.cycleSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lattice_scheduler_cycle_duration_seconds", Help: "Whole scheduling cycle, snapshot to committed batch.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"vcluster"})
	m.solveSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lattice_scheduler_solve_duration_seconds", Help: "Solver time per cycle.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}, []string{"vcluster"})
	m.started = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lattice_scheduler_allocations_started_total", Help: "Assignments committed, by vCluster."}, []string{"vcluster"})
	m.backfilled = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lattice_scheduler_allocations_backfilled_total", Help: "Assignments proposed as backfill, by vCluster."}, []string{"vcluster"})
	m.deferred = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lattice_scheduler_starts_deferred_total", Help: "Planned starts left to a following cycle by --max-starts-per-cycle, by vCluster."}, []string{"vcluster"})
	m.predAccuracy = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lattice_scheduler_prediction_accuracy", Help: "Mean accuracy, min(p, r)/max(p, r), of the runtime predictor on the vCluster's recent completions, each predicted from those that ended before it."}, []string{"vcluster"})
	m.predWalltime = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lattice_scheduler_walltime_accuracy", Help: "Mean accuracy, min(w, r)/max(w, r), of the requested walltimes on the same completions (what the predictor has to beat)."}, []string{"vcluster"})
	m.predUnder = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lattice_scheduler_prediction_underpredicted_ratio", Help: "Share of the same completions that outlived their prediction."}, []string{"vcluster"})
	m.rpcSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lattice_api_request_duration_seconds", Help: "API calls by method and status code.",
		Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16)}, []string{"method", "code"})
	m.reclaims = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lattice_scheduler_reclaims_total",
		Help: "Reclaims of lent nodes committed, by home vCluster and the vCluster the nodes were taken from."}, []string{"vcluster", "from"})
	m.preemptions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lattice_scheduler_preemptions_total",
		Help: "Allocations preempted by higher-class work, by vCluster."}, []string{"vcluster"})
	m.checkpoints = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lattice_checkpoints_total",
		Help: "Checkpoint requests by vCluster, reason (reclaim, preempt, user, proactive, signal) and result (requested, acked, timed_out, failed, exited)."},
		[]string{"vcluster", "reason", "result"})
	m.loopPanics = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lattice_scheduler_loop_panics_total",
		Help: "Scheduling cycles that panicked and were recovered, by vCluster."}, []string{"vcluster"})
	for _, c := range []prometheus.Collector{m.reclaims, m.preemptions, m.checkpoints, m.loopPanics} {
		f(c)
	}
	for _, c := range []prometheus.Collector{m.isLeader, m.applied, m.proposeSeconds, m.assignRejected, m.submitted, m.dispatched, m.agents,
		m.cycleSeconds, m.solveSeconds, m.started, m.backfilled, m.deferred, m.predAccuracy, m.predWalltime, m.predUnder, m.rpcSeconds,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		f(c)
	}
	return m
}

func (m *metrics) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	m.rpcSeconds.WithLabelValues(info.FullMethod, status.Code(err).String()).Observe(time.Since(start).Seconds())
	return resp, err
}

// clearPrediction drops the prediction gauges when this member stops
// leading: only the leader's loops learn the predictor.
func (m *metrics) clearPrediction() {
	m.predAccuracy.Reset()
	m.predWalltime.Reset()
	m.predUnder.Reset()
}

func (m *metrics) observeCycle(c vcluster.CycleStats) {
	m.cycleSeconds.WithLabelValues(c.VCluster).Observe(c.Total.Seconds())
	m.solveSeconds.WithLabelValues(c.VCluster).Observe(c.Duration.Seconds())
	m.started.WithLabelValues(c.VCluster).Add(float64(c.Committed))
	m.backfilled.WithLabelValues(c.VCluster).Add(float64(c.Backfilled))
	m.deferred.WithLabelValues(c.VCluster).Add(float64(c.Deferred))
	if p := c.Prediction; p.Runs > 0 {
		m.predAccuracy.WithLabelValues(c.VCluster).Set(p.Prediction)
		m.predWalltime.WithLabelValues(c.VCluster).Set(p.Walltime)
		m.predUnder.WithLabelValues(c.VCluster).Set(p.Underpredicted)
	}
	m.mu.Lock()
	m.cycles[c.VCluster] = lastCycle{at: time.Now(), secs: c.Total.Seconds()}
	m.mu.Unlock()
}

func (m *metrics) lastCycle(vc string) (time.Time, float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.cycles[vc]
	return c.at, c.secs
}

// stateCollector reads committed state at scrape time. lattice_allocations,
// lattice_nodes and lattice_power_budget_watts (now with vcluster and scope
// labels) moved to the contract collector in metrics_contract.go.
type stateCollector struct {
	s                       *Server
	draw, version, index    *prometheus.Desc
	term, pending, borrowed *prometheus.Desc
}

func (m *metrics) registerQuorum(s *Server) {
	m.reg.MustRegister(&stateCollector{
		s:       s,
		draw:    prometheus.NewDesc("lattice_power_estimated_watts", "Deprecated: lattice_power_draw_watts{scope=\"system\",source=\"estimated\"}. Estimated draw of the whole system.", nil, nil),
		version: prometheus.NewDesc("lattice_quorum_state_version", "State version of the applied state.", nil, nil),
		index:   prometheus.NewDesc("lattice_quorum_applied_index", "Last Raft index applied here.", nil, nil),
		term:    prometheus.NewDesc("lattice_quorum_term", "Current Raft term.", nil, nil),
		pending: prometheus.NewDesc("lattice_scheduler_pending_allocations", "Pending allocations by vCluster.", []string{"vcluster"}, nil),
		borrowed: prometheus.NewDesc("lattice_nodes_borrowed", "Nodes lent by their home vCluster to the vCluster currently using them.",
			[]string{"home", "current"}, nil),
	})
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.draw, c.version, c.index, c.term, c.pending, c.borrowed} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	var draw int64
	var version uint64
	pending := map[string]int{}
	borrowed := map[quorum.BorrowKey]int{}
	c.s.view(func(st *quorum.State) {
		for _, h := range st.VClusters() {
			for _, cur := range st.VClusters() {
				if n := st.Borrowed(h.Name, cur.Name); h.Name != cur.Name {
					borrowed[quorum.BorrowKey{Home: h.Name, Current: cur.Name}] = n
				}
			}
		}
		draw, version = st.DrawWatts(), st.Version
		for _, v := range st.VClusters() {
			pending[v.Name] = st.PendingCount(v.Name)
		}
	})
	for k, n := range borrowed {
		ch <- prometheus.MustNewConstMetric(c.borrowed, prometheus.GaugeValue, float64(n), k.Home, k.Current)
	}
	for v, n := range pending {
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(n), v)
	}
	ch <- prometheus.MustNewConstMetric(c.draw, prometheus.GaugeValue, float64(draw))
	ch <- prometheus.MustNewConstMetric(c.version, prometheus.GaugeValue, float64(version))
	ch <- prometheus.MustNewConstMetric(c.index, prometheus.GaugeValue, float64(c.s.q.AppliedIndex()))
	ch <- prometheus.MustNewConstMetric(c.term, prometheus.GaugeValue, float64(c.s.q.Term()))
}
