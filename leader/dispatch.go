package leader

import (
	"cmp"
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
	"github.com/latticehpc/lattice/rpc/convert"
)

// AgentConn is one connected agent's stream, as the leader sees it.
type AgentConn struct {
	id    string
	out   chan *latticev1.ServerMessage
	done  chan struct{}
	nodes []string
	// holder: who this connection is (agent_claim.go).
	holder Holder

	mu sync.Mutex
	// sent and cancelSent map an allocation to the run (its requeue count)
	// whose assignment or cancellation was delivered; a requeued allocation
	// assigned again is a new run.
	sent       map[uint64]int
	cancelSent map[uint64]int
	reported   map[uint64]bool  // allocations whose run the agent reported ended
	ckptSent   map[uint64]int64 // checkpoint requests delivered: deadline (Unix ms)
	frozen     map[uint64]bool  // preemption freezes delivered (gang.go): allocation frozen here
	logWaiters map[uint64]chan *latticev1.LogData
	closed     bool
	// unsettled: runs the agent said it still had when it attached, counted
	// as sent with the quorum's run number; every pass reconciles them
	// (the quorum may no longer want them, and a new run of the same number
	// must not look delivered), the others once a second (reconcileEvery).
	unsettled map[uint64]bool
}

func (c *AgentConn) send(m *latticev1.ServerMessage) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	select {
	case c.out <- m:
		return true
	default:
		return false // the agent is not keeping up; the next pass retries
	}
}

func (c *AgentConn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func (c *AgentConn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		close(c.done)
	}
}

// reportIn is one agent report waiting to be committed.
type reportIn struct {
	conn   *AgentConn
	report *latticev1.AllocationReport
}

// dispatcher streams committed assignments and cancellations to agents and
// commits their reports in batches.
type dispatcher struct {
	t       *Term
	mu      sync.Mutex
	conns   map[string]*AgentConn // by agent id
	byNode  map[string]*AgentConn
	reports chan reportIn
	logSeq  uint64
	kick    chan struct{}
	claims  nodeClaims // which connected agent holds each node
}

func newDispatcher(t *Term) *dispatcher {
	return &dispatcher{t: t, conns: map[string]*AgentConn{}, byNode: map[string]*AgentConn{},
		reports: make(chan reportIn, 8192), kick: make(chan struct{}, 1)}
}

func (d *dispatcher) attach(c *AgentConn) {
	d.mu.Lock()
	if old := d.conns[c.id]; old != nil {
		old.close()
		for _, n := range old.nodes {
			if d.byNode[n] == old {
				delete(d.byNode, n)
			}
		}
	}
	d.conns[c.id] = c
	for _, n := range c.nodes {
		d.byNode[n] = c
	}
	d.mu.Unlock()
	d.poke()
}

func (d *dispatcher) detach(c *AgentConn) {
	c.close()
	d.claims.release(c)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.conns[c.id] == c {
		delete(d.conns, c.id)
	}
	for _, n := range c.nodes {
		if d.byNode[n] == c {
			delete(d.byNode, n)
		}
	}
}

func (d *dispatcher) connFor(node string) *AgentConn {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.byNode[node]
}

func (d *dispatcher) closeAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.conns {
		c.close()
	}
}

func (d *dispatcher) poke() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// run delivers work whenever committed state changes (and every second, to
// retry what could not be sent).
func (d *dispatcher) run(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var reconciled time.Time
	for {
		changed := d.t.host.Changed()
		// Comparing every run sent (10,000 on a full site) with committed
		// state on every change (every submission is one) took a third of
		// a leader's CPU under the read lock Apply waits for: once a
		// second, and the runs agents brought when they attached on every
		// pass.
		full := time.Since(reconciled) >= reconcileEvery
		if full {
			reconciled = time.Now()
		}
		d.pass(full)
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-d.kick:
		case <-tick.C:
		}
	}
}

