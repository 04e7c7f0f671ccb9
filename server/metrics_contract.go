package server

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/power"
	"github.com/latticehpc/lattice/quorum"
	"github.com/latticehpc/lattice/vcluster"
)

// This file holds the metrics contract of docs/metrics.md: the series
// dashboards and alert rules depend on. Names are stable; a change needs a
// deprecation path (docs/metrics.md lists renamed series). No per-job
// labels: label values are vCluster names, states, rejection codes, RPC
// method names and status codes.

// ResultCommitted is the result label of a committed proposal item.
const ResultCommitted = "committed"

// contract is the member's contract metrics other than those in metrics.go.
type contract struct {
	proposals     *prometheus.CounterVec   // {vcluster, result}
	wait          *prometheus.HistogramVec // {vcluster}
	grpcRequests  *prometheus.CounterVec   // {method, code}
	grpcSeconds   *prometheus.HistogramVec // {method}
	startScore    *prometheus.HistogramVec // {vcluster}
	leaderChanges prometheus.Counter

	mu      sync.Mutex
	waiting map[string]map[string]int // vcluster → pending reason → count (leader only)
}

func newContract(reg *prometheus.Registry) *contract {
	c := &contract{waiting: map[string]map[string]int{}}
	c.proposals = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lattice_scheduler_proposals_total",
		Help: "Items the schedulers proposed to the quorum (assignments, reclaims, preemptions), by vCluster and result: committed or the rejection code."},
		[]string{"vcluster", "result"})
	c.wait = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lattice_allocation_wait_seconds",
		Help:    "Wait of started allocations from eligible (submit, or end of dependencies) to start, by vCluster.",
		Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 28800, 86400, 172800, 604800}},
		[]string{"vcluster"})
	c.grpcRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lattice_grpc_requests_total",
		Help: "gRPC requests answered by this member, by full method name and status code (streams counted when they end)."},
		[]string{"method", "code"})
	c.grpcSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lattice_grpc_request_duration_seconds",
		Help:    "gRPC request duration on this member, by full method name (unary calls; streams until they end).",
		Buckets: prometheus.ExponentialBuckets(0.0002, 2, 18)}, []string{"method"})
	c.startScore = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lattice_scheduler_placement_score",
		Help:    "Cost-function score (Σ wᵢ·fᵢ, 0..1) of the allocations each cycle planned to start, by vCluster.",
		Buckets: prometheus.LinearBuckets(0.05, 0.05, 20)}, []string{"vcluster"})
	c.leaderChanges = prometheus.NewCounter(prometheus.CounterOpts{Name: "lattice_raft_leader_changes_total",
		Help: "Times this member saw the quorum leader change (including to no leader)."})
	reg.MustRegister(c.proposals, c.wait, c.grpcRequests, c.grpcSeconds, c.startScore, c.leaderChanges)
	return c
}

// observeCycle is the scheduler loops' OnCycle: metrics.go's cycle metrics
// and the contract's placement scores and pending reasons.
func (s *Server) observeCycle(st vcluster.CycleStats) {
	s.metrics.observeCycle(st)
	h := s.contract.startScore.WithLabelValues(st.VCluster)
	for _, sc := range st.StartScores {
		h.Observe(sc)
	}
	s.contract.mu.Lock()
	s.contract.waiting[st.VCluster] = st.Waiting
	s.contract.mu.Unlock()
}

func (c *contract) clearWaiting() {
	c.mu.Lock()
	clear(c.waiting)
	c.mu.Unlock()
}

// observeApplied counts the scheduler's proposals and the waits of started
// allocations; called for every applied command, it counts only on the
// leader (the member that proposed them), so sums over members are right.
func (s *Server) observeApplied(cmd quorum.Command, r *quorum.Result) {
	if s.currentLeader() == nil || r == nil {
		return
	}
	var vc string
	switch c := cmd.(type) {
	case *quorum.AssignBatch:
		vc = c.VCluster
		s.observeWaits(c, r)
	case *quorum.Reclaim:
		vc = c.VCluster
	case *quorum.Preempt:
		vc = c.VCluster
	default:
		return
	}
	if r.Rejection != nil {
		s.contract.proposals.WithLabelValues(vc, string(r.Rejection.Code)).Inc()
		return
	}
	for _, it := range r.Items {
		result := ResultCommitted
		if !it.Committed {
			result = "rejected"
			if it.Rejection != nil {
				result = string(it.Rejection.Code)
			}
		}
		s.contract.proposals.WithLabelValues(vc, result).Inc()
	}
}

