package agent

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// Config configures a node agent.
type Config struct {
	ID      string   // agent id; defaults to the host name
	Servers []string // API addresses of quorum members
	DataDir string   // logs and scripts
	// CheckpointDir is the root of the allocations' checkpoint directories
	// (LATTICE_CHECKPOINT_DIR = CheckpointDir/<allocation id>); default
	// DataDir/checkpoints. Sites point it at shared storage so a requeued
	// allocation finds its checkpoint on any node.
	CheckpointDir string
	Nodes         []model.Node
	// HeartbeatInterval is how often liveness is reported (default 10 s).
	HeartbeatInterval time.Duration
	// Grace is the SIGTERM→SIGKILL grace when the server does not say (default 30 s).
	Grace  time.Duration
	Logger *slog.Logger
	// AllowRootJobs lets an agent running as root start jobs whose owner
	// is root. RunAsSelf runs every job as the agent's user whoever
	// submitted it (latticed dev).
	AllowRootJobs bool
	RunAsSelf     bool
	// VirtualRuns starts no processes (RunnerConfig.VirtualRuns): for
	// scale tests of the control plane with simulated nodes.
	VirtualRuns bool
	// SharedHostname keeps step tasks of simulated nodes in the host's UTS
	// namespace (by default, as root, each gets its node's name as host
	// name: tasks.go).
	SharedHostname bool
	// MaxRefusals is how many refusals of its credential in a row end Run
	// with a RefusedError (0 = DefaultMaxRefusals, negative = never).
	MaxRefusals int
	// Token is the agent's bearer credential (an agent-role token bound to
	// its node names); empty when the servers run without auth.
	Token string
	// TLS, when set, is used to reach the servers (pki.Client: the cluster
	// CA, and optionally the agent's client certificate, which the servers
	// map to an agent identity through their tokens file). CAFile is that
	// CA's file, passed on to jobs as LATTICE_CACERT for the srun shim.
	TLS    *tls.Config
	CAFile string
	// ReportRetry is how long a report may stay unacknowledged before it
	// is sent again on the same stream (default 5 s): a leader whose
	// proposal failed does not acknowledge, and the report must not be lost.
	ReportRetry time.Duration
	// PowerMeter, for an agent of one real node, measures its draw
	// (RAPL); each heartbeat reports it.
	PowerMeter *PowerMeter
	// Machine, for an agent of one real node, reads the machine's facts;
	// every FingerprintCheck (0 = never) the agent recomputes the node's
	// fingerprint from them (with FingerprintInputs' overrides) and reports
	// a change to the leader, which treats it as drift.
	Machine           func() MachineFacts
	FingerprintInputs FingerprintInputs
	FingerprintCheck  time.Duration
	// KeepJobs leaves jobs running when the agent stops (a restart adopts
	// them); otherwise they are stopped (SIGTERM, grace, SIGKILL).
	KeepJobs bool
	// Latticectl is the latticectl binary the srun shim on a job's PATH
	// runs (default: latticectl next to this executable, else on PATH; no
	// shim when there is none).
	Latticectl string
	// Supervisor is the job supervisor binary started for every run
	// (default: lattice-job-supervisor next to this executable, else this
	// executable itself; see supervise.go).
	Supervisor string
	// SupervisorMode is how runs are supervised: SupervisorDaemon (""
	// too), one long-lived supervisor daemon per agent that starts every
	// run (supdaemon.go), or SupervisorPerJob, a supervisor process per run.
	SupervisorMode string
	// FenceTimeout is how long the agent keeps running its jobs without a
	// leader hearing it (fence.go; default DefaultFenceTimeout, negative:
	// never stops them). StreamTimeout is how long the stream to the leader
	// may stay silent before the agent takes it for dead (default twice the
	// heartbeat interval plus 5 s, at most DefaultStreamTimeout; a stream
	// silent for a third of it is probed with a heartbeat); ConnectTimeout how long a member may
	// take to accept it (default DefaultConnectTimeout).
	FenceTimeout   time.Duration
	StreamTimeout  time.Duration
	ConnectTimeout time.Duration
	// ClusterID pins the cluster this agent serves (clusterid.go); ""
	// learns it from the first server that presents one.
	ClusterID string
	// Cgroups configures the jobs' cgroups (cgroup.go): layout, the pids
	// limit, the memory reserved for the system.
	Cgroups CgroupConfig
}

// Agent runs the allocations the quorum assigns to its nodes.
type Agent struct {
	cfg      Config
	runner   *Runner
	log      *slog.Logger
	instance string // AgentHello.instance (instance.go)
	cluster  *clusterMemory

	mu      sync.Mutex
	seq     uint64
	pending map[uint64]*latticev1.AllocationReport // by seq, until acknowledged
	// runs is, per allocation, the latest run this agent knows of.
	runs      map[uint64]*runRecord
	endOrder  []endedRun // runs that ended here, oldest first (memory bound)
	endSeq    uint64
	outbox    chan *latticev1.AgentMessage
	connected bool

	steps stepTable // step tasks running here (steps.go)
	ptys  ptyTable  // the terminals of pty step tasks (pty.go)
	// services are the service instances running here (services.go).
	services *serviceScraper

	// durable is what the state file holds (state.go), under mu;
	// detached: this agent stopped leaving its jobs to a successor.
	durable      map[uint64]*runState
	detached     bool
	stateVersion uint64
	stateMu      sync.Mutex // orders state file writes
	// lazySave is set while a deferred state write (saveSoon) is pending.
	lazySave    bool
	lazyVersion uint64 // the state version saveSoon's write must cover
	lazyTimer   *time.Timer
	flushMu     sync.Mutex // one flushLazySave at a time
	// forgotten: status files of runs dropped from the state, removed
	// once a write without them has landed.
	forgotten []string
	// launchSlots bounds the starts in flight (launchAsync).
	launchSlots  chan struct{}
	stateWritten uint64

	facts MachineFacts // as last read (Machine), under mu
	// blocked: allocations whose launch is deferred (rec.deferred) until no
	// other allocation's entrypoint runs on their nodes; under mu.
	blocked map[uint64]bool

	fence fence // fencing clock (fence.go)
}

