package server

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/auth"
	"github.com/latticehpc/lattice/leader"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
	"github.com/latticehpc/lattice/rpc/convert"
)

// Services (issue 31, docs/services.md): the ScalingService handlers, the
// heartbeat samples' store, and the dispatcher's service fields. The
// controller is leader.ServiceController.

// recordServiceSamples stores what a heartbeat scraped.
func (s *Server) recordServiceSamples(xs []*latticev1.ServiceSample) {
	if len(xs) == 0 {
		return
	}
	now := time.Now()
	out := make([]leader.ServiceSample, len(xs))
	for i, x := range xs {
		out[i] = leader.ServiceSample{Alloc: x.AllocationId, Endpoint: x.Endpoint, Has: x.HasValue, Value: x.Value, Err: x.Error, At: now}
	}
	s.serviceSamples.Record(out)
}

type scalingService struct {
	latticev1.UnimplementedScalingServiceServer
	s *Server
}

func serviceObject(v *model.Service) auth.Object {
	return auth.Object{Kind: "service", ID: v.Name, Owner: v.User, Tenant: v.Tenant}
}

func specFromProto(p *latticev1.ScaledServiceSpec) model.ServiceSpec {
	if p == nil {
		return model.ServiceSpec{}
	}
	return model.ServiceSpec{
		Name: p.Name, Tenant: p.Tenant, VCluster: p.Vcluster, QOS: p.Qos, PriorityClass: int(p.PriorityClass),
		MinNodes: int(p.MinNodes), MaxNodes: int(p.MaxNodes), Metric: p.ScaleMetric, Target: p.ScaleTarget,
		Cooldown: time.Duration(p.CooldownMs) * time.Millisecond, Stabilization: time.Duration(p.StabilizationMs) * time.Millisecond,
		DrainTime: time.Duration(p.DrainTimeMs) * time.Millisecond, Walltime: time.Duration(p.WalltimeSeconds) * time.Second,
		Command: slices.Clone(p.Command), Env: slices.Clone(p.Env), WorkDir: p.WorkDir, Constraints: slices.Clone(p.Constraints),
	}
}

// specToProto is a spec on the wire; a duration set to zero is -1 there
// (0 asks for the default).
func specToProto(v model.ServiceSpec) *latticev1.ScaledServiceSpec {
	ms := func(d time.Duration) int64 {
		if d == 0 {
			return -1
		}
		return d.Milliseconds()
	}
	return &latticev1.ScaledServiceSpec{
		Name: v.Name, Tenant: v.Tenant, Vcluster: v.VCluster, Qos: v.QOS, PriorityClass: int32(v.PriorityClass),
		MinNodes: int32(v.MinNodes), MaxNodes: int32(v.MaxNodes), ScaleMetric: v.Metric, ScaleTarget: v.Target,
		CooldownMs: ms(v.Cooldown), StabilizationMs: ms(v.Stabilization), DrainTimeMs: ms(v.DrainTime),
		WalltimeSeconds: int64(v.Walltime / time.Second), Command: v.Command, Env: v.Env, WorkDir: v.WorkDir, Constraints: v.Constraints,
	}
}

// admitService fills and checks a spec as Submit does a request: the
// caller's tenant and user, the QOS's class and walltime, the vCluster
// (`service`, or the default vCluster where there is none).
func (h *scalingService) admitService(ctx context.Context, spec *model.ServiceSpec) error {
	if spec.Name == "" {
		return status.Error(codes.InvalidArgument, "invalid name \"\": allowed 1-100 letters, digits, '.', '-' and '_'")
	}
	spec.Env = h.s.dropSecretEnv(spec.Env)
	r := spec.InstanceRequest()
	if err := h.s.admit.Authorize(caller(ctx), &r); err != nil {
		return admissionError(err)
	}
	spec.Tenant, spec.User = r.Tenant, r.User
	var qosErr error
	h.s.view(func(st *quorum.State) {
		if spec.VCluster == "" && st.VCluster(model.DefaultServiceVCluster) == nil {
			spec.VCluster = st.DefaultVCluster
		}
		if spec.QOS != "" {
			q, ok := st.QOS(spec.QOS)
			if !ok {
				qosErr = status.Errorf(codes.InvalidArgument, "invalid qos %q: no such QOS (latticectl qos list)", spec.QOS)
				return
			}
			spec.PriorityClass = q.PriorityClass
			if q.MaxWalltime > 0 && (spec.Walltime == 0 || spec.Walltime > q.MaxWalltime) {
				spec.Walltime = q.MaxWalltime
			}
			if q.VCluster != "" && spec.VCluster == "" {
				spec.VCluster = q.VCluster
			}
		}
	})
	if qosErr != nil {
		return qosErr
	}
	spec.ApplyDefaults()
	if err := spec.Validate(); err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return nil
}