func (s *Server) observeWaits(c *quorum.AssignBatch, r *quorum.Result) {
	start := c.Header.Time
	h := s.contract.wait.WithLabelValues(c.VCluster)
	s.view(func(st *quorum.State) {
		for _, it := range r.Items {
			if !it.Committed {
				continue
			}
			a := st.Allocation(it.ID)
			if a == nil {
				continue
			}
			from := a.EligibleTime
			if from.IsZero() {
				from = a.SubmitTime
			}
			if w := start.Sub(from); w >= 0 {
				h.Observe(w.Seconds())
			}
		}
	})
}

func (c *contract) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	c.observeRPC(info.FullMethod, err, start)
	return resp, err
}

func (c *contract) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	start := time.Now()
	err := handler(srv, ss)
	c.observeRPC(info.FullMethod, err, start)
	return err
}

func (c *contract) observeRPC(method string, err error, start time.Time) {
	c.grpcRequests.WithLabelValues(method, status.Code(err).String()).Inc()
	c.grpcSeconds.WithLabelValues(method).Observe(time.Since(start).Seconds())
}

// contractCollector reads committed state and the member's Raft role at
// scrape time.
type contractCollector struct {
	s                                  *Server
	allocs, nodes, draw, budget, ratio *prometheus.Desc
	leader, hasLeader, ready, lag      *prometheus.Desc
	waiting                            *prometheus.Desc
	busy                               *prometheus.Desc
}

func (s *Server) registerContractCollector() {
	s.metrics.reg.MustRegister(&contractCollector{
		s:      s,
		allocs: prometheus.NewDesc("lattice_allocations", "Retained allocations by state and vCluster.", []string{"state", "vcluster"}, nil),
		nodes:  prometheus.NewDesc("lattice_nodes", "Nodes by state and current vCluster.", []string{"state", "vcluster"}, nil),
		busy: prometheus.NewDesc("lattice_nodes_busy", "Nodes running an allocation, by current vCluster (what utilization divides).",
			[]string{"vcluster"}, nil),
		draw: prometheus.NewDesc("lattice_power_draw_watts",
			"Power draw by scope (system, or vcluster/NAME for the nodes a vCluster currently uses) and source (estimated: the idle/busy model).",
			[]string{"scope", "source"}, nil),
		budget: prometheus.NewDesc("lattice_power_budget_watts", "Power budget by scope (system, or vcluster/NAME for a vCluster cap); absent = none.",
			[]string{"scope"}, nil),
		ratio: prometheus.NewDesc("lattice_power_budget_used_ratio", "Estimated draw over budget by scope (only scopes with a budget).",
			[]string{"scope"}, nil),
		leader:    prometheus.NewDesc("lattice_raft_leader", "1 when this member is the quorum leader.", nil, nil),
		hasLeader: prometheus.NewDesc("lattice_raft_has_leader", "1 when this member knows a leader.", nil, nil),
		ready:     prometheus.NewDesc("lattice_member_ready", "1 when this member is ready (/readyz): it knows a leader, is caught up and can persist.", nil, nil),
		lag:       prometheus.NewDesc("lattice_raft_lag_entries", "Committed entries the leader has that this member has not applied.", nil, nil),
		waiting: prometheus.NewDesc("lattice_scheduler_pending_reason", "Pending allocations by vCluster and pending reason at the last cycle (leader only).",
			[]string{"vcluster", "reason"}, nil),
	})
}

func (c *contractCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.allocs, c.nodes, c.busy, c.draw, c.budget, c.ratio, c.leader, c.hasLeader, c.ready, c.lag, c.waiting} {
		ch <- d
	}
}

type stateVC struct{ state, vc string }