// runRecord is what the agent knows of one run of an allocation. A run is
// (allocation id, requeue count): after a SUSPENDED report the quorum
// requeues the allocation and assigns it again with requeue_count + 1.
type runRecord struct {
	requeue int32
	// started: launched here (or waiting for an older run to end, deferred).
	started  bool
	deferred *Launch
	// final is how the run ended here, as reported; endSeq orders ends.
	final  *latticev1.AllocationReport
	endSeq uint64
	// quiet: the quorum ended this run without the agent (a cancel whose
	// reason is not Cancelled); its exit is not reported.
	quiet bool
	// cancelled: a user's cancel came before any run started here; the
	// CANCELLED report made the allocation terminal, so nothing starts.
	cancelled bool
	// launching: its start runs on its own goroutine (launchAsync); a
	// cancel arriving meanwhile waits in cancelAfter until the start is done.
	launching   bool
	cancelAfter *latticev1.CancelAllocation
	// checkpoints are the deadlines of the checkpoint requests received,
	// newest last, kept across runs: a request the server resends (after a
	// leader change) is delivered once.
	checkpoints []int64
}

type endedRun struct {
	id  uint64
	seq uint64
}

const (
	maxFinishedRemembered    = 10000
	maxCheckpointsRemembered = 16
)

// New prepares an agent.
func New(cfg Config) (*Agent, error) {
	if len(cfg.Servers) == 0 {
		return nil, errors.New("agent: at least one server address is required")
	}
	if len(cfg.Nodes) == 0 {
		return nil, errors.New("agent: no nodes to run")
	}
	if cfg.ID == "" {
		h, _ := os.Hostname()
		cfg.ID = h
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = 10 * time.Second
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 30 * time.Second
	}
	if cfg.ReportRetry <= 0 {
		cfg.ReportRetry = 5 * time.Second
	}
	if cfg.FenceTimeout == 0 {
		cfg.FenceTimeout = DefaultFenceTimeout
	}
	if cfg.StreamTimeout <= 0 {
		cfg.StreamTimeout = min(2*cfg.HeartbeatInterval+5*time.Second, DefaultStreamTimeout)
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	for i := range cfg.Nodes {
		if err := model.ValidateNode(&cfg.Nodes[i]); err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
	}
	a := &Agent{
		cfg:     cfg,
		log:     cfg.Logger.With("agent", cfg.ID),
		pending: map[uint64]*latticev1.AllocationReport{},
		runs:    map[uint64]*runRecord{},
		durable: map[uint64]*runState{},
		blocked: map[uint64]bool{},

		launchSlots: make(chan struct{}, maxConcurrentLaunches),
		services:    newServiceScraper(),
	}
	shim, err := writeShim(cfg.DataDir, cfg.Latticectl, a.log)
	if err != nil {
		return nil, err
	}
	if a.instance, err = loadInstance(cfg.DataDir); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if a.cluster, err = loadClusterID(cfg.DataDir, cfg.ClusterID); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	r, err := NewRunner(RunnerConfig{Dir: cfg.DataDir, CheckpointDir: cfg.CheckpointDir, Logger: a.log, AllowRootJobs: cfg.AllowRootJobs, RunAsSelf: cfg.RunAsSelf, VirtualRuns: cfg.VirtualRuns,
		OnExit: a.onExit, OnCheckpoint: a.onCheckpoint, ShimDir: shim, Servers: cfg.Servers, CAFile: cfg.CAFile, Supervisor: cfg.Supervisor, SupervisorMode: cfg.SupervisorMode,
		Cgroups: cfg.Cgroups, Energy: cfg.PowerMeter.energyCounter()})
	if err != nil {
		return nil, err
	}
	a.runner = r
	if cfg.Machine != nil {
		a.facts = cfg.Machine()
	}
	a.loadFence()
	if err := a.recoverRuns(); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	return a, nil
}

// Runner exposes the process runner (tests).
func (a *Agent) Runner() *Runner { return a.runner }

// Run connects to the leader and serves until ctx ends; then it stops every
// running allocation (SIGTERM, grace, SIGKILL).
func (a *Agent) Run(ctx context.Context) error {
	defer func() {
		a.flushLazySave()
		if a.cfg.KeepJobs {
			a.detach()
			return
		}
		a.runner.Shutdown(min(a.cfg.Grace, 5*time.Second))
	}()
	defer a.killAllSteps(min(a.cfg.Grace, 5*time.Second))
	fctx, stopFence := context.WithCancel(ctx)
	defer stopFence()
	go a.fenceLoop(fctx)
	go a.scrapeServices(fctx, a.cfg.HeartbeatInterval)
	backoff := 100 * time.Millisecond
	refusals := 0
	suspects := suspectMembers{}
	for i := 0; ; i++ {
		addr := a.cfg.Servers[i%len(a.cfg.Servers)]
		if suspects.skip(addr, a.cfg.Servers) {
			continue
		}
		err := a.session(ctx, addr)
		suspects.note(addr, err)
		if ctx.Err() != nil {
			return nil
		}
		if rerr := a.noteSession(addr, err, &refusals); rerr != nil {
			return rerr
		}
		if err != nil {
			a.log.Debug("agent session ended", "server", addr, "err", err)
		}
		if (i+1)%len(a.cfg.Servers) == 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 2*time.Second)
		}
		if err == nil {
			backoff = 100 * time.Millisecond
		}
	}
}

// Connected reports whether the agent has a session with the leader.
func (a *Agent) Connected() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.connected
}

