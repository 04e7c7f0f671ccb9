package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/leader"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// stepService launches steps inside running allocations (latticectl run,
// srun). The leader plans the tasks over the allocation's nodes, records
// the step (StepCommand), sends each node's tasks to its agent, relays
// output, and records how the step ended: the worst task's exit, or the
// first failing task's when that failure stopped the others.
type stepService struct {
	latticev1.UnimplementedStepServiceServer
	s *Server
}

// stepKey names a step on the leader.
type stepKey struct {
	alloc uint64
	step  int32
}

// stepRegistry routes agents' step events to the step sessions waiting
// for them. The zero value is ready.
type stepRegistry struct {
	mu       sync.Mutex
	sessions map[stepKey]*stepSession
}

type stepSession struct {
	events chan *latticev1.StepEvent
	done   chan struct{}
}

// beginStep records a new step of allocation alloc in the quorum (its nodes,
// task count and command) and registers its session on the leader l; the
// caller removes the session (l.steps.remove(key)) when the step is over.
func (s *Server) beginStep(ctx context.Context, l *leaderState, alloc uint64, nodes []string, tasks int, command []string) (stepKey, *stepSession, error) {
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	res, err := s.propose(pctx, &quorum.StepCommand{AllocID: alloc, Begin: true, Nodes: nodes, Tasks: tasks, Command: command})
	cancel()
	if err != nil {
		return stepKey{}, nil, rpcError(err)
	}
	if res.Rejection != nil {
		return stepKey{}, nil, rejectionError(res.Rejection)
	}
	key := stepKey{alloc, int32(res.IDs[0])}
	return key, l.steps.add(key), nil
}

func (r *stepRegistry) add(k stepKey) *stepSession {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sessions == nil {
		r.sessions = map[stepKey]*stepSession{}
	}
	ss := &stepSession{events: make(chan *latticev1.StepEvent, 1024), done: make(chan struct{})}
	r.sessions[k] = ss
	return ss
}

func (r *stepRegistry) remove(k stepKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ss := r.sessions[k]; ss != nil {
		close(ss.done)
		delete(r.sessions, k)
	}
}

// deliver hands an agent's event to its step; events of a step nobody
// waits for any more are dropped.
func (r *stepRegistry) deliver(ev *latticev1.StepEvent) {
	r.mu.Lock()
	ss := r.sessions[stepKey{ev.AllocationId, ev.StepId}]
	r.mu.Unlock()
	if ss == nil {
		return
	}
	select {
	case ss.events <- ev:
	case <-ss.done:
	}
}

// nodeTasks is the part of a step planned on one node.
type nodeTasks struct {
	node  string
	index int
	tasks []*latticev1.StepTask
}

// planStep spreads a step's tasks over the first nodes of an allocation,
// block-wise (consecutive ranks on a node), as srun does by default:
// nodes = -N (default: all, or as many as the tasks need); tasks = -n
// (default: nodes × tasks-per-node, or one per node); with tasks-per-node
// every node but the last gets exactly that many.
func planStep(allocNodes []string, nodes, tasks, perNode int) ([]nodeTasks, int, error) {
	if nodes < 0 || tasks < 0 || perNode < 0 {
		return nil, 0, fmt.Errorf("invalid step size: nodes, tasks and tasks per node must be >= 0")
	}
	if nodes > len(allocNodes) {
		return nil, 0, fmt.Errorf("invalid nodes %d: the allocation has %d", nodes, len(allocNodes))
	}
	// Slurm's srun ignores --ntasks-per-node (with a warning) when it does
	// not match the tasks and nodes, e.g. -N1 with the job's
	// SLURM_NTASKS_PER_NODE=2 and SLURM_NTASKS=4.
	if perNode > 0 && tasks > 0 {
		if nodes > 0 && tasks != nodes*perNode {
			perNode = 0
		}
		if nodes == 0 && (tasks+perNode-1)/perNode > len(allocNodes) {
			perNode = 0
		}
	}
	if nodes == 0 {
		switch {
		case tasks > 0 && perNode > 0:
			nodes = min(len(allocNodes), (tasks+perNode-1)/perNode)
		case tasks > 0:
			nodes = min(len(allocNodes), tasks)
		default:
			nodes = len(allocNodes)
		}
	}
	if tasks == 0 {
		tasks = nodes * max(perNode, 1)
	}
	if tasks < nodes { // srun: "can't run 2 processes on 3 nodes, setting nnodes to 2"
		nodes = tasks
	}
	counts := make([]int, nodes)
	if perNode > 0 {
		if tasks > nodes*perNode {
			return nil, 0, fmt.Errorf("invalid tasks %d: more than %d nodes × %d tasks per node", tasks, nodes, perNode)
		}
		left := tasks
		for i := range counts {
			counts[i] = min(perNode, left-(nodes-1-i)) // leave one for each node after
			left -= counts[i]
		}
	} else {
		for i := range counts {
			counts[i] = tasks / nodes
			if i < tasks%nodes {
				counts[i]++
			}
		}
	}
	plan := make([]nodeTasks, nodes)
	rank := 0
	for i := range plan {
		plan[i] = nodeTasks{node: allocNodes[i], index: i}
		for j := range counts[i] {
			plan[i].tasks = append(plan[i].tasks, &latticev1.StepTask{Rank: int32(rank), LocalRank: int32(j)})
			rank++
		}
	}
	return plan, tasks, nil
}

