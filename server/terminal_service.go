package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/leader"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// terminalService runs interactive steps (latticectl run --pty, srun
// --pty) and lets users join running steps (latticectl attach). A pty
// step is one task on the allocation's first node, started on a
// pseudo-terminal by its agent; the client's keystrokes, window sizes and
// signals go to the agent as StepInput on the agent's stream, and the
// terminal's output comes back as the task's StepEvents. Like Launch, a
// follower relays the stream to the leader, which holds every step.
type terminalService struct {
	latticev1.UnimplementedTerminalServiceServer
	s *Server
}

// terminalRegistry is, on the leader, who watches a step's output besides
// the session that launched it (latticectl attach), and where a pty
// step's input goes. The zero value is ready.
type terminalRegistry struct {
	mu       sync.Mutex
	watchers map[stepKey]map[chan *latticev1.StepEvent]struct{}
	inputs   map[stepKey]*leader.AgentConn
}

// publish copies an agent's step event to the step's watchers; a watcher
// that does not keep up loses output rather than slowing the agent.
func (r *terminalRegistry) publish(ev *latticev1.StepEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for ch := range r.watchers[stepKey{ev.AllocationId, ev.StepId}] {
		select {
		case ch <- ev:
		default:
		}
	}
}

func (r *terminalRegistry) watch(k stepKey) chan *latticev1.StepEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.watchers == nil {
		r.watchers = map[stepKey]map[chan *latticev1.StepEvent]struct{}{}
	}
	if r.watchers[k] == nil {
		r.watchers[k] = map[chan *latticev1.StepEvent]struct{}{}
	}
	ch := make(chan *latticev1.StepEvent, 1024)
	r.watchers[k][ch] = struct{}{}
	return ch
}

func (r *terminalRegistry) unwatch(k stepKey, ch chan *latticev1.StepEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.watchers[k], ch)
	if len(r.watchers[k]) == 0 {
		delete(r.watchers, k)
	}
}

func (r *terminalRegistry) setInput(k stepKey, c *leader.AgentConn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c == nil {
		delete(r.inputs, k)
		return
	}
	if r.inputs == nil {
		r.inputs = map[stepKey]*leader.AgentConn{}
	}
	r.inputs[k] = c
}

