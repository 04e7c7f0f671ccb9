package server

import (
	"context"
	"time"

	"github.com/latticehpc/lattice/leader"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
	"github.com/latticehpc/lattice/solver"
)

// DefaultMaxStartsPerCycle is latticed's --max-starts-per-cycle
// (leader.DefaultMaxStartsPerCycle).
const DefaultMaxStartsPerCycle = leader.DefaultMaxStartsPerCycle

// leaderState is one term as this member's handlers see it: package
// leader's Term (the leader-only loops and their state: schedulers,
// dispatcher and agents' streams, liveness, measured power) and what the
// handlers keep for the term themselves.
type leaderState struct {
	*leader.Term
	steps stepRegistry     // step sessions waiting for agents' events (step_service.go)
	terms terminalRegistry // attached terminals and pty steps' input (terminal_service.go)
	usage usageWaiters     // live usage questions to agents (usage_service.go)
}

// BeginTerm implements leader.Member: after a won election and its
// barrier it builds this term's leader state and names every leader-only
// loop; the lifecycle (package leader) runs them and cancels them when
// leadership is lost.
func (s *Server) BeginTerm(ctx context.Context) []leader.Loop {
	// A backup staged by `latticectl quorum restore` is installed before
	// anything else can touch the state.
	if restored, err := s.q.ApplyPendingRestore(); err != nil {
		s.log.Error("restoring the staged backup failed; the cluster keeps its state", "err", err)
	} else if restored {
		s.log.Info("restored the staged backup")
	}
	l := &leaderState{Term: leader.NewTerm(ctx, termHost{s}, s.termConfig())}
	s.mu.Lock()
	s.leader = l
	s.mu.Unlock()
	s.ensureConfig(l.Context())
	return l.Loops()
}

// termConfig is what the member's Config says about the leader's loops.
func (s *Server) termConfig() leader.TermConfig {
	c := s.cfg
	return leader.TermConfig{
		Clock: c.Clock, Log: s.log, KillGrace: c.KillGrace,
		DegradedAfter: c.DegradedAfter, NodeTimeout: c.DownAfter, LivenessGrace: c.LivenessGrace, MassSilenceFraction: c.MassSilenceFraction,
		WalltimeBackstop: c.WalltimeBackstop, InteractiveIdleTimeout: c.InteractiveIdleTimeout,
		MeasuredPowerMaxAge: c.MeasuredPowerMaxAge, MeasuredPowerInterval: c.MeasuredPowerInterval,
		Retention: c.Retention, HistoryRetention: c.HistoryRetention, PruneInterval: c.PruneInterval,
		Checkpoint: c.Checkpoint, BrokerInterval: c.BrokerInterval, NoProactiveCheckpoints: c.NoProactiveCheckpoints,
		Energy: c.Energy, MaxStartsPerCycle: c.MaxStartsPerCycle, LoopProcs: c.LoopProcs,
		OnCycle: s.observeCycle, Completed: s.completed, Mail: s.mail,
		ServiceSamples: s.serviceSamples, ServiceMetrics: s.serviceMetrics, ServiceInterval: c.ServiceInterval, ServiceBackoffReset: c.ServiceBackoffReset,
		Metrics: leader.Metrics{
			Dispatched: s.metrics.dispatched, Checkpoints: s.metrics.checkpoints, LoopPanics: s.metrics.loopPanics,
			AssignRejected: s.metrics.assignRejected, Reclaims: s.metrics.reclaims, Preemptions: s.metrics.preemptions,
			Liveness: s.liveMetrics,
		},
	}
}

// termHost is the member as a term's loops see it (leader.Host).
type termHost struct{ s *Server }

func (h termHost) Propose(ctx context.Context, c quorum.Command) (*quorum.Result, error) {
	return h.s.propose(ctx, c)
}
func (h termHost) View(fn func(*quorum.State)) { h.s.view(fn) }
func (h termHost) Changed() <-chan struct{}    { return h.s.fsm.Changed() }

// EndTerm implements leader.Member: the term's loops were cancelled; the
// agents' streams close (they reconnect to the next leader).
func (s *Server) EndTerm() {
	s.mu.Lock()
	l := s.leader
	s.leader = nil
	s.mu.Unlock()
	if l == nil {
		return
	}
	l.End()
}

