package server

import (
	"context"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latticehpc/lattice/admission"
	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/dag"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
	"github.com/latticehpc/lattice/rpc/convert"
)

// dagService is DAGService: the leader-side half of the DAG controller. The
// FSM releases and cancels stages (quorum/dependencies.go); this checks a
// workflow before it is proposed as one Submit command, and reports
// workflows as a whole from committed state.
type dagService struct {
	latticev1.UnimplementedDAGServiceServer
	s *Server
}

// dagLimits are the cluster's limits on workflows.
func (s *Server) dagLimits() dag.Limits {
	return dag.Limits{MaxStages: s.cfg.MaxDAGStages, MaxArraySize: s.admit.ArraySize()}
}

func (d *dagService) SubmitDAG(ctx context.Context, req *latticev1.SubmitDAGRequest) (*latticev1.SubmitDAGResponse, error) {
	spec := &dag.Spec{Name: req.Name}
	for _, st := range req.Stages {
		if err := wireOf(st.Request).Check(); err != nil {
			return nil, admissionError(err)
		}
		ss := dag.SpecStage{Name: st.Name, Request: convert.RequestFromProto(st.Request)}
		ss.Request.Env = d.s.dropSecretEnv(ss.Request.Env)
		if err := admission.Limits(&ss.Request); err != nil {
			return nil, admissionError(err)
		}
		for _, dep := range st.DependsOn {
			ss.DependsOn = append(ss.DependsOn, model.DAGDependency{Name: dep.Name, Condition: model.DependencyCondition(dep.Condition)})
		}
		spec.Stages = append(spec.Stages, ss)
	}
	plan, err := spec.Plan(d.s.dagLimits())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	cmd := &quorum.Submit{Header: quorum.Header{RequestID: req.ClientRequestId}, DAG: true, Name: plan.Name,
		Items: make([]quorum.SubmitItem, len(plan.Stages))}
	for i := range plan.Stages {
		if err := d.s.admit.Authorize(caller(ctx), &plan.Stages[i].Request); err != nil {
			return nil, admissionError(err)
		}
	}
	for i, st := range plan.Stages {
		it := quorum.SubmitItem{Request: st.Request}
		for _, a := range st.After {
			it.AfterItems = append(it.AfterItems, quorum.ItemDep{Condition: a.Condition, Index: a.Index})
		}
		cmd.Items[i] = it
	}
	res, err := d.s.propose(ctx, cmd)
	if err != nil {
		return nil, rpcError(err)
	}
	if res.Rejection != nil {
		return nil, rejectionError(res.Rejection)
	}
	d.s.metrics.submitted.Add(float64(len(res.IDs)))
	resp := &latticev1.SubmitDAGResponse{DagId: res.IDs[0], Name: plan.Name}
	next := 0
	for _, st := range plan.Stages {
		n := 1
		if st.Request.Array != nil {
			n = st.Request.Array.Count()
		}
		ref := &latticev1.DAGStageRef{Name: st.Name, Id: res.IDs[next], DisplayId: strconv.FormatUint(res.IDs[next], 10)}
		if st.Request.Array != nil {
			ref.Tasks = int32(n)
		}
		resp.Allocations = append(resp.Allocations, ref)
		next += n
	}
	return resp, nil
}

// findDAG resolves a DAG id or name (the latest of that name).
func findDAG(st *quorum.State, id string) (*model.DAG, error) {
	id = strings.TrimSpace(id)
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "invalid id: allowed a DAG id or name")
	}
	if n, err := strconv.ParseUint(id, 10, 64); err == nil {
		if g := st.DAG(n); g != nil {
			return g, nil
		}
		if a := st.Allocation(n); a != nil && a.DAGID != 0 && st.DAG(a.DAGID) != nil {
			return st.DAG(a.DAGID), nil // an allocation of the DAG
		}
		return nil, notFound("DAG %s not found", id)
	}
	var found *model.DAG
	for _, g := range st.DAGs() {
		if g.Name == id {
			found = g
		}
	}
	if found == nil {
		return nil, notFound("no DAG named %q", id)
	}
	return found, nil
}