// stepKillWait is how long the leader waits for tasks' exits after
// stopping them, beyond the kill grace, before recording the step.
const stepKillWait = 5 * time.Second

// stagingStepWait is how long a step of a STAGING allocation waits for
// the allocation's RUNNING report (its job may start a step before the
// report is committed).
const stagingStepWait = 10 * time.Second

// Launch runs one step and streams its output.
func (ss *stepService) Launch(req *latticev1.LaunchStepRequest, stream latticev1.StepService_LaunchServer) error {
	s := ss.s
	ctx := stream.Context()
	l := s.currentLeader()
	if l == nil {
		if forwarded(ctx) {
			return status.Error(codes.Unavailable, "no quorum leader right now; retry")
		}
		return ss.proxy(req, stream)
	}
	if len(req.Command) == 0 || req.Command[0] == "" {
		return status.Error(codes.InvalidArgument, "invalid command: a step needs a program to run")
	}
	var al *model.Allocation
	s.view(func(st *quorum.State) { al = st.Allocation(req.AllocationId) })
	// An agent starts the entrypoint before its RUNNING report is
	// committed: a step the job starts at once (srun on a batch script's
	// first line) waits for that report rather than failing (only a caller
	// allowed to launch steps in it waits).
	if al != nil && al.State == model.StateStaging {
		if err := s.canChange(ctx, "launch a step in", allocObject(al)); err != nil {
			return err
		}
	}
	for deadline := time.Now().Add(stagingStepWait); al != nil && al.State == model.StateStaging && !al.CancelRequested && time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-time.After(20 * time.Millisecond):
		}
		s.view(func(st *quorum.State) { al = st.Allocation(req.AllocationId) })
	}
	if al == nil {
		return status.Errorf(codes.NotFound, "allocation %d does not exist", req.AllocationId)
	}
	if al.State != model.StateRunning || al.CancelRequested {
		return status.Errorf(codes.FailedPrecondition, "allocation %d is %s; steps start only inside a RUNNING allocation", al.ID, al.State)
	}
	if err := s.canChange(ctx, "launch a step in", allocObject(al)); err != nil {
		return err
	}
	candidates, err := stepCandidates(al.Nodes, req.NodeList)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	if err := checkStepMPI(req.Mpi); err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	nodes := int(req.Nodes)
	if len(req.NodeList) > 0 && nodes == 0 {
		nodes = len(candidates)
	}
	plan, ntasks, err := planStep(candidates, nodes, int(req.Tasks), int(req.TasksPerNode))
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	conns := make([]*leader.AgentConn, len(plan))
	stepNodes := make([]string, len(plan))
	perNode := make([]int32, len(plan))
	for i, p := range plan {
		stepNodes[i], perNode[i] = p.node, int32(len(p.tasks))
		if conns[i] = l.ConnFor(p.node); conns[i] == nil {
			return status.Errorf(codes.Unavailable, "the agent of node %s is not connected; retry", p.node)
		}
	}
	key, sess, err := s.beginStep(ctx, l, al.ID, stepNodes, ntasks, req.Command)
	if err != nil {
		return err
	}
	defer l.steps.remove(key)
	stepID := key.step
	log := s.log.With("alloc", al.ID, "step", stepID)
	log.Info("step started", "nodes", len(plan), "tasks", ntasks)

	grace := s.cfg.KillGrace
	kill := func() {
		seen := map[*leader.AgentConn]bool{}
		for _, c := range conns {
			if !seen[c] {
				seen[c] = true
				c.Send(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_StepKill{StepKill: &latticev1.StepKill{
					AllocationId: al.ID, StepId: stepID, GraceSeconds: int64(grace / time.Second)}}})
			}
		}
	}
	var (
		exited     = map[int32]int32{}
		worst      int32
		firstFail  *int32
		killedFor  string // "", "failure", "cancel", "agent"
		message    string
		killedAt   time.Time
		clientGone bool
	)
	for i, p := range plan {
		m := &latticev1.StepLaunch{AllocationId: al.ID, StepId: stepID, Node: p.node, NodeIndex: int32(p.index), Tasks: p.tasks,
			Ntasks: int32(ntasks), Command: req.Command, Env: s.dropSecretEnv(req.Env), WorkDir: req.WorkDir, StepNodes: stepNodes, User: al.User,
			Mpi: req.Mpi, CpusPerTask: req.CpusPerTask, StepTasksPerNode: perNode, MultiProg: req.MultiProg}
		if !conns[i].Send(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_StepLaunch{StepLaunch: m}}) {
			killedFor, message = "agent", fmt.Sprintf("could not reach the agent of node %s", p.node)
			for _, t := range p.tasks {
				exited[t.Rank] = 255
			}
		}
	}
	if killedFor != "" {
		kill()
		killedAt = time.Now()
	}
	if err := stream.Send(&latticev1.StepOutput{Msg: &latticev1.StepOutput_Started{Started: &latticev1.StepStarted{
		StepId: stepID, Nodes: stepNodes, Tasks: int32(ntasks)}}}); err != nil {
		clientGone = true
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	fences := pmiFences{}
	stop := func(why, msg string) {
		if killedFor == "" {
			killedFor, message, killedAt = why, msg, time.Now()
			kill()
		}
	}
	var used stepUsage // usage_service.go
	for len(exited) < ntasks {
		if killedFor != "" && time.Since(killedAt) > grace+stepKillWait {
			message += fmt.Sprintf("; %d task(s) did not report their end", ntasks-len(exited))
			break
		}
		changed := s.fsm.Changed()
		select {
		case ev := <-sess.events:
			if ev.NodeDone {
				used.add(ev)
				continue
			}
			if ev.PmiFence != nil {
				fences.add(ev.PmiFence, conns, plan, al.ID, stepID)
				continue
			}
			if !ev.Exited {
				if !clientGone && len(ev.Data) > 0 {
					if stream.Send(&latticev1.StepOutput{Msg: &latticev1.StepOutput_Data{Data: &latticev1.StepData{
						Rank: ev.Rank, Stderr: ev.Stderr, Data: ev.Data}}}) != nil {
						clientGone = true
						stop("cancel", "the caller went away")
					}
				}
				continue
			}
			if _, dup := exited[ev.Rank]; dup {
				continue
			}
			exited[ev.Rank] = ev.ExitCode
			worst = max(worst, ev.ExitCode)
			if ev.ExitCode != 0 && firstFail == nil && killedFor == "" {
				code := ev.ExitCode
				firstFail = &code
				if !req.KeepGoing {
					stop("failure", fmt.Sprintf("task %d exited with code %d; the other tasks were stopped", ev.Rank, code))
				}
			}
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
			for i, c := range conns {
				select {
				case <-c.Done():
					stop("agent", fmt.Sprintf("the agent of node %s disconnected", plan[i].node))
				default:
				}
			}
		case <-l.Context().Done():
			stop("agent", "the leader lost its leadership")
		}
	}

	exit := worst
	state := model.StepCompleted
	switch {
	case killedFor == "failure":
		exit, state = *firstFail, model.StepFailed
	case killedFor == "cancel":
		state = model.StepCancelled
		if exit == 0 {
			exit = 128 + 15
		}
	case killedFor == "agent":
		state, exit = model.StepFailed, max(exit, 255)
	case exit != 0:
		state = model.StepFailed
	}
	code := int(exit)
	if killedFor != "agent" {
		used.wait(sess.events, len(plan))
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	if _, err := s.propose(rctx, &quorum.StepCommand{AllocID: al.ID, StepID: int(stepID), State: state, ExitCode: &code, Usage: used.sum}); err != nil {
		log.Warn("record step end", "err", err)
	}
	rcancel()
	log.Info("step ended", "state", state, "exit_code", code, "why", killedFor)
	if clientGone {
		return ctx.Err()
	}
	return stream.Send(&latticev1.StepOutput{Msg: &latticev1.StepOutput_End{End: &latticev1.StepEnd{
		State: string(state), ExitCode: exit, Message: message}}})
}

// proxy relays Launch from the leader (agents talk to the leader).
func (ss *stepService) proxy(req *latticev1.LaunchStepRequest, stream latticev1.StepService_LaunchServer) error {
	return relayFromLeader(ss.s, stream.Context(), func(cc *grpc.ClientConn, ctx context.Context) (recvStream[*latticev1.StepOutput], error) {
		return latticev1.NewStepServiceClient(cc).Launch(ctx, req)
	}, stream.Send)
}