// input sends a terminal's input to the agent of a pty step; false when
// the step has no terminal (or has ended).
func (r *terminalRegistry) input(k stepKey, in *latticev1.TerminalInput) bool {
	r.mu.Lock()
	c := r.inputs[k]
	r.mu.Unlock()
	if c == nil {
		return false
	}
	m := &latticev1.StepInput{AllocationId: k.alloc, StepId: k.step, Data: in.GetData(), Resize: in.GetResize(),
		Signal: in.GetSignal(), CloseStdin: in.GetCloseStdin()}
	msg := &latticev1.ServerMessage{Msg: &latticev1.ServerMessage_StepInput{StepInput: m}}
	// The agent's queue is short and shared: wait a little for room rather
	// than lose a keystroke.
	for range 200 {
		if c.Send(msg) {
			return true
		}
		select {
		case <-c.Done():
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
	return false
}

// Terminal opens a pty step or attaches to a running step.
func (ts *terminalService) Terminal(stream latticev1.TerminalService_TerminalServer) error {
	s := ts.s
	ctx := stream.Context()
	l := s.currentLeader()
	if l == nil {
		if forwarded(ctx) {
			return status.Error(codes.Unavailable, "no quorum leader right now; retry")
		}
		return ts.proxy(stream)
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	open := first.GetOpen()
	if open == nil {
		return status.Error(codes.InvalidArgument, "invalid terminal stream: its first message opens it (TerminalOpen)")
	}
	if open.Launch != nil {
		return ts.launch(l, open, stream)
	}
	return ts.attach(l, open, stream)
}

// runningAlloc returns allocation id once it is RUNNING (a STAGING one is
// waited for a little, as Launch does), checking the caller may use it.
func (ts *terminalService) runningAlloc(ctx context.Context, id uint64, verb string) (*model.Allocation, error) {
	s := ts.s
	var al *model.Allocation
	s.view(func(st *quorum.State) { al = st.Allocation(id) })
	if al != nil && al.State == model.StateStaging {
		if err := s.canChange(ctx, verb, allocObject(al)); err != nil {
			return nil, err
		}
	}
	for deadline := time.Now().Add(stagingStepWait); al != nil && al.State == model.StateStaging && !al.CancelRequested && time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-time.After(20 * time.Millisecond):
		}
		s.view(func(st *quorum.State) { al = st.Allocation(id) })
	}
	if al == nil {
		return nil, status.Errorf(codes.NotFound, "allocation %d does not exist", id)
	}
	if err := s.canChange(ctx, verb, allocObject(al)); err != nil {
		return nil, err
	}
	if al.State != model.StateRunning || al.CancelRequested {
		return nil, status.Errorf(codes.FailedPrecondition, "allocation %d is %s; steps run only inside a RUNNING allocation", al.ID, al.State)
	}
	return al, nil
}

// recvInput reads the client's side of a terminal stream and hands each
// message to deliver; gone is closed when the client has gone away.
func recvInput(stream latticev1.TerminalService_TerminalServer, deliver func(*latticev1.TerminalInput)) (gone chan struct{}) {
	gone = make(chan struct{})
	go func() {
		defer close(gone)
		for {
			in, err := stream.Recv()
			if err != nil {
				return
			}
			if in.GetOpen() == nil {
				deliver(in)
			}
		}
	}()
	return gone
}

// launch runs a one-task step on a pseudo-terminal on the allocation's
// first node and relays it until the task ends.
func (ts *terminalService) launch(l *leaderState, open *latticev1.TerminalOpen, stream latticev1.TerminalService_TerminalServer) error {
	s := ts.s
	ctx := stream.Context()
	req := open.Launch
	if len(req.Command) == 0 || req.Command[0] == "" {
		return status.Error(codes.InvalidArgument, "invalid command: a step needs a program to run")
	}
	if req.Tasks > 1 || req.Nodes > 1 || req.TasksPerNode > 1 {
		return status.Errorf(codes.InvalidArgument, "invalid --pty with %d node(s) and %d task(s): a terminal step runs one task, on the allocation's first node", req.Nodes, req.Tasks)
	}
	al, err := ts.runningAlloc(ctx, req.AllocationId, "launch a step in")
	if err != nil {
		return err
	}
	node := al.Nodes[0]
	conn := l.ConnFor(node)
	if conn == nil {
		return status.Errorf(codes.Unavailable, "the agent of node %s is not connected; retry", node)
	}
	key, sess, err := s.beginStep(ctx, l, al.ID, []string{node}, 1, req.Command)
	if err != nil {
		return err
	}
	defer l.steps.remove(key)
	stepID := key.step
	l.terms.setInput(key, conn)
	defer l.terms.setInput(key, nil)
	log := s.log.With("alloc", al.ID, "step", stepID)
	log.Info("terminal step started", "node", node)

	m := &latticev1.StepLaunch{AllocationId: al.ID, StepId: stepID, Node: node, NodeIndex: 0,
		Tasks: []*latticev1.StepTask{{Rank: 0, LocalRank: 0}}, Ntasks: 1, Command: req.Command, Env: req.Env,
		WorkDir: req.WorkDir, StepNodes: []string{node}, User: al.User, Pty: true}
	if sz := open.Size; sz != nil {
		m.PtyRows, m.PtyCols = sz.Rows, sz.Cols
	}
	grace := s.cfg.KillGrace
	var (
		killedFor, message string
		killedAt           time.Time
		exit               int32
		exited             bool
		clientGone         bool
	)
	stop := func(why, msg string) {
		if killedFor != "" {
			return
		}
		killedFor, message, killedAt = why, msg, time.Now()
		conn.Send(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_StepKill{StepKill: &latticev1.StepKill{
			AllocationId: al.ID, StepId: stepID, GraceSeconds: int64(grace / time.Second)}}})
	}
	if !conn.Send(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_StepLaunch{StepLaunch: m}}) {
		stop("agent", fmt.Sprintf("could not reach the agent of node %s", node))
		exit, exited = 255, true
	}
	if err := stream.Send(&latticev1.StepOutput{Msg: &latticev1.StepOutput_Started{Started: &latticev1.StepStarted{
		StepId: stepID, Nodes: []string{node}, Tasks: 1}}}); err != nil {
		clientGone = true
		stop("cancel", "the caller went away")
	}
	gone := recvInput(stream, func(in *latticev1.TerminalInput) { l.terms.input(key, in) })
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for !exited {
		if killedFor != "" && time.Since(killedAt) > grace+stepKillWait {
			message += "; the task did not report its end"
			exit = max(exit, 255)
			break
		}
		changed := s.fsm.Changed()
		select {
		case ev := <-sess.events:
			if !ev.Exited {
				if !clientGone && len(ev.Data) > 0 && stream.Send(&latticev1.StepOutput{Msg: &latticev1.StepOutput_Data{Data: &latticev1.StepData{
					Rank: ev.Rank, Data: ev.Data}}}) != nil {
					clientGone = true
					stop("cancel", "the caller went away")
				}
				continue
			}
			exit, exited = ev.ExitCode, true
			if ev.Message != "" && message == "" {
				message = ev.Message
			}
		case <-gone:
			gone = nil // a closed channel: once
			clientGone = true
			stop("cancel", "the terminal went away (hung up)")
		case <-ctx.Done():
			clientGone = true
			stop("cancel", "the caller went away (interrupted)")
		case <-changed:
			var cur *model.Allocation
			s.view(func(st *quorum.State) { cur = st.Allocation(al.ID) })
			if cur == nil || cur.State != model.StateRunning || cur.CancelRequested {
				stop("cancel", "the allocation is no longer running")
			}
		case <-tick.C:
			select {
			case <-conn.Done():
				stop("agent", fmt.Sprintf("the agent of node %s disconnected", node))
				exit, exited = max(exit, 255), true
			default:
			}
		case <-l.Context().Done():
			stop("agent", "the leader lost its leadership")
			exit, exited = max(exit, 255), true
		}
	}
	state := model.StepCompleted
	switch {
	case killedFor == "cancel":
		state = model.StepCancelled
		if exit == 0 {
			exit = 128 + 1 // SIGHUP
		}
	case killedFor == "agent" || exit != 0:
		state = model.StepFailed
	}
	code := int(exit)
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	if _, err := s.propose(rctx, &quorum.StepCommand{AllocID: al.ID, StepID: int(stepID), State: state, ExitCode: &code}); err != nil {
		log.Warn("record step end", "err", err)
	}
	rcancel()
	log.Info("terminal step ended", "state", state, "exit_code", code, "why", killedFor)
	if clientGone {
		return ctx.Err()
	}
	return stream.Send(&latticev1.StepOutput{Msg: &latticev1.StepOutput_End{End: &latticev1.StepEnd{
		State: string(state), ExitCode: exit, Message: message}}})
}