// StopAll stops every allocation running here (SIGTERM, grace, SIGKILL)
// while the agent is still connected, then waits until the server has
// acknowledged their final reports or ctx ends. A member that stops its
// own agent (latticed dev) calls it first, so the records say the work
// ended when it did, not when the member next starts.
func (a *Agent) StopAll(ctx context.Context, grace time.Duration) {
	a.killAllSteps(grace)
	a.runner.Shutdown(grace)
	for {
		a.mu.Lock()
		n := len(a.pending)
		a.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (a *Agent) session(ctx context.Context, addr string) error {
	creds := insecure.NewCredentials()
	if a.cfg.TLS != nil {
		creds = credentials.NewTLS(a.cfg.TLS)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds), keepaliveOption())
	if err != nil {
		return err
	}
	defer conn.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if a.cfg.Token != "" {
		sctx = metadata.AppendToOutgoingContext(sctx, "authorization", "Bearer "+a.cfg.Token)
	}
	// A member that does not accept the stream in time (frozen: its
	// kernel accepts the connection, nothing answers) is skipped.
	accepting := time.AfterFunc(a.cfg.ConnectTimeout, cancel)
	defer accepting.Stop()
	stream, err := latticev1.NewAgentServiceClient(conn).Connect(sctx)
	if err != nil {
		return unresponsive(err, accepting)
	}
	hello := &latticev1.AgentHello{AgentId: a.cfg.ID, FenceAfterMs: a.fenceAfter().Milliseconds(), Instance: a.instance, ClusterId: a.cluster.serving()}
	a.mu.Lock() // fingerprints change with drift
	for i := range a.cfg.Nodes {
		hello.Nodes = append(hello.Nodes, NodeToProto(&a.cfg.Nodes[i]))
	}
	a.mu.Unlock()
	// Tell the leader what this agent knows it runs — or ran, with a final
	// report not yet acknowledged — so it fails only what was really lost.
	for _, k := range a.knownRuns() {
		hello.Running = append(hello.Running, k)
	}
	if err := stream.Send(&latticev1.AgentMessage{Msg: &latticev1.AgentMessage_Hello{Hello: hello}}); err != nil {
		return err
	}
	// The first server message tells whether this member accepted us (it
	// must be the leader); a refusal arrives as a stream error.
	first, err := stream.Recv()
	if err != nil {
		err = unresponsive(err, accepting)
		if s, ok := status.FromError(err); ok && s.Code() == codes.FailedPrecondition && strings.HasPrefix(s.Message(), OtherClusterMessage) {
			a.log.Error("a server of another cluster refused this agent; trying the next server", "server", addr, "msg", s.Message())
		} else if ok && s.Code() == codes.FailedPrecondition {
			a.log.Debug("not the leader, trying the next server", "server", addr, "msg", s.Message())
		} else if ok && (s.Code() == codes.AlreadyExists || s.Code() == codes.PermissionDenied || s.Code() == codes.Unauthenticated) {
			a.log.Warn("the leader refused this agent", "server", addr, "code", s.Code().String(), "msg", s.Message())
		}
		return err
	}
	// Its header came with its first message: a server of another
	// cluster is left before anything it sent is acted on.
	header, err := stream.Header()
	if err != nil {
		return err
	}
	if learned, err := a.cluster.check(header); err != nil {
		a.log.Error("refusing a server of another cluster; trying the next server", "server", addr, "err", err)
		return err
	} else if learned != "" {
		a.log.Info("learned the cluster id; from now on this agent refuses servers of other clusters", "server", addr, "cluster_id", learned)
	}
	if !accepting.Stop() {
		return fmt.Errorf("%w: server %s did not accept the stream within %s", errUnresponsive, addr, a.cfg.ConnectTimeout)
	}
	var lastRecv atomic.Int64 // Unix ns of the last message received
	lastRecv.Store(time.Now().UnixNano())

	outbox := make(chan *latticev1.AgentMessage, 1024)
	a.mu.Lock()
	a.outbox, a.connected = outbox, true
	// Resend everything not yet acknowledged, oldest first.
	seqs := make([]uint64, 0, len(a.pending))
	for s := range a.pending {
		seqs = append(seqs, s)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	for _, s := range seqs {
		outbox <- &latticev1.AgentMessage{Msg: &latticev1.AgentMessage_Report{Report: a.pending[s]}}
	}
	a.mu.Unlock()
	a.log.Info("agent connected", "server", addr, "nodes", len(a.cfg.Nodes))
	defer func() {
		a.mu.Lock()
		a.outbox, a.connected = nil, false
		a.mu.Unlock()
	}()

	sendErr := make(chan error, 1)
	go func() {
		hb := time.NewTicker(a.cfg.HeartbeatInterval)
		defer hb.Stop()
		retry := time.NewTicker(a.cfg.ReportRetry)
		defer retry.Stop()
		var waiting map[uint64]bool // unacknowledged at the previous retry tick
		// The first heartbeat at once: a leader's answer restarts the
		// fencing clock as soon as the agent is back.
		if err := stream.Send(a.heartbeat()); err != nil {
			sendErr <- err
			return
		}
		var lastProbe time.Time
		watch := time.NewTicker(min(time.Second, a.cfg.StreamTimeout/4))
		defer watch.Stop()
		var recheck <-chan time.Time
		if a.cfg.Machine != nil && a.cfg.FingerprintCheck > 0 {
			t := time.NewTicker(a.cfg.FingerprintCheck)
			defer t.Stop()
			recheck = t.C
		}
		for {
			select {
			case <-recheck:
				if m := a.recheckFingerprint(); m != nil {
					if err := stream.Send(m); err != nil {
						sendErr <- err
						return
					}
				}
			case <-sctx.Done():
				sendErr <- sctx.Err()
				return
			case <-watch.C:
				silent := time.Since(time.Unix(0, lastRecv.Load()))
				if silent > a.cfg.StreamTimeout {
					a.log.Warn("nothing heard from the leader on the stream: taking it for dead", "server", addr, "silent", silent.Round(time.Millisecond))
					sendErr <- fmt.Errorf("%w: no message from %s for %s", errUnresponsive, addr, silent.Round(time.Millisecond))
					return
				}
				// A quiet stream is probed (the leader answers every
				// heartbeat), so that a frozen leader shows within
				// StreamTimeout however long the heartbeat interval.
				if probeAfter := a.cfg.StreamTimeout / 3; silent > probeAfter && time.Since(lastProbe) > probeAfter {
					lastProbe = time.Now()
					if err := stream.Send(a.probe()); err != nil {
						sendErr <- err
						return
					}
				}
			case <-retry.C:
				var again []*latticev1.AgentMessage
				waiting, again = a.unacknowledged(waiting)
				for _, m := range again {
					if err := stream.Send(m); err != nil {
						sendErr <- err
						return
					}
				}
			case m := <-outbox:
				if err := stream.Send(m); err != nil {
					sendErr <- err
					return
				}
			case <-hb.C:
				if err := stream.Send(a.heartbeat()); err != nil {
					sendErr <- err
					return
				}
			}
		}
	}()
	a.handle(first)
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			lastRecv.Store(time.Now().UnixNano())
			a.handle(m)
		}
	}()
	select {
	case err = <-sendErr:
	case err = <-recvErr:
	case <-ctx.Done():
		err = ctx.Err()
	}
	cancel()
	if errors.Is(err, io.EOF) {
		err = nil
	}
	if st, ok := status.FromError(err); ok && st.Code() == codes.Unavailable && ctx.Err() == nil {
		// The transport died under the stream (keepalive unanswered: a
		// frozen or lost member).
		err = fmt.Errorf("%w: %v", errUnresponsive, err)
	}
	return err
}

