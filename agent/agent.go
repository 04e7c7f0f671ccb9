package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// Config configures a node agent.
type Config struct {
	ID      string   // agent id; defaults to the host name
	Servers []string // API addresses of quorum members
	DataDir string   // logs and scripts
	Nodes   []model.Node
	// HeartbeatInterval is how often liveness is reported (default 10 s).
	HeartbeatInterval time.Duration
	// Grace is the SIGTERM→SIGKILL grace when the server does not say (default 30 s).
	Grace  time.Duration
	Logger *slog.Logger
}

// Agent runs the allocations the quorum assigns to its nodes.
type Agent struct {
	cfg    Config
	runner *Runner
	log    *slog.Logger

	mu        sync.Mutex
	seq       uint64
	pending   map[uint64]*latticev1.AllocationReport // by seq, until acknowledged
	finished  map[uint64]*latticev1.AllocationReport // final report by allocation
	finOrder  []uint64
	launches  map[uint64]bool // allocations ever started here
	outbox    chan *latticev1.AgentMessage
	connected bool
}

const maxFinishedRemembered = 10000

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
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	for i := range cfg.Nodes {
		if err := model.ValidateNode(&cfg.Nodes[i]); err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
	}
	a := &Agent{
		cfg:      cfg,
		log:      cfg.Logger.With("agent", cfg.ID),
		pending:  map[uint64]*latticev1.AllocationReport{},
		finished: map[uint64]*latticev1.AllocationReport{},
		launches: map[uint64]bool{},
	}
	r, err := NewRunner(cfg.DataDir, a.log, a.onExit)
	if err != nil {
		return nil, err
	}
	a.runner = r
	return a, nil
}

// Runner exposes the process runner (tests).
func (a *Agent) Runner() *Runner { return a.runner }