// stageStatus reads one stage from committed state.
func (d *dagService) stageStatus(st *quorum.State, g *model.DAG, stage model.DAGStage) *latticev1.DAGStageStatus {
	p := &latticev1.DAGStageStatus{Name: stage.Name, Id: stage.ID, DisplayId: strconv.FormatUint(stage.ID, 10), Tasks: int32(stage.Tasks)}
	for _, dep := range stage.DependsOn {
		p.DependsOn = append(p.DependsOn, &latticev1.DAGDependency{Name: dep.Name, Condition: string(dep.Condition)})
	}
	if stage.Tasks == 0 {
		a := st.Allocation(stage.ID)
		if a == nil { // past retention: the history of ended jobs has it
			if r := st.HistoryRecordOf(stage.ID); r != nil && r.DAGID == g.ID {
				a = r.Allocation()
			}
		}
		if a == nil || a.DAGID != g.ID {
			p.State, p.Reason = string(model.StateCancelled), reasonPruned
			return p
		}
		p.State, p.Reason, p.ReasonDetail = string(a.State), a.Reason, a.ReasonDetail
		if a.State.Active() {
			p.TasksActive = 1
		}
		if a.State.Terminal() {
			p.TasksEnded = 1
		}
		if a.State == model.StateCompleted {
			p.TasksCompleted = 1
		}
		return p
	}
	// An array: its tasks together; the reason of the first task in the
	// state the array is reported in.
	states := make([]model.AllocState, 0, stage.Tasks)
	var tasks []*model.Allocation
	for pos := range stage.Tasks {
		if a := st.Allocation(stage.ID + uint64(pos)); a != nil && a.ArrayJobID == stage.ID && a.DAGID == g.ID {
			states = append(states, a.State)
			tasks = append(tasks, a)
		}
	}
	state := dag.ArrayState(states)
	p.State = string(state)
	_, active, ended, completed, _ := st.ArrayProgress(stage.ID)
	p.TasksActive, p.TasksEnded, p.TasksCompleted = int32(active), int32(ended), int32(completed)
	if len(tasks) == 0 {
		p.Reason = reasonPruned
		return p
	}
	for _, a := range tasks {
		if a.State == state || (state == model.StateRunning && a.State.Active()) {
			p.Reason, p.ReasonDetail = a.Reason, a.ReasonDetail
			break
		}
	}
	return p
}

// reasonPruned marks a stage whose allocations were pruned (retention).
const reasonPruned = "Pruned"

func (d *dagService) dagStatus(st *quorum.State, g *model.DAG, withStages bool) *latticev1.DAGStatus {
	p := &latticev1.DAGStatus{DagId: g.ID, Name: g.Name, SubmitTimeUnixMs: convert.UnixMS(g.SubmitTime), Stages: int32(len(g.Stages))}
	if a := st.Allocation(g.ID); a != nil {
		p.Tenant = a.Tenant
	}
	stages := make([]dag.StageStatus, len(g.Stages))
	var end time.Time
	for i, stage := range g.Stages {
		sp := d.stageStatus(st, g, stage)
		if withStages {
			p.Allocations = append(p.Allocations, sp)
		}
		reason := sp.Reason
		if reason == reasonPruned {
			reason = model.ReasonDependencyNeverSatisfied // ended long ago: not counted
		}
		stages[i] = dag.StageStatus{State: model.AllocState(sp.State), Reason: reason}
		switch s := model.AllocState(sp.State); {
		case s == model.StateCompleted:
			p.StagesCompleted++
		case s.Active():
			p.StagesActive++
		case !s.Terminal():
			p.StagesPending++
		case s == model.StateCancelled && reason == model.ReasonDependencyNeverSatisfied:
			p.StagesSkipped++
		default:
			p.StagesFailed++
		}
		for pos := range max(stage.Tasks, 1) {
			if a := st.Allocation(stage.ID + uint64(pos)); a != nil && a.EndTime.After(end) {
				end = a.EndTime
			}
		}
	}
	state := dag.State(stages)
	p.State = string(state)
	if state != model.DAGRunning {
		p.EndTimeUnixMs = convert.UnixMS(end)
	}
	return p
}