// knownRuns lists allocations running here or ended with an unacknowledged
// report, with their run (the running one's, else the newest reported).
func (a *Agent) knownRuns() []*latticev1.RunningOnAgent {
	runs := map[uint64]int32{}
	running := map[uint64]bool{}
	for _, id := range a.runner.Running() {
		running[id] = true
		if r, ok := a.runner.runOf(id); ok {
			runs[id] = int32(r) + 1
		} else {
			runs[id] = 0 // ended meanwhile
		}
	}
	a.mu.Lock()
	for _, r := range a.pending {
		if !running[r.AllocationId] {
			runs[r.AllocationId] = max(runs[r.AllocationId], r.Run)
		}
	}
	a.mu.Unlock()
	out := make([]*latticev1.RunningOnAgent, 0, len(runs))
	for id, run := range runs {
		out = append(out, &latticev1.RunningOnAgent{AllocationId: id, Run: run})
	}
	slices.SortFunc(out, func(x, y *latticev1.RunningOnAgent) int { return cmp.Compare(x.AllocationId, y.AllocationId) })
	return out
}

// recheckFingerprint reads the machine again and returns the node facts to
// report when its fingerprint changed (nil otherwise). The new fingerprint
// is the node's from now on (the next hello carries it too).
func (a *Agent) recheckFingerprint() *latticev1.AgentMessage {
	now := a.cfg.Machine()
	fp := now.Fingerprint(a.cfg.FingerprintInputs)
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.facts
	a.facts = now
	f := &latticev1.NodeFacts{}
	for i := range a.cfg.Nodes {
		n := &a.cfg.Nodes[i]
		if n.Fingerprint == fp {
			continue
		}
		detail := strings.Join(now.Changed(old, a.cfg.FingerprintInputs), ", ")
		a.log.Warn("fingerprint drift", "node", n.Name, "was", n.Fingerprint, "now", fp, "changed", detail)
		n.Fingerprint = fp
		f.Nodes = append(f.Nodes, &latticev1.NodeFact{Name: n.Name, Fingerprint: fp, Detail: detail})
	}
	if len(f.Nodes) == 0 {
		return nil
	}
	return &latticev1.AgentMessage{Msg: &latticev1.AgentMessage_NodeFacts{NodeFacts: f}}
}

// runningAllocations lists the allocations with a process on this agent:
// entrypoints (adopted ones too) and step tasks.
func (a *Agent) runningAllocations() []uint64 {
	ids := a.runner.Running()
	a.steps.mu.Lock()
	for k := range a.steps.runs {
		ids = append(ids, k.alloc)
	}
	a.steps.mu.Unlock()
	slices.Sort(ids)
	return slices.Compact(ids)
}

func (a *Agent) heartbeat() *latticev1.AgentMessage {
	hb := &latticev1.Heartbeat{ListsRunning: true, Running: a.runningAllocations(), Seq: a.nextHeartbeatSeq(),
		ServiceSamples: a.serviceSamples()}
	for i := range a.cfg.Nodes {
		hb.Nodes = append(hb.Nodes, a.cfg.Nodes[i].Name)
	}
	if m := a.cfg.PowerMeter; m != nil && len(a.cfg.Nodes) == 1 {
		if w, ok := m.Watts(time.Now()); ok {
			hb.Watts = []int32{int32(w)} // measured, for the one node of this machine
		}
	}
	return &latticev1.AgentMessage{Msg: &latticev1.AgentMessage_Heartbeat{Heartbeat: hb}}
}

// probe is a heartbeat without the running list: a quiet stream's check
// that the leader still answers (it acknowledges every heartbeat).
func (a *Agent) probe() *latticev1.AgentMessage {
	m := a.heartbeat()
	hb := m.GetHeartbeat()
	hb.ListsRunning, hb.Running = false, nil
	return m
}

func (a *Agent) send(m *latticev1.AgentMessage) {
	a.mu.Lock()
	out := a.outbox
	a.mu.Unlock()
	if out == nil {
		return
	}
	select {
	case out <- m:
	default:
		a.log.Warn("agent outbox full, dropping message")
	}
}

// report queues a state report until the server acknowledges it.
func (a *Agent) report(r *latticev1.AllocationReport) {
	a.mu.Lock()
	a.seq++
	r.Seq = a.seq
	a.pending[r.Seq] = r
	out := a.outbox
	a.mu.Unlock()
	if out != nil {
		select {
		case out <- &latticev1.AgentMessage{Msg: &latticev1.AgentMessage_Report{Report: r}}:
		default: // resent on the next connection
		}
	}
}

// ended records how a run ended (a.mu held) and bounds what is remembered.
func (a *Agent) ended(id uint64, rec *runRecord, r *latticev1.AllocationReport) {
	rec.final = r
	a.endSeq++
	rec.endSeq = a.endSeq
	a.endOrder = append(a.endOrder, endedRun{id: id, seq: a.endSeq})
	for len(a.endOrder) > maxFinishedRemembered {
		old := a.endOrder[0]
		a.endOrder = a.endOrder[1:]
		if o := a.runs[old.id]; o != nil && o.endSeq == old.seq {
			delete(a.runs, old.id)
		}
	}
}

