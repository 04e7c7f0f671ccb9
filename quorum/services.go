package quorum

import (
	"maps"
	"slices"
	"time"

	"github.com/latticehpc/lattice/model"
)

// Services (issue 31): a service's record and the changes its controller
// (leader/services.go) proposes: SetService, DeleteService and
// ScaleService (115–117 in schema.go, Level1). An instance is an ordinary one-node allocation with
// Allocation.Service set: it is placed, borrowed for, preempted, counted in
// quotas and power like any other.

// SetService creates a service (Create) or replaces the spec of an existing
// one. Spec is defaulted and validated before it is proposed
// (model.ServiceSpec ApplyDefaults, Validate). A new service's desired count is its minimum; an update clamps the
// desired count into the new [min, max].
type SetService struct {
	Header
	Spec   model.ServiceSpec `json:"spec"`
	Create bool              `json:"create,omitempty"`
}

// DeleteService removes a service and cancels its instances (running ones
// get SIGTERM and the service's drain time before SIGKILL).
type DeleteService struct {
	Header
	Name string `json:"name"`
}

// ScaleService is one step of a service's controller, computed from the
// state at Version: the new desired count (with the decision that changed
// it), Start new pending instances, Stop instances (cancelled with
// StopReason), Forget ended instances, and the restart back-off. Apply
// re-checks what must hold whatever the controller saw: stopped instances
// are live ones of this service, forgotten ones have ended, and the live
// instances never exceed the maximum.
type ScaleService struct {
	Header
	Name string `json:"name"`
	// Desired and Decision are set when the desired count changes.
	Desired  int                    `json:"desired"`
	Decision *model.ServiceDecision `json:"decision,omitempty"`
	Start    int                    `json:"start,omitempty"`
	// Request is each new instance's request, prepared before propose
	// (model.ServiceSpec.InstanceRequest); required when Start > 0.
	Request *model.Request `json:"request,omitempty"`
	// Restarts counts the starts among Start that replace an instance that
	// ended on its own.
	Restarts     int       `json:"restarts,omitempty"`
	Stop         []uint64  `json:"stop,omitempty"`
	StopReason   string    `json:"stop_reason,omitempty"`
	Forget       []uint64  `json:"forget,omitempty"`
	Failures     int       `json:"failures"`
	RestartAfter time.Time `json:"restart_after,omitzero"`
	Reason       string    `json:"reason,omitempty"`
	ReasonDetail string    `json:"reason_detail,omitempty"`
}

// Service returns the named service, or nil.
func (s *State) Service(name string) *model.Service { return s.services[name] }

// Services returns every service in name order.
func (s *State) Services() []*model.Service {
	out := make([]*model.Service, 0, len(s.services))
	for _, name := range slices.Sorted(maps.Keys(s.services)) {
		out = append(out, s.services[name])
	}
	return out
}

func (s *State) putService(v *model.Service) {
	if s.services == nil {
		s.services = map[string]*model.Service{}
	}
	s.services[v.Name] = v
	s.touch()
}

func (s *State) applySetService(c *SetService) *Result {
	// The spec arrives defaulted and validated (the handler did it before
	// propose); Apply re-checks only what never changes meaning.
	spec := c.Spec
	if spec.Name == "" || spec.MinNodes < 1 || spec.MaxNodes < spec.MinNodes || len(spec.Command) == 0 {
		return &Result{Rejection: reject(CodeInvalid, "", "invalid service %q: needs a name, 1 <= min <= max nodes and a command", spec.Name)}
	}
	if s.vclusters[spec.VCluster] == nil {
		return &Result{Rejection: reject(CodeInvalid, "", "invalid vcluster %q: allowed %s", spec.VCluster, s.vclusterNames())}
	}
	old := s.services[spec.Name]
	switch {
	case c.Create && old != nil:
		return &Result{Rejection: reject(CodeConflict, "", "service %s already exists", spec.Name)}
	case !c.Create && old == nil:
		return &Result{Rejection: reject(CodeNotFound, "", "service %s does not exist", spec.Name)}
	}
	var v *model.Service
	if old == nil {
		v = &model.Service{ServiceSpec: spec, CreateTime: c.Time, Desired: spec.MinNodes, LastChange: c.Time}
	} else {
		if old.Tenant != spec.Tenant {
			return &Result{Rejection: reject(CodeInvalid, "", "invalid tenant %q: a service keeps its tenant (%s)", spec.Tenant, old.Tenant)}
		}
		v = old.Clone()
		spec.User = old.User
		v.ServiceSpec = spec
		v.Desired = min(max(v.Desired, spec.MinNodes), spec.MaxNodes)
	}
	s.putService(v)
	return &Result{}
}