func (h *scalingService) CreateService(ctx context.Context, req *latticev1.CreateScaledServiceRequest) (*latticev1.ScaledServiceStatus, error) {
	spec := specFromProto(req.Spec)
	if err := h.admitService(ctx, &spec); err != nil {
		return nil, err
	}
	res, err := h.s.propose(ctx, &quorum.SetService{Spec: spec, Create: true})
	if err != nil {
		return nil, rpcError(err)
	}
	if res.Rejection != nil {
		return nil, rejectionError(res.Rejection)
	}
	return h.GetService(ctx, &latticev1.GetScaledServiceRequest{Name: spec.Name})
}

func (h *scalingService) UpdateService(ctx context.Context, req *latticev1.UpdateScaledServiceRequest) (*latticev1.ScaledServiceStatus, error) {
	spec := specFromProto(req.Spec)
	v, err := h.find(ctx, spec.Name, "update")
	if err != nil {
		return nil, err
	}
	if spec.Tenant == "" {
		spec.Tenant = v.Tenant
	}
	if err := h.admitService(ctx, &spec); err != nil {
		return nil, err
	}
	res, err := h.s.propose(ctx, &quorum.SetService{Spec: spec})
	if err != nil {
		return nil, rpcError(err)
	}
	if res.Rejection != nil {
		return nil, rejectionError(res.Rejection)
	}
	return h.GetService(ctx, &latticev1.GetScaledServiceRequest{Name: spec.Name})
}

func (h *scalingService) DeleteService(ctx context.Context, req *latticev1.DeleteScaledServiceRequest) (*latticev1.DeleteScaledServiceResponse, error) {
	if _, err := h.find(ctx, req.Name, "delete"); err != nil {
		return nil, err
	}
	res, err := h.s.propose(ctx, &quorum.DeleteService{Name: req.Name})
	if err != nil {
		return nil, rpcError(err)
	}
	if res.Rejection != nil {
		return nil, rejectionError(res.Rejection)
	}
	return &latticev1.DeleteScaledServiceResponse{Cancelled: res.IDs}, nil
}

// find returns a service the caller may read (verb "show") or change.
func (h *scalingService) find(ctx context.Context, name, verb string) (*model.Service, error) {
	var v *model.Service
	h.s.view(func(st *quorum.State) { v = st.Service(name) })
	if v == nil {
		return nil, status.Errorf(codes.NotFound, "service %q does not exist (latticectl service list)", name)
	}
	check := h.s.canChange
	if verb == "show" {
		check = h.s.canRead
	}
	if err := check(ctx, verb, serviceObject(v)); err != nil {
		return nil, err
	}
	return v, nil
}

func (h *scalingService) GetService(ctx context.Context, req *latticev1.GetScaledServiceRequest) (*latticev1.ScaledServiceStatus, error) {
	if _, err := h.find(ctx, req.Name, "show"); err != nil {
		return nil, err
	}
	var out *latticev1.ScaledServiceStatus
	var pending []uint64
	h.s.view(func(st *quorum.State) {
		if v := st.Service(req.Name); v != nil {
			out, pending = h.status(st, v)
		}
	})
	if out == nil {
		return nil, status.Errorf(codes.NotFound, "service %q does not exist", req.Name)
	}
	h.explainWaiting(ctx, out, pending)
	return out, nil
}

func (h *scalingService) ListServices(ctx context.Context, req *latticev1.ListScaledServicesRequest) (*latticev1.ListScaledServicesResponse, error) {
	out := &latticev1.ListScaledServicesResponse{}
	h.s.view(func(st *quorum.State) {
		for _, v := range st.Services() {
			if req.Tenant != "" && v.Tenant != req.Tenant {
				continue
			}
			if !h.s.mayRead(ctx, serviceObject(v)) {
				continue
			}
			p, _ := h.status(st, v)
			out.Services = append(out.Services, p)
		}
	})
	return out, nil
}