func exitReport(e Exit) *latticev1.AllocationReport {
	r := &latticev1.AllocationReport{AllocationId: e.AllocID, State: string(e.State), Reason: e.Reason, Message: e.Message,
		Run: int32(e.RequeueCount) + 1}
	if !e.End.IsZero() {
		r.EndUnixMs = e.End.UnixMilli()
	}
	if e.ExitCode != nil {
		r.HasExitCode, r.ExitCode = true, int32(*e.ExitCode)
	}
	r.Usage = e.Usage.proto()
	return r
}

// onExit reports how a run ended — unless the quorum has moved past it: a
// newer run is known (the old one's report would be taken for the new
// one's), or the quorum ended it itself.
func (a *Agent) onExit(e Exit) {
	// Its steps end with it (tasks on this agent's other nodes too).
	a.killSteps(e.AllocID, -1, min(a.cfg.Grace, 5*time.Second))
	r := exitReport(e)
	a.mu.Lock()
	if a.detached {
		a.mu.Unlock()
		return // its successor reports it
	}
	rec := a.runs[e.AllocID]
	stale := rec != nil && int32(e.RequeueCount) < rec.requeue
	quiet := rec != nil && !stale && rec.quiet
	var next *Launch
	switch {
	case rec == nil:
	case stale:
		next, rec.deferred = rec.deferred, nil
	default:
		a.ended(e.AllocID, rec, r)
	}
	a.mu.Unlock()
	if stale || quiet {
		a.log.Info("run ended without a report: the quorum moved past it", "alloc", e.AllocID, "run", e.RequeueCount,
			"state", e.State, "reason", e.Reason)
		a.forgetRun(e.AllocID, int32(e.RequeueCount)+1)
	} else {
		a.recordEnd(e.AllocID, r)
		a.report(r)
	}
	if next != nil {
		a.mu.Lock()
		delete(a.blocked, e.AllocID)
		a.mu.Unlock()
		if a.runner.otherOn(next.Nodes, e.AllocID) != 0 {
			a.mu.Lock()
			if rec := a.runs[e.AllocID]; rec != nil && rec.requeue == int32(next.RequeueCount) {
				rec.deferred, a.blocked[e.AllocID] = next, true
			}
			a.mu.Unlock()
		} else {
			a.launch(*next)
		}
	}
	a.startUnblocked()
}

// onCheckpoint reports a checkpoint that left the run going: RUNNING again,
// with the reason (Checkpointed, CheckpointFailed or CheckpointTimeout).
func (a *Agent) onCheckpoint(c CheckpointResult) {
	a.mu.Lock()
	rec := a.runs[c.AllocID]
	current := rec == nil || (rec.requeue == int32(c.RequeueCount) && rec.final == nil && !rec.quiet)
	a.mu.Unlock()
	if !current {
		return
	}
	a.report(&latticev1.AllocationReport{AllocationId: c.AllocID, State: string(model.StateRunning), Reason: c.Reason, Message: c.Message,
		Run: int32(c.RequeueCount) + 1})
}

func (a *Agent) handle(m *latticev1.ServerMessage) {
	switch msg := m.Msg.(type) {
	case *latticev1.ServerMessage_Ack:
		if msg.Ack.HeartbeatSeq != 0 {
			a.heartbeatAcked(msg.Ack.HeartbeatSeq)
			return
		}
		a.mu.Lock()
		r := a.pending[msg.Ack.Seq]
		delete(a.pending, msg.Ack.Seq)
		a.mu.Unlock()
		if r != nil {
			a.acknowledged(r)
		}
	case *latticev1.ServerMessage_Assign:
		a.assign(msg.Assign)
	case *latticev1.ServerMessage_Cancel:
		a.cancel(msg.Cancel)
	case *latticev1.ServerMessage_LogRequest:
		a.send(&latticev1.AgentMessage{Msg: &latticev1.AgentMessage_LogData{LogData: a.readLog(msg.LogRequest)}})
	case *latticev1.ServerMessage_Checkpoint:
		a.checkpoint(msg.Checkpoint)
	case *latticev1.ServerMessage_StepLaunch:
		a.launchStep(msg.StepLaunch)
	case *latticev1.ServerMessage_StepPmiFenceDone:
		a.pmiFenceDone(msg.StepPmiFenceDone)
	case *latticev1.ServerMessage_StepInput:
		a.stepInput(msg.StepInput) // pty.go
	case *latticev1.ServerMessage_StepKill:
		grace := a.cfg.Grace
		if msg.StepKill.GraceSeconds > 0 {
			grace = time.Duration(msg.StepKill.GraceSeconds) * time.Second
		}
		a.killSteps(msg.StepKill.AllocationId, msg.StepKill.StepId, grace)
	case *latticev1.ServerMessage_Signal:
		// latticectl signal / cancel --signal: to the job's process group
		// (the supervisor passes it by).
		sig := msg.Signal.Signal
		if sig < 1 || sig > 64 || !a.runner.Signal(msg.Signal.AllocationId, syscall.Signal(sig)) {
			a.log.Info("signal for an allocation not running here", "alloc", msg.Signal.AllocationId, "signal", sig)
		} else {
			a.log.Info("signalled allocation", "alloc", msg.Signal.AllocationId, "signal", sig)
		}
	case *latticev1.ServerMessage_SetWalltime:
		w := time.Duration(msg.SetWalltime.WalltimeSeconds) * time.Second
		if a.runner.SetWalltime(msg.SetWalltime.AllocationId, w) {
			a.log.Info("walltime changed", "alloc", msg.SetWalltime.AllocationId, "walltime", w)
		}
	case *latticev1.ServerMessage_UsageQuery:
		a.send(&latticev1.AgentMessage{Msg: &latticev1.AgentMessage_UsageAnswer{UsageAnswer: a.liveUsage(msg.UsageQuery)}})
	case *latticev1.ServerMessage_Freeze:
		a.freeze(msg.Freeze)
	case *latticev1.ServerMessage_CheckpointAck:
		if !a.runner.CheckpointAck(msg.CheckpointAck.AllocationId, msg.CheckpointAck.Failed) {
			a.log.Info("checkpoint acknowledgement with no checkpoint in progress", "alloc", msg.CheckpointAck.AllocationId)
		}
	}
}