func (s *State) applyDeleteService(c *DeleteService) *Result {
	v := s.services[c.Name]
	if v == nil {
		return &Result{Rejection: reject(CodeNotFound, "", "service %s does not exist", c.Name)}
	}
	var live []uint64
	for _, id := range v.Instances {
		if a := s.allocs[id]; a != nil && !a.State.Terminal() {
			live = append(live, id)
		}
	}
	if len(live) > 0 {
		s.applyCancel(&Cancel{Header: c.Header, IDs: live})
	}
	delete(s.services, c.Name)
	s.touch()
	return &Result{IDs: live}
}

// applyScaleService applies one controller step, all or nothing; a
// rejected step is planned again from fresh state at the next cycle.
func (s *State) applyScaleService(c *ScaleService) *Result {
	v := s.services[c.Name]
	if v == nil {
		return &Result{Rejection: reject(CodeNotFound, "", "service %s does not exist", c.Name)}
	}
	if c.Desired < v.MinNodes || c.Desired > v.MaxNodes {
		return &Result{Rejection: reject(CodeInvalid, "", "invalid desired %d: allowed %d..%d", c.Desired, v.MinNodes, v.MaxNodes)}
	}
	stop := make(map[uint64]bool, len(c.Stop))
	for _, id := range c.Stop {
		a := s.allocs[id]
		if a == nil || a.Service != v.Name || a.State.Terminal() {
			return &Result{Rejection: reject(CodeConflict, "", "allocation %d is not a live instance of service %s", id, v.Name)}
		}
		stop[id] = true
	}
	forget := make(map[uint64]bool, len(c.Forget))
	for _, id := range c.Forget {
		if a := s.allocs[id]; a != nil && !a.State.Terminal() {
			return &Result{Rejection: reject(CodeConflict, "", "instance %d of service %s has not ended", id, v.Name)}
		}
		forget[id] = true
	}
	live := 0
	for _, id := range v.Instances {
		if a := s.allocs[id]; a != nil && !a.State.Terminal() && !a.CancelRequested && !stop[id] {
			live++
		}
	}
	if c.Start < 0 || live+c.Start > v.MaxNodes {
		return &Result{Rejection: reject(CodeConflict, "", "service %s would have %d live instances, allowed at most %d", v.Name, live+c.Start, v.MaxNodes)}
	}
	var r model.Request
	if c.Start > 0 {
		if c.Request == nil || c.Request.NodesMin != 1 || c.Request.NodesMax != 1 {
			return &Result{Rejection: reject(CodeInvalid, "", "service %s: new instances need a one-node request", v.Name)}
		}
		r = *c.Request
		if s.vclusters[r.VCluster] == nil {
			return &Result{Rejection: reject(CodeConflict, "", "service %s: vcluster %s does not exist", v.Name, r.VCluster)}
		}
	}
	nv := v.Clone()
	nv.Instances = slices.DeleteFunc(nv.Instances, func(id uint64) bool { return forget[id] })
	if len(c.Stop) > 0 {
		s.applyCancel(&Cancel{Header: c.Header, IDs: c.Stop, Reason: c.StopReason})
	}
	res := &Result{}
	for range c.Start {
		a := &model.Allocation{ID: s.NextID, Request: r, SubmitTime: c.Time, Service: v.Name, StopGrace: v.DrainTime}
		s.NextID++
		transition(a, model.StatePending, "", c.Time)
		s.settleNew(a, c.Time)
		s.putAlloc(a)
		nv.Instances = append(nv.Instances, a.ID)
		res.IDs = append(res.IDs, a.ID)
	}
	if c.Desired != v.Desired || c.Decision != nil {
		nv.Desired = c.Desired
		nv.LastChange = c.Time
		if c.Decision != nil {
			d := *c.Decision
			nv.LastDecision = &d
		}
	}
	nv.Restarts += c.Restarts
	nv.Failures, nv.RestartAfter = c.Failures, c.RestartAfter
	nv.Reason, nv.ReasonDetail = c.Reason, c.ReasonDetail
	s.putService(nv)
	return res
}