// status is a service as clients see it, and its pending instances.
func (h *scalingService) status(st *quorum.State, v *model.Service) (*latticev1.ScaledServiceStatus, []uint64) {
	p := &latticev1.ScaledServiceStatus{Spec: specToProto(v.ServiceSpec), User: v.User, CreateTimeUnixMs: convert.UnixMS(v.CreateTime),
		Desired: int32(v.Desired), Reason: v.Reason, ReasonDetail: v.ReasonDetail, Restarts: int32(v.Restarts)}
	if d := v.LastDecision; d != nil {
		p.LastDecision = &latticev1.ScaledServiceDecision{TimeUnixMs: convert.UnixMS(d.Time), From: int32(d.From), To: int32(d.To), Direction: d.Direction, Reason: d.Reason}
	}
	now := time.Now()
	if avg, n := leader.Average(st, v, h.s.serviceSamples, now, time.Minute); n > 0 {
		p.HasMetricAverage, p.MetricAverage = true, avg
	}
	var pending []uint64
	for _, id := range v.Instances {
		a := st.Allocation(id)
		if a == nil || a.State.Terminal() {
			continue
		}
		in := &latticev1.ScaledServiceInstance{AllocationId: id, State: string(a.State), Reason: a.Reason, Stopping: a.CancelRequested}
		if len(a.Nodes) > 0 {
			in.Node = a.Nodes[0]
		}
		if a.State == model.StateRunning {
			if x, ok := h.s.serviceSamples.Get(id); ok {
				in.Endpoint, in.HasValue, in.Value, in.ScrapeError = x.Endpoint, x.Has, x.Value, x.Err
			}
			if !a.CancelRequested {
				p.Replicas++
			}
		}
		if a.State == model.StatePending {
			pending = append(pending, id)
		}
		p.Instances = append(p.Instances, in)
	}
	return p, pending
}

// explainWaiting says why a service has fewer running instances than it
// wants: its pending instances' explanations (the schedulers'), and where
// its instances borrowed or preempted.
func (h *scalingService) explainWaiting(ctx context.Context, out *latticev1.ScaledServiceStatus, pending []uint64) {
	var parts []string
	if out.Reason != "" {
		parts = append(parts, out.Reason+": "+out.ReasonDetail)
	}
	as := &allocService{s: h.s}
	for _, id := range pending {
		e, err := as.Explain(ctx, &latticev1.ExplainRequest{Id: strconv.FormatUint(id, 10)})
		if err != nil {
			continue
		}
		parts = append(parts, fmt.Sprintf("instance %d pending (%s): %s", id, e.Reason, e.Message))
	}
	borrowed := h.borrowed(out)
	if borrowed != "" {
		parts = append(parts, borrowed)
	}
	out.Waiting = strings.Join(parts, "; ")
}

// borrowed names the instances running on nodes of another vCluster and
// the work stopped for them (preemption, reclaim). It reads every live
// allocation: for `service show` and `explain`, not for listings.
func (h *scalingService) borrowed(out *latticev1.ScaledServiceStatus) string {
	var parts []string
	h.s.view(func(st *quorum.State) {
		for _, in := range out.Instances {
			n := st.Node(in.Node)
			if n == nil || in.State == string(model.StatePending) {
				continue
			}
			if n.CurrentVCluster != "" && n.HomeVCluster != n.CurrentVCluster {
				parts = append(parts, fmt.Sprintf("instance %d runs on %s borrowed from %s", in.AllocationId, n.Name, n.HomeVCluster))
			}
		}
		// Work stopped for its instances (preempted by class, or reclaimed).
		ids := map[uint64]bool{}
		for _, in := range out.Instances {
			ids[in.AllocationId] = true
		}
		for _, a := range st.Allocations() {
			if p := a.Preemption; p != nil && ids[p.ForAlloc] && a.Service != out.Spec.GetName() {
				parts = append(parts, fmt.Sprintf("instance %d took the nodes of allocation %d (class %d, %s, %s)", p.ForAlloc, a.ID, a.PriorityClass, p.Kind, a.State))
			}
		}
	})
	return strings.Join(parts, "; ")
}