type delivery struct {
	conn *AgentConn
	msg  *latticev1.ServerMessage
	id   uint64
	run  int // requeue count of the run the message is about
	kind int // deliverAssign, deliverCancel, deliverCheckpoint
	// forgotten: the run was forgotten in the same pass; nothing to mark
	forgotten bool
	ckpt      int64 // checkpoint deadline
	// for the checkpoint metrics
	vcluster, reason string
}

const (
	deliverAssign = iota
	deliverCancel
	deliverCheckpoint
	deliverFreeze // a preemption's freeze or thaw (gang.go)
)

// pass compares committed state with what each agent was told.
// reconcileEvery is how often the dispatcher compares every run it sent
// with committed state (work the quorum ended without the agent's report).
const reconcileEvery = time.Second

func (d *dispatcher) pass(reconcileAll bool) {
	grace := int64(d.t.cfg.KillGrace / time.Second)
	var out []delivery
	d.mu.Lock()
	conns := make([]*AgentConn, 0, len(d.conns))
	for _, c := range d.conns {
		conns = append(conns, c)
	}
	d.mu.Unlock()
	d.t.view(func(st *quorum.State) {
		out = d.preemptFreezes(st, conns, out)   // before any start on their nodes
		for _, a := range st.StagingAnyOrder() { // order does not matter; a sort of thousands would, under the lock
			if len(a.Nodes) == 0 {
				continue
			}
			c := d.connFor(a.Nodes[0])
			if c == nil || c.wasSent(a.ID, a.RequeueCount) {
				continue
			}
			out = append(out, delivery{conn: c, id: a.ID, run: a.RequeueCount, msg: &latticev1.ServerMessage{Msg: &latticev1.ServerMessage_Assign{
				Assign: serviceAssignment(st, a, &latticev1.Assignment{Allocation: convert.AllocToProto(a), LaunchNode: a.Nodes[0], GraceSeconds: allocGrace(a, grace)})}}})
		}
		for _, a := range st.Cancelling() {
			if len(a.Nodes) == 0 {
				continue
			}
			c := d.connFor(a.Nodes[0])
			if c == nil || c.wasCancelSent(a.ID, a.RequeueCount) {
				continue
			}
			out = append(out, delivery{conn: c, id: a.ID, run: a.RequeueCount, kind: deliverCancel, msg: cancelMsg(a.ID, model.ReasonCancelled, allocGrace(a, grace))})
		}
		for _, a := range st.Checkpointing() {
			if len(a.Nodes) == 0 || a.CancelRequested {
				continue
			}
			c := d.connFor(a.Nodes[0])
			deadline := convert.UnixMS(a.CheckpointDeadline)
			if c == nil || c.ckptDeadline(a.ID) == deadline {
				continue
			}
			out = append(out, delivery{conn: c, id: a.ID, run: a.RequeueCount, kind: deliverCheckpoint, ckpt: deadline,
				vcluster: a.VCluster, reason: a.CheckpointReason, msg: checkpointMsg(a, allocGrace(a, grace))})
		}
		// Work an agent runs that the quorum ended without its report (a node
		// failure elsewhere, a requeue): tell it to stop.
		// These cancels are not marked: the run is forgotten at once (a mark
		// after it would make the cancel of a later run look delivered).
		for _, c := range conns {
			runs := c.unsettledRuns()
			if reconcileAll {
				runs = c.sentRuns()
			}
			for id, run := range runs {
				a := st.Allocation(id)
				if a != nil && a.RequeueCount == run && (a.State.Active() || a.GangSuspended()) {
					c.settle(id)
				}
				switch {
				case a != nil && a.RequeueCount != run:
					// A newer run exists. When it is (to be) assigned to this
					// agent, the agent stops the old run before starting it;
					// otherwise the old run, which ended without a report (a
					// node lost, the agent away), is stopped now: its node
					// takes no work until it is gone.
					here := (a.State == model.StateStaging || a.State.Active()) && len(a.Nodes) > 0 && d.connFor(a.Nodes[0]) == c
					if !here && !c.hasReported(id) {
						out = append(out, delivery{conn: c, id: id, run: run, kind: deliverCancel, forgotten: true,
							msg: cancelMsg(id, cmp.Or(a.Reason, model.ReasonRequeued), grace)})
					}
					c.forget(id)
				case a == nil || a.State.Terminal() || a.State == model.StatePending || a.State == model.StateSuspended && !a.GangSuspended():
					if !c.hasReported(id) && !c.wasCancelSent(id, run) {
						reason := model.ReasonCancelled
						if a != nil && a.Reason != "" {
							reason = a.Reason
						}
						out = append(out, delivery{conn: c, id: id, run: run, kind: deliverCancel, forgotten: true, msg: cancelMsg(id, reason, grace)})
					}
					c.forget(id)
				}
			}
		}
	})
	for _, dv := range out {
		if !dv.conn.send(dv.msg) {
			continue
		}
		if !dv.forgotten {
			dv.conn.mark(dv)
		}
		switch dv.kind {
		case deliverAssign:
			d.t.cfg.Metrics.Dispatched.Inc()
		case deliverCheckpoint:
			d.t.cfg.Metrics.Checkpoints.WithLabelValues(dv.vcluster, dv.reason, "requested").Inc()
		}
	}
}