// Changed implements leader.Member.
func (s *Server) Changed(leading bool) {
	s.metrics.isLeader.Set(boolFloat(leading))
	if !leading {
		s.contract.clearWaiting()
		s.metrics.clearPrediction()
	}
}

// ensureConfig writes what a fresh cluster needs: this member's addresses,
// the initial vClusters, the default vCluster and power budget.
func (s *Server) ensureConfig(ctx context.Context) {
	var haveMember bool
	var vcCount int
	var defaultVC string
	var budget int64
	var missingTenants []string
	s.view(func(st *quorum.State) {
		for _, t := range s.cfg.Tenants {
			if st.Tenant(t) == nil {
				missingTenants = append(missingTenants, t)
			}
		}
		m, ok := st.Member(s.cfg.ID)
		haveMember = ok && m.APIAddr == s.APIAddr() && m.RaftAddr == s.q.RaftAddr()
		vcCount = len(st.VClusters())
		defaultVC = st.DefaultVCluster
		budget = st.PowerBudgetWatts
	})
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if !haveMember {
		_, err := s.propose(ctx, &quorum.SetMember{Member: quorum.Member{ID: s.cfg.ID, RaftAddr: s.q.RaftAddr(), APIAddr: s.APIAddr()}})
		if err != nil {
			s.log.Warn("publish member addresses", "err", err)
		}
	}
	if vcCount == 0 {
		for _, vc := range s.cfg.VClusters {
			if r, err := s.propose(ctx, &quorum.SetVCluster{VCluster: vc}); err != nil || r.Rejection != nil {
				s.log.Error("create vcluster", "vcluster", vc.Name, "err", err, "rejection", r)
			}
		}
	}
	if s.cfg.DefaultVCluster != "" && defaultVC != s.cfg.DefaultVCluster && vcCount == 0 {
		_, _ = s.propose(ctx, &quorum.SetDefaults{DefaultVCluster: s.cfg.DefaultVCluster})
	}
	for _, t := range missingTenants {
		if r, err := s.propose(ctx, &quorum.SetTenant{Tenant: model.Tenant{Name: t}}); err != nil || r.Rejection != nil {
			s.log.Warn("create tenant", "tenant", t, "err", err, "rejection", r)
		}
	}
	if s.cfg.PowerBudgetWatts > 0 && budget == 0 {
		if r, err := s.propose(ctx, &quorum.SetPowerBudget{Watts: s.cfg.PowerBudgetWatts}); err != nil || r.Rejection != nil {
			s.log.Warn("set power budget", "err", err, "rejection", r)
		}
	}
}

// newVCluster returns a vCluster of type t with that type's defaults.
func newVCluster(name string, t model.VClusterType) model.VCluster {
	profile := solver.ProfileForType(t)
	w, _ := solver.Profile(profile)
	vc := model.VCluster{
		Name: name, Type: t, WeightsProfile: profile, Weights: w,
		CycleInterval: model.DefaultCycleInterval, MinInterval: model.DefaultMinInterval,
		ReservationDepth: model.DefaultReservationDepth,
		Algorithm:        model.AlgorithmFor(t), MaxLendFraction: 1,
		ReclaimGrace: model.DefaultReclaimGrace, ReclaimBackoff: model.DefaultReclaimBackoff,
		PreemptHorizon: model.DefaultPreemptHorizon,
	}
	switch t {
	case model.TypeSensitive:
		// Sensitive nodes are never lent, sensitive work never borrows and
		// is never preempted.
	default:
		// Lent nodes come back through reclaim (checkpoint, then stop and
		// requeue), so every other type lends its idle nodes; only work
		// that can checkpoint runs on borrowed ones.
		vc.AllowLending, vc.AllowBorrowing = true, true
		vc.Preemption, vc.CheckpointableOnlyOnBorrowed = true, true
	}
	if t == model.TypeInteractive {
		vc.ReclaimGrace = 30 * time.Second // interactive users wait for their nodes
	}
	return vc
}
