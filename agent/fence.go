package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/latticehpc/lattice/agent/supervise"
	"github.com/latticehpc/lattice/model"
)

// Dead peers and fencing (docs/operations.md, "Node failure and fencing").
//
// The stream to the leader has gRPC keepalives (a vanished member is
// noticed once its TCP acknowledgements stop: TCP_USER_TIMEOUT is the
// keepalive timeout; gRPC pings no sooner than every 10 s whatever
// KeepaliveTime says) and a deadline: the leader answers every heartbeat,
// the agent sends one when the stream has been quiet for a third of
// StreamTimeout, so a stream with nothing received for StreamTimeout (8 s
// by default) is dead — a frozen leader's kernel still acknowledges TCP —
// and the agent moves on to the next member, passing over members that
// did not answer (suspectMembers). A member that does not accept the
// stream within ConnectTimeout is skipped too.
//
// Fencing: every heartbeat a leader acknowledges proves that the leader
// heard the agent when it was sent. FenceTimeout after the last such
// heartbeat the agent stops every job it runs (SIGTERM, Grace, SIGKILL),
// and reports their ends when it reaches a leader again. The leader fails
// a lost node's work only after the same time and the grace
// (AgentHello.fence_after_ms), so a requeued job never runs beside its
// old run. The deadline is also written to DATA_DIR/fence, which the job
// supervisor enforces when the agent itself is gone (agent/supervise).

// DefaultFenceTimeout is how long an agent runs its jobs without hearing a
// leader. It must outlast any outage of the whole quorum the site wants its
// jobs to survive; a requeue after a real node loss waits as long.
const DefaultFenceTimeout = 10 * time.Minute

// Keepalive settings of the agent's client (the servers permit pings
// this often: server.KeepaliveMinTime).
const (
	KeepaliveTime    = 5 * time.Second
	KeepaliveTimeout = 3 * time.Second
	// DefaultConnectTimeout bounds how long a member may take to accept
	// the stream (a frozen member accepts TCP connections but never
	// answers).
	DefaultConnectTimeout = 5 * time.Second
)

// keepaliveOption is the agent's gRPC client keepalive.
func keepaliveOption() grpc.DialOption {
	return grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout, PermitWithoutStream: true})
}

// fence is the agent's fencing clock.
type fence struct {
	mu       sync.Mutex
	seq      uint64
	sent     map[uint64]time.Time // heartbeats not yet acknowledged, by seq
	deadline time.Time            // zero: never heard a leader
	stopped  time.Time            // the deadline whose passing stopped the jobs
}

// fenceAfter is what the hello tells the leader: how long after its last
// acknowledged heartbeat this agent's processes are certainly gone (0:
// it never fences itself).
func (a *Agent) fenceAfter() time.Duration {
	if a.cfg.FenceTimeout < 0 {
		return 0
	}
	return a.cfg.FenceTimeout + a.cfg.Grace
}

func (a *Agent) fencePath() string { return filepath.Join(a.cfg.DataDir, supervise.FenceFile) }

// loadFence takes the deadline a predecessor on this data dir left: a
// restart does not extend it.
func (a *Agent) loadFence() {
	if a.cfg.FenceTimeout < 0 {
		_ = os.Remove(a.fencePath())
		return
	}
	if d, _, ok := supervise.ReadDeadline(a.fencePath()); ok {
		a.fence.deadline = d
	}
}

// nextHeartbeatSeq numbers a heartbeat about to be sent.
func (a *Agent) nextHeartbeatSeq() uint64 {
	f := &a.fence
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	if f.sent == nil {
		f.sent = map[uint64]time.Time{}
	}
	f.sent[f.seq] = time.Now()
	for s := range f.sent { // unanswered ones (a leader that went away)
		if s+64 < f.seq {
			delete(f.sent, s)
		}
	}
	return f.seq
}