// checkpointMsg is the request to checkpoint a, by its mode.
func checkpointMsg(a *model.Allocation, grace int64) *latticev1.ServerMessage {
	sig := 0
	if a.CheckpointSignal != "" {
		sig, _ = model.ParseSignal(a.CheckpointSignal)
	}
	return &latticev1.ServerMessage{Msg: &latticev1.ServerMessage_Checkpoint{Checkpoint: &latticev1.CheckpointRequest{
		AllocationId: a.ID, Mode: string(a.Checkpoint), DeadlineUnixMs: convert.UnixMS(a.CheckpointDeadline),
		Stop: quorum.Stopping(a), Signal: int32(sig), Hook: a.CheckpointHook, Webhook: a.CheckpointWebhook,
		Reason: a.CheckpointReason, GraceSeconds: grace,
	}}}
}

// checkpointAck forwards a webhook-mode acknowledgement to the agent of a's
// first node.
func (d *dispatcher) checkpointAck(a *model.Allocation, failed bool) error {
	if len(a.Nodes) == 0 {
		return status.Errorf(codes.FailedPrecondition, "allocation %s runs on no node", a.DisplayID())
	}
	c := d.connFor(a.Nodes[0])
	if c == nil {
		return status.Errorf(codes.Unavailable, "the agent of node %s is not connected; retry", a.Nodes[0])
	}
	if !c.send(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_CheckpointAck{CheckpointAck: &latticev1.CheckpointAck{AllocationId: a.ID, Failed: failed}}}) {
		return status.Errorf(codes.Unavailable, "the agent of node %s is busy; retry", a.Nodes[0])
	}
	return nil
}

func cancelMsg(id uint64, reason string, grace int64) *latticev1.ServerMessage {
	return &latticev1.ServerMessage{Msg: &latticev1.ServerMessage_Cancel{
		Cancel: &latticev1.CancelAllocation{AllocationId: id, Reason: reason, GraceSeconds: grace}}}
}

func (c *AgentConn) wasSent(id uint64, run int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.sent[id]
	return ok && r == run
}

func (c *AgentConn) wasCancelSent(id uint64, run int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.cancelSent[id]
	return ok && r == run
}

func (c *AgentConn) ckptDeadline(id uint64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ckptSent[id]
}

func (c *AgentConn) hasReported(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reported[id]
}

func (c *AgentConn) mark(dv delivery) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch dv.kind {
	case deliverAssign:
		c.sent[dv.id] = dv.run
		delete(c.reported, dv.id) // a new run
		delete(c.ckptSent, dv.id)
	case deliverCancel:
		c.cancelSent[dv.id] = dv.run
	case deliverCheckpoint:
		c.ckptSent[dv.id] = dv.ckpt
	case deliverFreeze:
		c.setFrozen(dv.id, dv.msg.GetFreeze().GetFreeze())
	}
}