func (a *Agent) assign(as *latticev1.Assignment) {
	al := as.Allocation
	id, run := al.Id, al.RequeueCount
	a.mu.Lock()
	rec := a.runs[id]
	switch {
	case rec == nil:
		rec = &runRecord{requeue: run}
		a.runs[id] = rec
	case rec.cancelled:
		// Cancelled before it started here; the leader may not know yet.
		fin := rec.final
		a.mu.Unlock()
		a.report(cloneReport(fin))
		return
	case run < rec.requeue:
		a.mu.Unlock()
		a.log.Info("assignment of an old run ignored", "alloc", id, "run", run, "latest", rec.requeue)
		return
	case run > rec.requeue:
		rec = &runRecord{requeue: run, checkpoints: rec.checkpoints}
		a.runs[id] = rec
	}
	if rec.final != nil {
		// Ended here already; the leader may not know yet.
		fin := rec.final
		a.mu.Unlock()
		a.report(cloneReport(fin))
		return
	}
	if rec.started {
		deferred := rec.deferred != nil
		a.mu.Unlock()
		if !deferred && a.runner.IsRunning(id) {
			a.report(&latticev1.AllocationReport{AllocationId: id, State: string(model.StateRunning), Run: run + 1})
		}
		return // otherwise its exit report, or its start, is on its way
	}
	rec.started = true
	req := al.Request
	grace := a.cfg.Grace
	if as.GraceSeconds > 0 {
		grace = time.Duration(as.GraceSeconds) * time.Second
	}
	l := Launch{
		AllocID: id, DisplayID: al.DisplayId, ArrayJobID: al.ArrayJobId, ArrayIndex: int(al.ArrayIndex),
		Name: req.GetName(), Tenant: req.GetTenant(), VCluster: req.GetVcluster(), User: req.GetUser(),
		Command: req.GetCommand(), Script: scriptOf(req), Env: req.GetEnv(), WorkDir: req.GetWorkDir(),
		Nodes: al.Nodes, Walltime: time.Duration(req.GetWalltimeSeconds()) * time.Second, Grace: grace,
		Stdout: req.GetStdout(), Stderr: req.GetStderr(), Checkpoint: model.CheckpointMode(req.GetCheckpoint()),
		RequeueCount: int(run), CheckpointHook: req.GetCheckpointHook(), CheckpointWebhook: req.GetCheckpointWebhook(),
		GPUs: a.nodeGPUs(as.LaunchNode), CPUs: a.nodeCPUs(as.LaunchNode), Tasks: taskSpecOf(req), Placeholder: req.GetInteractive(),
	}
	a.limitLaunch(&l, req, as.LaunchNode)
	if err := a.prepareService(&l, as); err != nil {
		a.log.Warn("service instance starts without its port", "alloc", id, "err", err)
	}
	if s := req.GetCheckpointSignal(); s != "" {
		if n, err := model.ParseSignal(s); err == nil {
			l.CheckpointSignal = syscall.Signal(n)
		}
	}
	if old, ok := a.runner.runOf(id); ok && old != int(run) {
		// An older run still runs here (the quorum requeued it without
		// our report): stop it; the new run starts when it has ended.
		rec.deferred = &l
		a.mu.Unlock()
		a.log.Info("stopping an old run before starting its successor", "alloc", id, "old", old, "run", run)
		a.runner.Stop(id, model.ReasonRequeued, grace)
		return
	}
	if other := a.runner.otherOn(l.Nodes, id); other != 0 {
		// Another allocation's processes still run on a node of this one
		// (a run the quorum ended without us, being stopped): never two
		// allocations on a node — it starts once they are gone.
		rec.deferred = &l
		a.blocked[id] = true
		a.mu.Unlock()
		a.log.Warn("launch deferred: another allocation still runs on its nodes", "alloc", id, "run", run, "other", other)
		return
	}
	rec.launching = true
	a.mu.Unlock()
	go a.launchAsync(l)
}

// maxConcurrentLaunches bounds the starts in flight on one agent.
const maxConcurrentLaunches = 32

// launchAsync starts a run off the stream's receive loop, so one agent
// (one node, or thousands simulated) starts many runs at once: their
// state-file writes share fsyncs (saveState) and their fork/execs overlap.
// A cancel that came during the start is applied after it.
func (a *Agent) launchAsync(l Launch) {
	a.launchSlots <- struct{}{}
	a.launch(l)
	<-a.launchSlots
	a.mu.Lock()
	var c *latticev1.CancelAllocation
	if rec := a.runs[l.AllocID]; rec != nil && rec.requeue == int32(l.RequeueCount) {
		rec.launching = false
		c, rec.cancelAfter = rec.cancelAfter, nil
	}
	a.mu.Unlock()
	if c != nil {
		a.cancel(c)
	}
}

// startUnblocked launches the deferred runs whose nodes no other
// allocation's entrypoint occupies any more.
func (a *Agent) startUnblocked() {
	var ready []Launch
	a.mu.Lock()
	for id := range a.blocked {
		rec := a.runs[id]
		if rec == nil || rec.deferred == nil {
			delete(a.blocked, id)
			continue
		}
		if _, old := a.runner.runOf(id); old || a.runner.otherOn(rec.deferred.Nodes, id) != 0 {
			continue
		}
		ready = append(ready, *rec.deferred)
		rec.deferred = nil
		delete(a.blocked, id)
	}
	a.mu.Unlock()
	slices.SortFunc(ready, func(x, y Launch) int { return cmp.Compare(x.AllocID, y.AllocID) })
	for _, l := range ready {
		a.log.Info("deferred launch starts: its nodes are free", "alloc", l.AllocID, "run", l.RequeueCount)
		a.launch(l)
	}
}