// heartbeatAcked moves the fence: a leader heard heartbeat seq.
func (a *Agent) heartbeatAcked(seq uint64) {
	if a.cfg.FenceTimeout < 0 {
		return
	}
	f := &a.fence
	f.mu.Lock()
	at, ok := f.sent[seq]
	for s := range f.sent {
		if s <= seq {
			delete(f.sent, s)
		}
	}
	if !ok {
		f.mu.Unlock()
		return
	}
	d := at.Add(a.cfg.FenceTimeout)
	if !d.After(f.deadline) {
		f.mu.Unlock()
		return
	}
	wasStopped := !f.stopped.IsZero()
	f.deadline, f.stopped = d, time.Time{}
	f.mu.Unlock()
	if wasStopped {
		a.log.Info("a leader hears this agent again; its nodes take work again")
	}
	if err := supervise.WriteDeadline(a.fencePath(), d, a.cfg.Grace); err != nil {
		// A stale deadline left for the supervisor would stop healthy jobs
		// (a full disk): without the file it enforces none, and this agent
		// still does.
		_ = os.Remove(a.fencePath())
		a.log.Warn("write the fencing deadline for the job supervisor; it enforces none meanwhile", "err", err)
	}
}

// fenceLoop stops every job once the fencing deadline has passed with no
// leader heard: the leader may have failed (and requeued) them since.
func (a *Agent) fenceLoop(ctx context.Context) {
	if a.cfg.FenceTimeout < 0 {
		return
	}
	tick := time.NewTicker(min(time.Second, max(a.cfg.FenceTimeout/10, 50*time.Millisecond)))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		f := &a.fence
		f.mu.Lock()
		d := f.deadline
		due := !d.IsZero() && time.Now().After(d) && !f.stopped.Equal(d)
		if due {
			f.stopped = d
		}
		f.mu.Unlock()
		if !due {
			continue
		}
		running := a.runner.Running()
		a.log.Warn("no leader heard this agent since its fencing deadline: stopping its jobs, whose nodes the quorum may have failed",
			"fence_timeout", a.cfg.FenceTimeout, "deadline", d, "jobs", len(running))
		for _, id := range running {
			a.runner.Stop(id, model.ReasonNodeFailure, a.cfg.Grace)
		}
		a.killAllSteps(a.cfg.Grace)
	}
}

// DefaultStreamTimeout bounds how long an agent's stream to the leader may
// stay silent before the agent takes the leader for dead and moves to
// another member (gRPC's own keepalive pings no sooner than every 10 s).
const DefaultStreamTimeout = 8 * time.Second

// errUnresponsive is a member that did not answer in time: it did not
// accept the stream within ConnectTimeout, its stream stayed silent past
// StreamTimeout, or its transport's keepalive went unanswered.
var errUnresponsive = errors.New("member unresponsive")

// unresponsive marks err as errUnresponsive when it ended a connection
// attempt whose ConnectTimeout (accepting) had fired.
func unresponsive(err error, accepting *time.Timer) error {
	if err != nil && !accepting.Stop() {
		return fmt.Errorf("%w: %v", errUnresponsive, err)
	}
	return err
}

// suspectFor is how long an agent passes over a member that did not answer
// while another member may: a frozen or lost leader would otherwise cost
// a ConnectTimeout on every round through the members while the others
// elect a new leader.
const suspectFor = 30 * time.Second

// suspectMembers are the members that recently did not answer, by address.
type suspectMembers map[string]time.Time

func (s suspectMembers) note(addr string, err error) {
	if errors.Is(err, errUnresponsive) {
		s[addr] = time.Now()
	} else {
		delete(s, addr)
	}
}

// skip says whether to pass over addr this round: it is suspect and some
// member of servers is not.
func (s suspectMembers) skip(addr string, servers []string) bool {
	if at, ok := s[addr]; !ok || time.Since(at) > suspectFor {
		return false
	}
	for _, other := range servers {
		if at, ok := s[other]; !ok || time.Since(at) > suspectFor {
			return true
		}
	}
	return false
}
