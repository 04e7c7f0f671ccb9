package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/quorum"
)

// Health of a member, for /readyz, the gRPC health service, `quorum status`
// and lattice_member_ready. A member is ready when it knows a leader, has
// applied what the leader committed (within MaxLag entries) and can
// persist: a probe file in its data dir can be written and synced, and the
// disk has room. A follower whose disk is full keeps hearing heartbeats, so
// its Raft role alone would call it healthy while it falls ever further
// behind; the lag and the probe catch it.

// Health service names: "" is the member's readiness; LeaderService is
// SERVING only on the leader, for load balancers that must reach it.
const LeaderService = "lattice.v1.Leader"

const (
	// DefaultMaxLag is how many committed entries a ready member may have
	// left to apply.
	DefaultMaxLag = 100
	// minFreeBytes is the free space below which a member cannot persist.
	minFreeBytes = 64 << 20
	healthPeriod = time.Second
)

// Readiness is a member's health verdict.
type Readiness struct {
	Ready   bool
	Problem string // why not ready; empty when ready
	Role    string
	Leader  string
	Applied uint64
	// LeaderCommit is the leader's commit index as last seen; Lag =
	// LeaderCommit - Applied (0 when caught up or unknown).
	LeaderCommit uint64
	Lag          uint64
}

type healthState struct {
	s  *Server
	hs *health.Server

	mu           sync.Mutex
	persistErr   error
	leaderCommit uint64
	leaderErr    error
	// about is the leader the last refresh asked (leaderCommit and
	// leaderErr are about it); lastLeader detects changes.
	about      string
	lastLeader string
	checked    bool
}

func newHealthState(s *Server) *healthState {
	h := &healthState{s: s, hs: health.NewServer()}
	h.hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	h.hs.SetServingStatus(LeaderService, healthpb.HealthCheckResponse_NOT_SERVING)
	return h
}

func (h *healthState) register(g *grpc.Server) { healthpb.RegisterHealthServer(g, h.hs) }

// run refreshes the probe, the leader's commit index and the gRPC health
// statuses every second.
func (h *healthState) run(ctx context.Context) {
	tick := time.NewTicker(healthPeriod)
	defer tick.Stop()
	for {
		h.refresh(ctx)
		select {
		case <-ctx.Done():
			h.hs.Shutdown()
			return
		case <-tick.C:
		}
	}
}

func (h *healthState) refresh(ctx context.Context) {
	s := h.s
	perr := probePersist(s.cfg.DataDir)
	if perr == nil && s.q.DiskFull() {
		perr = errors.New("disk full (fault injection)")
	}
	leaderID, _ := s.q.Leader()
	var commit uint64
	var lerr error
	switch {
	case s.q.IsLeader():
		commit = s.q.CommitIndex()
	case leaderID != "":
		commit, lerr = h.askLeaderCommit(ctx)
	}
	h.mu.Lock()
	h.persistErr, h.leaderErr, h.leaderCommit, h.about, h.checked = perr, lerr, commit, leaderID, true
	changed := leaderID != h.lastLeader
	h.lastLeader = leaderID
	h.mu.Unlock()
	if changed {
		s.contract.leaderChanges.Inc()
		s.log.Info("quorum leader changed", "leader", leaderID)
	}
	r := s.readiness()
	h.hs.SetServingStatus("", servingStatus(r.Ready))
	h.hs.SetServingStatus(LeaderService, servingStatus(s.q.IsLeader() && r.Ready))
}

func servingStatus(ok bool) healthpb.HealthCheckResponse_ServingStatus {
	if ok {
		return healthpb.HealthCheckResponse_SERVING
	}
	return healthpb.HealthCheckResponse_NOT_SERVING
}

// askLeaderCommit asks the leader for its commit index (QuorumStatus about
// itself only).
func (h *healthState) askLeaderCommit(ctx context.Context) (uint64, error) {
	conn, err := h.s.fwd.leaderConn()
	if err != nil {
		return 0, err
	}
	cctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(h.s.memberContext(ctx), selfOnlyKey, "1"), 700*time.Millisecond)
	defer cancel()
	r, err := latticev1.NewAdminServiceClient(conn).QuorumStatus(cctx, &latticev1.QuorumStatusRequest{})
	if err != nil {
		return 0, fmt.Errorf("leader unreachable: %v", err)
	}
	return r.CommitIndex, nil
}

// probePersist writes, syncs and removes a small file in dir, and checks the
// free space of its file system.
func probePersist(dir string) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err == nil {
		if free := st.Bavail * uint64(st.Bsize); free < minFreeBytes {
			return fmt.Errorf("disk nearly full: %d MiB free in %s", free>>20, dir)
		}
	}
	path := filepath.Join(dir, ".lattice-write-probe")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("data dir not writable: %v", err)
	}
	_, werr := f.Write([]byte("probe\n"))
	serr := f.Sync()
	cerr := f.Close()
	_ = os.Remove(path)
	if err := errors.Join(werr, serr, cerr); err != nil {
		return fmt.Errorf("data dir not writable: %v", err)
	}
	return nil
}

// readiness is the member's verdict from the latest refresh and its live
// Raft state.
func (s *Server) readiness() Readiness {
	q := s.q
	leaderID, _ := q.Leader()
	r := Readiness{Role: q.State(), Leader: leaderID, Applied: q.AppliedIndex()}
	h := s.health
	h.mu.Lock()
	perr, lerr, commit, checked, about := h.persistErr, h.leaderErr, h.leaderCommit, h.checked, h.about
	h.mu.Unlock()
	switch {
	case q.IsLeader():
		commit, lerr = q.CommitIndex(), nil
	case about != leaderID:
		// The leader changed since the last refresh (a failover): what
		// it learnt is about the old one. Unknown until the next refresh.
		commit, lerr = 0, nil
	}
	r.LeaderCommit = commit
	if commit > r.Applied {
		r.Lag = commit - r.Applied
	}
	switch {
	case !checked:
		r.Problem = "starting"
	case leaderID == "" || (r.Role != "leader" && r.Role != "follower"):
		r.Problem = "no leader (" + r.Role + ")"
	case perr != nil:
		r.Problem = "cannot persist: " + perr.Error()
	case lerr != nil:
		r.Problem = lerr.Error()
	case r.Lag > DefaultMaxLag:
		r.Problem = fmt.Sprintf("%d entries behind the leader", r.Lag)
	default:
		// The tenants this member was configured to create: until the
		// leader has committed them, submissions to them are refused.
		if missing := s.missingTenants(); len(missing) > 0 {
			r.Problem = "configured tenants not created yet: " + strings.Join(missing, ",")
		}
	}
	r.Ready = r.Problem == ""
	return r
}

// missingTenants lists the configured tenants (Config.Tenants) the state
// does not have yet.
func (s *Server) missingTenants() []string {
	var missing []string
	s.view(func(st *quorum.State) {
		for _, t := range s.cfg.Tenants {
			if st.Tenant(t) == nil {
				missing = append(missing, t)
			}
		}
	})
	return missing
}

// healthHandlers adds /healthz (the process is alive and serving) and
// /readyz (ready, see Readiness; 503 with the problem otherwise).
func (s *Server) healthHandlers(mux *http.ServeMux) {
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		r := s.readiness()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !r.Ready {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: %s\nrole %s, leader %q, applied %d, leader commit %d\n", r.Problem, r.Role, r.Leader, r.Applied, r.LeaderCommit)
			return
		}
		fmt.Fprintf(w, "ready\nrole %s, leader %q, applied %d, leader commit %d\n", r.Role, r.Leader, r.Applied, r.LeaderCommit)
	})
}