// attach joins a running step: its output from now on, and (for a pty
// step) input, until the step ends or the caller leaves; the step itself
// goes on when the caller leaves.
func (ts *terminalService) attach(l *leaderState, open *latticev1.TerminalOpen, stream latticev1.TerminalService_TerminalServer) error {
	s := ts.s
	ctx := stream.Context()
	al, err := ts.runningAlloc(ctx, open.AttachAllocationId, "attach to")
	if err != nil {
		return err
	}
	stepID := open.AttachStepId
	if stepID < 0 {
		for i := len(al.Steps) - 1; i >= 0; i-- {
			if !al.Steps[i].State.Ended() {
				stepID = int32(i)
				break
			}
		}
		if stepID < 0 {
			return status.Errorf(codes.FailedPrecondition, "allocation %d has no running step to attach to", al.ID)
		}
	}
	if int(stepID) >= len(al.Steps) {
		return status.Errorf(codes.NotFound, "allocation %d has no step %d", al.ID, stepID)
	}
	if st := al.Steps[stepID]; st.State.Ended() {
		return status.Errorf(codes.FailedPrecondition, "step %d.%d already ended %s", al.ID, stepID, st.State)
	}
	key := stepKey{al.ID, stepID}
	events := l.terms.watch(key)
	defer l.terms.unwatch(key, events)
	st := al.Steps[stepID]
	if err := stream.Send(&latticev1.StepOutput{Msg: &latticev1.StepOutput_Started{Started: &latticev1.StepStarted{
		StepId: stepID, Nodes: st.Nodes, Tasks: int32(st.Tasks)}}}); err != nil {
		return err
	}
	gone := recvInput(stream, func(in *latticev1.TerminalInput) { l.terms.input(key, in) })
	for {
		changed := s.fsm.Changed()
		select {
		case ev := <-events:
			if len(ev.Data) > 0 {
				if err := stream.Send(&latticev1.StepOutput{Msg: &latticev1.StepOutput_Data{Data: &latticev1.StepData{
					Rank: ev.Rank, Stderr: ev.Stderr, Data: ev.Data}}}); err != nil {
					return err
				}
			}
		case <-gone:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-l.Context().Done():
			return status.Error(codes.Unavailable, "the leader lost its leadership; attach again")
		case <-changed:
			var cur *model.Allocation
			s.view(func(st *quorum.State) { cur = st.Allocation(al.ID) })
			if cur == nil || int(stepID) >= len(cur.Steps) {
				return status.Errorf(codes.NotFound, "allocation %d is gone", al.ID)
			}
			if step := cur.Steps[stepID]; step.State.Ended() {
				drain(events, stream)
				end := &latticev1.StepEnd{State: string(step.State)}
				if step.ExitCode != nil {
					end.ExitCode = int32(*step.ExitCode)
				}
				return stream.Send(&latticev1.StepOutput{Msg: &latticev1.StepOutput_End{End: end}})
			}
		}
	}
}

// drain sends what output is already queued.
func drain(events chan *latticev1.StepEvent, stream latticev1.TerminalService_TerminalServer) {
	for {
		select {
		case ev := <-events:
			if len(ev.Data) > 0 {
				_ = stream.Send(&latticev1.StepOutput{Msg: &latticev1.StepOutput_Data{Data: &latticev1.StepData{
					Rank: ev.Rank, Stderr: ev.Stderr, Data: ev.Data}}})
			}
		default:
			return
		}
	}
}

// proxy relays a terminal stream, both ways, to the leader.
func (ts *terminalService) proxy(stream latticev1.TerminalService_TerminalServer) error {
	s := ts.s
	ctx := stream.Context()
	cc, err := s.dialLeader()
	if err != nil {
		return err
	}
	defer cc.Close()
	uctx, cancel := context.WithCancel(forwardContext(ctx))
	defer cancel()
	up, err := latticev1.NewTerminalServiceClient(cc).Terminal(uctx)
	if err != nil {
		return err
	}
	go func() {
		for {
			in, err := stream.Recv()
			if err != nil {
				if errors.Is(err, io.EOF) {
					_ = up.CloseSend()
				} else {
					cancel()
				}
				return
			}
			if up.Send(in) != nil {
				return
			}
		}
	}()
	for {
		m, err := up.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(m); err != nil {
			return err
		}
	}
}