// launch starts a run and reports RUNNING, or FAILED/LaunchFailed.
func (a *Agent) launch(l Launch) {
	l.StatusFile = a.statusPath(l.AllocID, l.RequeueCount)
	l.Started = time.Now()
	l.LaunchID = launchID(l.AllocID, l.RequeueCount)
	err := a.recordLaunch(l) // durable before it starts: never launched twice
	if err == nil {
		err = a.runner.Start(l)
	}
	if err != nil {
		a.log.Warn("launch failed", "alloc", l.AllocID, "run", l.RequeueCount, "err", err)
		code := -1
		a.onExit(Exit{AllocID: l.AllocID, RequeueCount: l.RequeueCount, State: model.StateFailed, Reason: model.ReasonLaunchFailed, ExitCode: &code, Message: err.Error(), End: time.Now()})
		return
	}
	a.report(&latticev1.AllocationReport{AllocationId: l.AllocID, State: string(model.StateRunning), Run: int32(l.RequeueCount) + 1,
		StartUnixMs: l.Started.UnixMilli()})
}

// cancel stops the run of an allocation. A cancel whose reason is not
// Cancelled comes from a quorum that already ended or requeued the run: it
// is stopped without a report. For a run that is not going, the agent
// reports only what it knows: a terminal end again; nothing after a
// SUSPENDED end (the allocation is requeued, not cancelled); CANCELLED when
// nothing ever ran here and a user cancelled it.
func (a *Agent) cancel(c *latticev1.CancelAllocation) {
	id := c.AllocationId
	grace := a.cfg.Grace
	if c.GraceSeconds > 0 {
		grace = time.Duration(c.GraceSeconds) * time.Second
	}
	reason := c.Reason
	if reason == "" {
		reason = model.ReasonCancelled
	}
	userCancel := reason == model.ReasonCancelled
	// The leader's walltime backstop (the run is still RUNNING there) wants
	// the end reported too.
	reported := userCancel || reason == model.ReasonWalltimeExceeded
	cancelled := &latticev1.AllocationReport{AllocationId: id, State: string(model.StateCancelled), Reason: model.ReasonCancelled}

	a.mu.Lock()
	rec := a.runs[id]
	if rec != nil && rec.deferred != nil {
		// Its new run waits for the old one to end: it never starts.
		l := rec.deferred
		rec.deferred = nil
		if !userCancel {
			rec.quiet = true
			a.mu.Unlock()
			return
		}
		a.ended(id, rec, cancelled)
		a.mu.Unlock()
		a.log.Info("cancelled before it started", "alloc", id, "run", l.RequeueCount)
		a.report(cloneReport(cancelled))
		return
	}
	if rec != nil && rec.launching {
		rec.cancelAfter = c // applied once the start is done (launchAsync)
		a.mu.Unlock()
		return
	}
	if rec != nil && rec.final == nil && !reported {
		rec.quiet = true
	}
	a.mu.Unlock()
	if a.runner.Stop(id, reason, grace) {
		return // the exit report follows
	}

	a.mu.Lock()
	rec = a.runs[id]
	switch {
	case rec == nil && userCancel:
		// Never ran here: cancelled before its assignment arrived, which
		// must not start it.
		rec = &runRecord{requeue: -1, started: true, cancelled: true}
		a.runs[id] = rec
		a.ended(id, rec, cancelled)
		a.mu.Unlock()
		a.report(cloneReport(cancelled))
	case rec == nil:
		a.mu.Unlock()
		a.log.Info("cancel of an allocation that never ran here ignored", "alloc", id, "reason", reason)
	case rec.final != nil:
		fin := rec.final
		a.mu.Unlock()
		if st, _ := model.ParseAllocState(fin.State); st.Terminal() {
			a.report(cloneReport(fin))
		}
	default:
		a.mu.Unlock() // it just ended: its exit report is on its way
	}
}

// checkpoint delivers a checkpoint request once per (allocation, deadline).
func (a *Agent) checkpoint(req *latticev1.CheckpointRequest) {
	id := req.AllocationId
	a.mu.Lock()
	if rec := a.runs[id]; rec != nil {
		if slices.Contains(rec.checkpoints, req.DeadlineUnixMs) {
			a.mu.Unlock()
			a.log.Debug("checkpoint request already delivered", "alloc", id, "deadline_unix_ms", req.DeadlineUnixMs)
			return
		}
		rec.checkpoints = append(rec.checkpoints, req.DeadlineUnixMs)
		if n := len(rec.checkpoints); n > maxCheckpointsRemembered {
			rec.checkpoints = rec.checkpoints[n-maxCheckpointsRemembered:]
		}
	}
	a.mu.Unlock()
	o := CheckpointOrder{AllocID: id, Mode: model.CheckpointMode(req.Mode), Stop: req.Stop,
		Signal: syscall.Signal(req.Signal), Hook: req.Hook, Webhook: req.Webhook, Reason: req.Reason, Grace: a.cfg.Grace}
	if req.DeadlineUnixMs > 0 {
		o.Deadline = time.UnixMilli(req.DeadlineUnixMs)
	}
	if req.GraceSeconds > 0 {
		o.Grace = time.Duration(req.GraceSeconds) * time.Second
	}
	if req.Mode != "" {
		if m, err := model.ParseCheckpointMode(req.Mode); err == nil {
			o.Mode = m
		}
	}
	if err := a.runner.Checkpoint(o); err != nil {
		a.log.Info("checkpoint request not delivered", "alloc", id, "err", err)
	}
}

func cloneReport(r *latticev1.AllocationReport) *latticev1.AllocationReport {
	return &latticev1.AllocationReport{AllocationId: r.AllocationId, State: r.State, Reason: r.Reason,
		HasExitCode: r.HasExitCode, ExitCode: r.ExitCode, Message: r.Message, Run: r.Run, EndUnixMs: r.EndUnixMs,
		Usage: usageOfProto(r.Usage).proto()}
}

// MaxLogChunk bounds one log read.
const MaxLogChunk = 1 << 20