// Run connects to the leader and serves until ctx ends; then it stops every
// running allocation (SIGTERM, grace, SIGKILL).
func (a *Agent) Run(ctx context.Context) error {
	defer a.runner.Shutdown(min(a.cfg.Grace, 5*time.Second))
	backoff := 100 * time.Millisecond
	for i := 0; ; i++ {
		addr := a.cfg.Servers[i%len(a.cfg.Servers)]
		err := a.session(ctx, addr)
		if ctx.Err() != nil {
			return nil
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

func (a *Agent) session(ctx context.Context, addr string) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := latticev1.NewAgentServiceClient(conn).Connect(sctx)
	if err != nil {
		return err
	}
	hello := &latticev1.AgentHello{AgentId: a.cfg.ID}
	for i := range a.cfg.Nodes {
		hello.Nodes = append(hello.Nodes, NodeToProto(&a.cfg.Nodes[i]))
	}
	// Tell the leader what this agent knows it runs — or ran, with a final
	// report not yet acknowledged — so it fails only what was really lost.
	for _, id := range a.knownIDs() {
		hello.Running = append(hello.Running, &latticev1.RunningOnAgent{AllocationId: id})
	}
	if err := stream.Send(&latticev1.AgentMessage{Msg: &latticev1.AgentMessage_Hello{Hello: hello}}); err != nil {
		return err
	}
	// The first server message tells whether this member accepted us (it
	// must be the leader); a refusal arrives as a stream error.
	first, err := stream.Recv()
	if err != nil {
		if s, ok := status.FromError(err); ok && s.Code() == codes.FailedPrecondition {
			a.log.Debug("not the leader, trying the next server", "server", addr, "msg", s.Message())
		}
		return err
	}

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
		for {
			select {
			case <-sctx.Done():
				sendErr <- sctx.Err()
				return
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
	return err
}

// knownIDs lists allocations running here or ended with an unacknowledged report.
func (a *Agent) knownIDs() []uint64 {
	ids := a.runner.Running()
	a.mu.Lock()
	for _, r := range a.pending {
		ids = append(ids, r.AllocationId)
	}
	a.mu.Unlock()
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	out := ids[:0]
	for i, id := range ids {
		if i == 0 || id != ids[i-1] {
			out = append(out, id)
		}
	}
	return out
}

func (a *Agent) heartbeat() *latticev1.AgentMessage {
	hb := &latticev1.Heartbeat{}
	for i := range a.cfg.Nodes {
		hb.Nodes = append(hb.Nodes, a.cfg.Nodes[i].Name)
	}
	return &latticev1.AgentMessage{Msg: &latticev1.AgentMessage_Heartbeat{Heartbeat: hb}}
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
	if st, _ := model.ParseAllocState(r.State); st.Terminal() {
		if _, ok := a.finished[r.AllocationId]; !ok {
			a.finOrder = append(a.finOrder, r.AllocationId)
		}
		a.finished[r.AllocationId] = r
		if len(a.finOrder) > maxFinishedRemembered {
			delete(a.finished, a.finOrder[0])
			a.finOrder = a.finOrder[1:]
		}
	}
	out := a.outbox
	a.mu.Unlock()
	if out != nil {
		select {
		case out <- &latticev1.AgentMessage{Msg: &latticev1.AgentMessage_Report{Report: r}}:
		default: // resent on the next connection
		}
	}
}

func (a *Agent) onExit(e Exit) {
	r := &latticev1.AllocationReport{AllocationId: e.AllocID, State: string(e.State), Reason: e.Reason, Message: e.Message}
	if e.ExitCode != nil {
		r.HasExitCode, r.ExitCode = true, int32(*e.ExitCode)
	}
	a.report(r)
}

func (a *Agent) handle(m *latticev1.ServerMessage) {
	switch msg := m.Msg.(type) {
	case *latticev1.ServerMessage_Ack:
		a.mu.Lock()
		delete(a.pending, msg.Ack.Seq)
		a.mu.Unlock()
	case *latticev1.ServerMessage_Assign:
		a.assign(msg.Assign)
	case *latticev1.ServerMessage_Cancel:
		a.cancel(msg.Cancel)
	case *latticev1.ServerMessage_LogRequest:
		a.send(&latticev1.AgentMessage{Msg: &latticev1.AgentMessage_LogData{LogData: a.readLog(msg.LogRequest)}})
	case *latticev1.ServerMessage_Checkpoint:
		if msg.Checkpoint.Mode == string(model.CheckpointSignal) {
			a.runner.Signal(msg.Checkpoint.AllocationId, syscall.SIGUSR1)
		}
	}
}

func (a *Agent) assign(as *latticev1.Assignment) {
	al := as.Allocation
	id := al.Id
	a.mu.Lock()
	fin := a.finished[id]
	started := a.launches[id]
	a.launches[id] = true
	a.mu.Unlock()
	if fin != nil {
		// Ended here already; the leader may not know yet.
		a.report(cloneReport(fin))
		return
	}
	if started && a.runner.IsRunning(id) {
		a.report(&latticev1.AllocationReport{AllocationId: id, State: string(model.StateRunning)})
		return
	}
	req := al.Request
	grace := a.cfg.Grace
	if as.GraceSeconds > 0 {
		grace = time.Duration(as.GraceSeconds) * time.Second
	}
	l := Launch{
		AllocID: id, DisplayID: al.DisplayId, ArrayJobID: al.ArrayJobId, ArrayIndex: int(al.ArrayIndex),
		Name: req.GetName(), Tenant: req.GetTenant(), VCluster: req.GetVcluster(),
		Command: req.GetCommand(), Script: req.GetScript(), Env: req.GetEnv(), WorkDir: req.GetWorkDir(),
		Nodes: al.Nodes, Walltime: time.Duration(req.GetWalltimeSeconds()) * time.Second, Grace: grace,
		Stdout: req.GetStdout(), Stderr: req.GetStderr(), Checkpoint: model.CheckpointMode(req.GetCheckpoint()),
	}
	if err := a.runner.Start(l); err != nil {
		a.log.Warn("launch failed", "alloc", id, "err", err)
		code := -1
		a.onExit(Exit{AllocID: id, State: model.StateFailed, Reason: model.ReasonLaunchFailed, ExitCode: &code, Message: err.Error()})
		return
	}
	a.report(&latticev1.AllocationReport{AllocationId: id, State: string(model.StateRunning)})
}

func (a *Agent) cancel(c *latticev1.CancelAllocation) {
	grace := a.cfg.Grace
	if c.GraceSeconds > 0 {
		grace = time.Duration(c.GraceSeconds) * time.Second
	}
	reason := c.Reason
	if reason == "" {
		reason = model.ReasonCancelled
	}
	if a.runner.Stop(c.AllocationId, reason, grace) {
		return // the exit report follows
	}
	a.mu.Lock()
	fin := a.finished[c.AllocationId]
	a.launches[c.AllocationId] = true // a late assignment must not start it
	a.mu.Unlock()
	if fin != nil {
		a.report(cloneReport(fin))
		return
	}
	a.onExit(Exit{AllocID: c.AllocationId, State: model.StateCancelled, Reason: model.ReasonCancelled})
}

func cloneReport(r *latticev1.AllocationReport) *latticev1.AllocationReport {
	return &latticev1.AllocationReport{AllocationId: r.AllocationId, State: r.State, Reason: r.Reason,
		HasExitCode: r.HasExitCode, ExitCode: r.ExitCode, Message: r.Message}
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
		BusyWatts: int32(n.BusyWatts), StateReason: n.StateReason, Agent: n.Agent,
	}
}

// NodeFromProto converts a registered node from the wire.
func NodeFromProto(p *latticev1.Node) model.Node {
	return model.Node{
		Name: p.Name, HomeVCluster: p.HomeVcluster, Group: int(p.Group), Fingerprint: p.Fingerprint,
		GPUType: p.GpuType, GPUs: int(p.Gpus), Features: model.NormalizeFeatures(append([]string(nil), p.Features...)),
		IdleWatts: int(p.IdleWatts), BusyWatts: int(p.BusyWatts),
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