func (d *dagService) GetDAG(ctx context.Context, req *latticev1.GetDAGRequest) (*latticev1.DAGStatus, error) {
	var out *latticev1.DAGStatus
	var err error
	waiting := map[int]*model.Allocation{} // stages waiting for the scheduler
	d.s.view(func(st *quorum.State) {
		var g *model.DAG
		if g, err = findDAG(st, req.Id); err != nil {
			return
		}
		if err = d.s.canRead(ctx, "show", dagObject(st, g)); err != nil {
			return
		}
		out = d.dagStatus(st, g, true)
		for i, sp := range out.Allocations {
			if a := st.Allocation(sp.Id); sp.Tasks == 0 && a != nil && a.State == model.StatePending && a.Reason == model.ReasonWaitingForScheduling {
				waiting[i] = a
			}
		}
	})
	// The scheduler's reason (Priority, Resources, ...), outside the state lock.
	alloc := &allocService{s: d.s}
	for i, a := range waiting {
		out.Allocations[i].Reason = alloc.withExplanation(a).Reason
	}
	return out, err
}

func (d *dagService) ListDAGs(ctx context.Context, req *latticev1.ListDAGsRequest) (*latticev1.ListDAGsResponse, error) {
	resp := &latticev1.ListDAGsResponse{}
	if req.Mine && req.Tenant == "" {
		req.Tenant = d.s.admit.DefaultTenantOf(caller(ctx))
	}
	d.s.view(func(st *quorum.State) {
		for _, g := range st.DAGs() {
			p := d.dagStatus(st, g, false)
			if (req.Tenant == "" || p.Tenant == req.Tenant) && d.s.mayRead(ctx, dagObject(st, g)) {
				resp.Dags = append(resp.Dags, p)
			}
		}
	})
	return resp, nil
}

func (d *dagService) CancelDAG(ctx context.Context, req *latticev1.CancelDAGRequest) (*latticev1.CancelDAGResponse, error) {
	var ids []uint64
	var running int32
	var dagID uint64
	var err error
	d.s.view(func(st *quorum.State) {
		var g *model.DAG
		if g, err = findDAG(st, req.Id); err != nil {
			return
		}
		if err = d.s.canChange(ctx, "cancel", dagObject(st, g)); err != nil {
			return
		}
		dagID = g.ID
		for _, stage := range g.Stages {
			for pos := range max(stage.Tasks, 1) {
				a := st.Allocation(stage.ID + uint64(pos))
				switch {
				case a == nil || a.DAGID != g.ID || a.State.Terminal():
				case req.PendingOnly && a.State != model.StatePending && a.State != model.StateSuspended:
					running++
				default:
					ids = append(ids, a.ID)
				}
			}
		}
	})
	if err != nil {
		return nil, err
	}
	resp := &latticev1.CancelDAGResponse{DagId: dagID, Running: running}
	if len(ids) == 0 {
		return resp, nil
	}
	res, err := d.s.propose(ctx, &quorum.Cancel{Header: quorum.Header{RequestID: req.ClientRequestId}, IDs: ids})
	if err != nil {
		return nil, rpcError(err)
	}
	if res.Rejection != nil {
		return nil, rejectionError(res.Rejection)
	}
	for _, it := range res.Items {
		if it.Committed {
			resp.Cancelled = append(resp.Cancelled, it.ID)
		}
	}
	return resp, nil
}