func (c *contractCollector) Collect(ch chan<- prometheus.Metric) {
	allocs := map[stateVC]int{}
	nodes := map[stateVC]int{}
	var vcs []string
	type scope struct {
		name         string
		draw, budget int64
	}
	var scopes []scope
	var active, ended quorum.AllocView
	var nodeList []*model.Node
	c.s.view(func(st *quorum.State) {
		for _, v := range st.VClusters() {
			vcs = append(vcs, v.Name)
			scopes = append(scopes, scope{"vcluster/" + v.Name, st.VClusterDrawWatts(v.Name), v.PowerCapWatts})
		}
		scopes = append([]scope{{"system", st.DrawWatts(), st.PowerBudgetWatts}}, scopes...)
		for vc, n := range st.PendingCounts() {
			allocs[stateVC{string(model.StatePending), vc}] = n
		}
		active, ended, nodeList = st.ActiveShared(), st.EndedShared(), st.NodesShared()
	})
	// Counted after the lock, from views the state shares: a scrape of
	// a site with 100,000 allocations does not hold Apply up.
	for _, v := range []quorum.AllocView{active, ended} {
		for a := range v.All {
			allocs[stateVC{string(a.State), a.VCluster}]++
		}
	}
	busy := map[string]int{}
	for _, n := range nodeList {
		nodes[stateVC{string(n.State), n.CurrentVCluster}]++
		if !n.Idle() {
			busy[n.CurrentVCluster]++
		}
	}
	// Every state of every vCluster, zeros included, so rates and sums
	// over states never miss a series.
	for _, vc := range vcs {
		for _, s := range model.AllocStates {
			ch <- prometheus.MustNewConstMetric(c.allocs, prometheus.GaugeValue, float64(allocs[stateVC{string(s), vc}]), string(s), vc)
			delete(allocs, stateVC{string(s), vc})
		}
		for _, s := range model.NodeStates {
			ch <- prometheus.MustNewConstMetric(c.nodes, prometheus.GaugeValue, float64(nodes[stateVC{string(s), vc}]), string(s), vc)
			delete(nodes, stateVC{string(s), vc})
		}
	}
	for k, n := range allocs { // of vClusters since removed
		ch <- prometheus.MustNewConstMetric(c.allocs, prometheus.GaugeValue, float64(n), k.state, k.vc)
	}
	for k, n := range nodes {
		ch <- prometheus.MustNewConstMetric(c.nodes, prometheus.GaugeValue, float64(n), k.state, k.vc)
	}
	for _, vc := range vcs { // zeros included, as lattice_nodes
		ch <- prometheus.MustNewConstMetric(c.busy, prometheus.GaugeValue, float64(busy[vc]), vc)
		delete(busy, vc)
	}
	for vc, n := range busy {
		ch <- prometheus.MustNewConstMetric(c.busy, prometheus.GaugeValue, float64(n), vc)
	}
	for _, sc := range scopes {
		ch <- prometheus.MustNewConstMetric(c.draw, prometheus.GaugeValue, float64(sc.draw), sc.name, "estimated")
		if sc.budget > 0 {
			ch <- prometheus.MustNewConstMetric(c.budget, prometheus.GaugeValue, float64(sc.budget), sc.name)
			ch <- prometheus.MustNewConstMetric(c.ratio, prometheus.GaugeValue, power.UsedFraction(sc.draw, sc.budget), sc.name)
		}
	}
	q := c.s.q
	leaderID, _ := q.Leader()
	ch <- prometheus.MustNewConstMetric(c.leader, prometheus.GaugeValue, boolFloat(q.IsLeader()))
	ch <- prometheus.MustNewConstMetric(c.hasLeader, prometheus.GaugeValue, boolFloat(leaderID != ""))
	r := c.s.readiness()
	ch <- prometheus.MustNewConstMetric(c.ready, prometheus.GaugeValue, boolFloat(r.Ready))
	ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(r.Lag))
	if c.s.currentLeader() != nil {
		c.s.contract.mu.Lock()
		names := make([]string, 0, len(c.s.contract.waiting))
		for vc := range c.s.contract.waiting {
			names = append(names, vc)
		}
		sort.Strings(names)
		for _, vc := range names {
			for reason, n := range c.s.contract.waiting[vc] {
				ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(n), vc, reason)
			}
		}
		c.s.contract.mu.Unlock()
	}
}