func (a *Agent) readLog(req *latticev1.LogRequest) *latticev1.LogData {
	out := &latticev1.LogData{RequestId: req.RequestId, Offset: req.Offset}
	paths, ok := a.runner.Paths(req.AllocationId)
	if !ok {
		out.NotFound = true
		return out
	}
	path := paths.Stdout
	if req.Stderr {
		path = paths.Stderr
	}
	f, err := os.Open(path)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	defer f.Close()
	n := req.MaxBytes
	if n <= 0 || n > MaxLogChunk {
		n = MaxLogChunk
	}
	buf := make([]byte, n)
	k, err := f.ReadAt(buf, req.Offset)
	if err != nil && !errors.Is(err, io.EOF) {
		out.Error = err.Error()
	}
	out.Data = buf[:k]
	out.Offset = req.Offset + int64(k)
	out.Eof = k < int(n) && !a.runner.IsRunning(req.AllocationId)
	return out
}

// NodeToProto converts a node for the wire.
func NodeToProto(n *model.Node) *latticev1.Node {
	return &latticev1.Node{
		Name: n.Name, State: string(n.State), HomeVcluster: n.HomeVCluster, CurrentVcluster: n.CurrentVCluster,
		Group: int32(n.Group), Fingerprint: n.Fingerprint, Allocation: n.Allocation, PowerWatts: int32(n.Watts()),
		GpuType: n.GPUType, Gpus: int32(n.GPUs), Features: n.Features, IdleWatts: int32(n.IdleWatts),
		BusyWatts: int32(n.BusyWatts), StateReason: n.StateReason, Agent: n.Agent, Cpus: int32(n.CPUs), MemoryMb: n.MemoryMB,
	}
}

// NodeFromProto converts a registered node from the wire.
func NodeFromProto(p *latticev1.Node) model.Node {
	return model.Node{
		Name: p.Name, HomeVCluster: p.HomeVcluster, Group: int(p.Group), Fingerprint: p.Fingerprint,
		GPUType: p.GpuType, GPUs: int(p.Gpus), Features: model.NormalizeFeatures(append([]string(nil), p.Features...)),
		IdleWatts: int(p.IdleWatts), BusyWatts: int(p.BusyWatts), CPUs: int(p.Cpus), MemoryMB: p.MemoryMb,
	}
}

// SimulatedNodes describes n simulated nodes in groups of groupSize, split
// over vClusters in order (counts[i] nodes for vclusters[i]; a count of 0
// takes an even share of what is left).
func SimulatedNodes(prefix string, n, groupSize int, vclusters []string, counts []int, idleW, busyW int, fingerprint string) ([]model.Node, error) {
	if n < 1 {
		return nil, fmt.Errorf("invalid nodes %d: allowed a count >= 1", n)
	}
	if groupSize < 1 {
		return nil, fmt.Errorf("invalid group-size %d: allowed a count >= 1", groupSize)
	}
	if len(vclusters) == 0 {
		return nil, errors.New("invalid vclusters: allowed at least one name")
	}
	share := make([]int, len(vclusters))
	fixed, free := 0, 0
	for i := range vclusters {
		if i < len(counts) && counts[i] > 0 {
			share[i] = counts[i]
			fixed += counts[i]
		} else {
			free++
		}
	}
	if fixed > n {
		return nil, fmt.Errorf("invalid vclusters: counts add up to %d, more than the %d nodes", fixed, n)
	}
	if free > 0 {
		remaining, k := n-fixed, 0
		for i := range share {
			if i < len(counts) && counts[i] > 0 {
				continue
			}
			share[i] = remaining / free
			if k < remaining%free {
				share[i]++
			}
			k++
		}
	} else if fixed != n {
		return nil, fmt.Errorf("invalid vclusters: counts add up to %d, but there are %d nodes", fixed, n)
	}
	width := len(fmt.Sprint(n))
	width = max(width, 3)
	nodes := make([]model.Node, 0, n)
	vc, left := 0, share[0]
	for i := range n {
		for left == 0 {
			vc++
			left = share[vc]
		}
		left--
		nodes = append(nodes, model.Node{
			Name:         fmt.Sprintf("%s%0*d", prefix, width, i+1),
			HomeVCluster: vclusters[vc],
			Group:        i / groupSize,
			Fingerprint:  fingerprint,
			IdleWatts:    idleW,
			BusyWatts:    busyW,
			Features:     []string{"sim"},
		})
	}
	return nodes, nil
}

// ParseVClusterSplit reads NAME[:NODES],… as `latticed dev --vclusters` takes it.
func ParseVClusterSplit(s string) (names []string, counts []int, err error) {
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, cnt, hasCount := strings.Cut(part, ":")
		n := 0
		if hasCount {
			if _, e := fmt.Sscanf(cnt, "%d", &n); e != nil || n < 1 || fmt.Sprint(n) != cnt {
				return nil, nil, &model.FieldError{Field: "vclusters", Value: s, Allowed: "NAME[:NODES],... with NODES >= 1"}
			}
		}
		names = append(names, name)
		counts = append(counts, n)
	}
	if len(names) == 0 {
		return nil, nil, &model.FieldError{Field: "vclusters", Value: s, Allowed: "NAME[:NODES],... with at least one name"}
	}
	return names, counts, nil
}

// detach stops the agent without stopping its jobs: a restarted agent on
// the same data dir adopts them. Nothing is reported or saved after it.
func (a *Agent) detach() {
	a.mu.Lock()
	a.detached = true
	a.mu.Unlock()
	a.runner.Detach()
}

// unacknowledged returns the reports pending now, and those of them that
// were already pending at the previous call (prev), oldest first, to send
// again.
func (a *Agent) unacknowledged(prev map[uint64]bool) (map[uint64]bool, []*latticev1.AgentMessage) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := make(map[uint64]bool, len(a.pending))
	var seqs []uint64
	for s := range a.pending {
		now[s] = true
		if prev[s] {
			seqs = append(seqs, s)
		}
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	out := make([]*latticev1.AgentMessage, len(seqs))
	for i, s := range seqs {
		out[i] = &latticev1.AgentMessage{Msg: &latticev1.AgentMessage_Report{Report: a.pending[s]}}
	}
	return now, out
}

// scriptOf is an assigned request's batch script byte for byte: its
// script_bytes when the script is not UTF-8, else its text.
func scriptOf(req *latticev1.AllocationRequest) string {
	if b := req.GetScriptBytes(); len(b) > 0 {
		return string(b)
	}
	return req.GetScript()
}