func (c *AgentConn) forget(id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.unsettled, id)
	delete(c.sent, id)
	delete(c.reported, id)
	delete(c.cancelSent, id)
	delete(c.ckptSent, id)
}

// unsettledRuns copies the delivered assignments the agent brought when it
// attached and that are not settled yet: id → run.
func (c *AgentConn) unsettledRuns() map[uint64]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[uint64]int, len(c.unsettled))
	for id := range c.unsettled {
		if r, ok := c.sent[id]; ok {
			out[id] = r
		} else {
			delete(c.unsettled, id)
		}
	}
	return out
}

// settle marks an attached run as one the quorum wants: it is reconciled
// with the others from now on.
func (c *AgentConn) settle(id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.unsettled, id)
}

// sentRuns copies the delivered assignments: id → run.
func (c *AgentConn) sentRuns() map[uint64]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[uint64]int, len(c.sent))
	for id, r := range c.sent {
		out[id] = r
	}
	return out
}

// Report batching: agents' reports from every connection are committed
// together, one Raft entry per batch, then acknowledged. A batch stays
// open reportBatchWait after its first report (plus whatever arrives while
// the previous batch commits): long enough that a short job's start and end
// reports, and the reports of the jobs that start and end around it, share
// one entry (a bolt commit with two fdatasyncs on every member), short
// against the time a node stays busy. Nothing is acknowledged before its
// batch commits, so an agent that dies meanwhile sends its reports again.
const (
	maxReportBatch  = 512
	reportBatchWait = 20 * time.Millisecond
)

func (d *dispatcher) batchReports(ctx context.Context) {
	for {
		batch := collectReports(ctx, d.reports, reportBatchWait, maxReportBatch)
		if batch == nil {
			return
		}
		d.commitReports(ctx, batch)
	}
}

// collectReports waits for a first report, then takes what arrives within
// wait of it, at most max; nil once ctx ends.
func collectReports(ctx context.Context, in <-chan reportIn, wait time.Duration, max int) []reportIn {
	var batch []reportIn
	select {
	case <-ctx.Done():
		return nil
	case r := <-in:
		batch = append(batch, r)
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for len(batch) < max {
		select {
		case r := <-in:
			batch = append(batch, r)
		case <-deadline.C:
			return batch
		}
	}
	return batch
}

func (d *dispatcher) commitReports(ctx context.Context, batch []reportIn) {
	cmd := &quorum.UpdateAllocs{}
	keep := batch[:0]
	for _, in := range batch {
		st, err := model.ParseAllocState(in.report.State)
		if err != nil {
			d.t.log.Warn("agent reported an unknown state", "agent", in.conn.id, "alloc", in.report.AllocationId, "state", in.report.State)
			in.conn.send(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_Ack{Ack: &latticev1.ReportAck{Seq: in.report.Seq}}})
			continue
		}
		u := quorum.AllocUpdate{AllocID: in.report.AllocationId, State: st, Reason: in.report.Reason, Run: int(in.report.Run)}
		if ms := in.report.EndUnixMs; ms > 0 && st.Terminal() {
			u.EndTime = time.UnixMilli(ms).UTC()
		}
		if ms := in.report.StartUnixMs; ms > 0 && st == model.StateRunning {
			u.StartTime = time.UnixMilli(ms).UTC()
		}
		if in.report.HasExitCode {
			code := int(in.report.ExitCode)
			u.ExitCode = &code
		}
		if st.Terminal() || st == model.StateSuspended {
			u.Usage = convert.UsageFromProto(in.report.Usage)
		}
		cmd.Updates = append(cmd.Updates, u)
		keep = append(keep, in)
	}
	if len(cmd.Updates) == 0 {
		return
	}
	// Checkpoint outcomes, counted once committed: vCluster and reason of
	// the checkpoint each report answers.
	type ckpt struct{ vc, reason string }
	outcomes := make([]ckpt, len(cmd.Updates))
	var records []*quorum.RecordUsage
	d.t.view(func(st *quorum.State) {
		for i, u := range cmd.Updates {
			a := st.Allocation(u.AllocID)
			if a != nil && a.State == model.StateCheckpointing {
				outcomes[i] = ckpt{a.VCluster, a.CheckpointReason}
			}
			// A requeued allocation's usage is that of all its runs: its
			// Usage holds its earlier runs' sum until this run's end.
			if a != nil && u.Usage != nil && a.RequeueCount > 0 && u.Run-1 == a.RequeueCount && a.State != u.State {
				cmd.Updates[i].Usage = u.Usage.PlusEarlierRuns(a.Usage)
			}
			if a != nil && u.Usage != nil && a.RequeueRequested && a.State.Active() && a.State != u.State && u.Run-1 == a.RequeueCount {
				// A user's requeue stops this run: the requeue keeps no
				// usage, recorded after the reports (RecordUsage).
				records = append(records, &quorum.RecordUsage{ID: a.ID, RequeueCount: a.RequeueCount + 1, Usage: cmd.Updates[i].Usage})
			}
		}
	})
	var mail map[uint64]MailBefore
	if d.t.cfg.Mail.On() {
		ids := make([]uint64, len(cmd.Updates))
		for i, u := range cmd.Updates {
			ids[i] = u.AllocID
		}
		mail = d.t.cfg.Mail.Snapshot(ids)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	r, err := d.t.propose(pctx, cmd)
	cancel()
	if err != nil {
		// Not acknowledged: the agent sends them again to the next leader.
		d.t.log.Warn("commit agent reports", "count", len(cmd.Updates), "err", err)
		return
	}
	d.t.cfg.Mail.After(mail)
	d.t.recordUsage(ctx, records)
	for i, u := range cmd.Updates {
		if o := outcomes[i]; o.reason != "" && i < len(r.Items) && r.Items[i].Committed {
			d.t.cfg.Metrics.Checkpoints.WithLabelValues(o.vc, o.reason, checkpointResult(u)).Inc()
		}
	}
	for i, in := range keep {
		if i < len(r.Items) && r.Items[i].Rejection != nil {
			d.t.log.Debug("agent report not applied", "alloc", in.report.AllocationId, "state", in.report.State, "why", r.Items[i].Rejection.Message)
		}
		if st, _ := model.ParseAllocState(in.report.State); st.Terminal() || st == model.StateSuspended || st == model.StatePending {
			in.conn.mu.Lock()
			in.conn.reported[in.report.AllocationId] = true
			in.conn.mu.Unlock()
		}
		in.conn.send(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_Ack{Ack: &latticev1.ReportAck{Seq: in.report.Seq}}})
	}
}

// readLog asks the agent of node for a piece of an allocation's output.
func (d *dispatcher) readLog(ctx context.Context, node string, req *latticev1.LogRequest) (*latticev1.LogData, error) {
	c := d.connFor(node)
	if c == nil {
		return nil, status.Errorf(codes.Unavailable, "the agent of node %s is not connected; its output cannot be read now", node)
	}
	d.mu.Lock()
	d.logSeq++
	req.RequestId = d.logSeq
	d.mu.Unlock()
	ch := make(chan *latticev1.LogData, 1)
	c.mu.Lock()
	c.logWaiters[req.RequestId] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.logWaiters, req.RequestId)
		c.mu.Unlock()
	}()
	if !c.send(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_LogRequest{LogRequest: req}}) {
		return nil, status.Errorf(codes.Unavailable, "the agent of node %s is busy; retry", node)
	}
	select {
	case data := <-ch:
		return data, nil
	case <-c.done:
		return nil, status.Errorf(codes.Unavailable, "the agent of node %s disconnected", node)
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(10 * time.Second):
		return nil, status.Errorf(codes.DeadlineExceeded, "the agent of node %s did not answer", node)
	}
}

func (c *AgentConn) deliverLog(data *latticev1.LogData) {
	c.mu.Lock()
	ch := c.logWaiters[data.RequestId]
	c.mu.Unlock()
	if ch != nil {
		select {
		case ch <- data:
		default:
		}
	}
}

// checkpointResult names how a report ended a checkpoint request.
func checkpointResult(u quorum.AllocUpdate) string {
	switch {
	case u.Reason == model.ReasonCheckpointed:
		return "acked"
	case u.Reason == model.ReasonCheckpointTimeout:
		return "timed_out"
	case u.Reason == model.ReasonCheckpointFailed:
		return "failed"
	case u.State.Terminal():
		return "ended" // the work ended meanwhile (completed, failed, cancelled)
	}
	return "exited" // stopped without a checkpoint (acknowledged by its exit)
}

// NewAgentConn is the stream of agent id, for nodes, before it is claimed
// and attached.
func NewAgentConn(id string, nodes []string, holder Holder) *AgentConn {
	return &AgentConn{
		id: id, out: make(chan *latticev1.ServerMessage, 4096), done: make(chan struct{}), nodes: nodes, holder: holder,
		sent: map[uint64]int{}, cancelSent: map[uint64]int{}, reported: map[uint64]bool{}, ckptSent: map[uint64]int64{}, unsettled: map[uint64]bool{},
		logWaiters: map[uint64]chan *latticev1.LogData{},
	}
}

// ID is the agent's id; Nodes the nodes it connected for; Holder who it is.
func (c *AgentConn) ID() string      { return c.id }
func (c *AgentConn) Nodes() []string { return c.nodes }
func (c *AgentConn) Holder() Holder  { return c.holder }

// Send queues a message to the agent; false when the stream is closed or
// the agent is not keeping up (the caller retries or says so).
func (c *AgentConn) Send(m *latticev1.ServerMessage) bool { return c.send(m) }

// Out is what the stream's sender writes to the agent.
func (c *AgentConn) Out() <-chan *latticev1.ServerMessage { return c.out }

// Done is closed when the stream is closed (leadership lost, the agent
// replaced by its own reconnection, detached).
func (c *AgentConn) Done() <-chan struct{} { return c.done }

// Adopt counts an allocation the agent says it still runs (its hello) as
// delivered, as run number run: the dispatcher stops it if the quorum no
// longer wants that run. Before Attach only.
func (c *AgentConn) Adopt(id uint64, run int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent[id] = run
	c.unsettled[id] = true
}

// DeliverLog hands an agent's answer to the ReadLog waiting for it.
func (c *AgentConn) DeliverLog(data *latticev1.LogData) { c.deliverLog(data) }

// Attach makes c the stream of its nodes (replacing an earlier stream of
// the same agent id); Detach closes and forgets it, and releases its claim.
func (t *Term) Attach(c *AgentConn) { t.disp.attach(c) }
func (t *Term) Detach(c *AgentConn) { t.disp.detach(c) }

// ConnFor is the stream of the agent of node (nil: none connected).
func (t *Term) ConnFor(node string) *AgentConn { return t.disp.connFor(node) }

// Report queues an agent's report for the next batch commit (acknowledged
// after it); false when c closed first.
func (t *Term) Report(c *AgentConn, r *latticev1.AllocationReport) bool {
	select {
	case t.disp.reports <- reportIn{conn: c, report: r}:
		return true
	case <-c.done:
		return false
	}
}

// ReadLog asks the agent of node for a piece of an allocation's output.
func (t *Term) ReadLog(ctx context.Context, node string, req *latticev1.LogRequest) (*latticev1.LogData, error) {
	return t.disp.readLog(ctx, node, req)
}

// CheckpointAck forwards a webhook-mode acknowledgement to the agent of
// a's first node.
func (t *Term) CheckpointAck(a *model.Allocation, failed bool) error {
	return t.disp.checkpointAck(a, failed)
}

// CancelMessage is the message that stops run id on its agent, with the
// reason and the SIGTERM→SIGKILL grace in seconds.
func CancelMessage(id uint64, reason string, graceSeconds int64) *latticev1.ServerMessage {
	return cancelMsg(id, reason, graceSeconds)
}
