package quorum

import (
	"slices"
	"strings"
	"time"

	"github.com/latticehpc/lattice/model"
)

// Job control (scontrol hold/release/requeue/update) and the site
// configuration (QOS table, partition names).

// Hold holds pending allocations (Release false) or releases them. Kind is
// who holds: model.HoldUser or model.HoldAdmin. A release by a non-admin
// (Admin false) cannot lift an admin's hold.
type Hold struct {
	Header
	IDs     []uint64 `json:"ids"`
	Release bool     `json:"release,omitempty"`
	Kind    string   `json:"kind,omitempty"`
	Admin   bool     `json:"admin,omitempty"`
}

// UpdateAlloc changes what a user asked for, in every allocation of IDs (an
// array's tasks) or in none. A pending allocation may change every field
// given; an active one only its name and, shrinking only unless Admin, its
// walltime.
type UpdateAlloc struct {
	Header
	IDs           []uint64       `json:"ids"`
	Walltime      *time.Duration `json:"walltime,omitempty"`
	NodesMin      *int           `json:"nodes_min,omitempty"`
	NodesMax      *int           `json:"nodes_max,omitempty"`
	PriorityClass *int           `json:"priority_class,omitempty"`
	VCluster      *string        `json:"vcluster,omitempty"`
	Name          *string        `json:"name,omitempty"`
	BeginTime     *time.Time     `json:"begin_time,omitempty"`
	QOS           *string        `json:"qos,omitempty"`
	Admin         bool           `json:"admin,omitempty"`
}

// RequeueJobs is a user's requeue (scontrol requeue): a staging or
// suspended allocation goes back to PENDING at once; a running one is
// stopped by its agent and goes back to PENDING when the stop is reported.
type RequeueJobs struct {
	Header
	IDs []uint64 `json:"ids"`
	// Hold, when set (model.HoldUser or HoldAdmin), requeues them held
	// (scontrol requeuehold).
	Hold string `json:"hold,omitempty"`
}

// SetQOS creates or replaces one QOS entry, or deletes it.
type SetQOS struct {
	Header
	QOS    model.QOS `json:"qos"`
	Delete bool      `json:"delete,omitempty"`
}

// SetPartition maps a partition name to a vCluster ("" deletes it).
type SetPartition struct {
	Header
	Name     string `json:"name"`
	VCluster string `json:"vcluster,omitempty"`
}

func (s *State) applyHold(c *Hold) *Result {
	kind := c.Kind
	if kind == "" {
		kind = model.HoldUser
	}
	if !c.Release && kind != model.HoldUser && kind != model.HoldAdmin {
		return &Result{Rejection: reject(CodeInvalid, "", "invalid hold kind %q: allowed user or admin", c.Kind)}
	}
	res := &Result{Items: make([]ItemResult, len(c.IDs))}
	for i, id := range c.IDs {
		res.Items[i] = ItemResult{ID: id}
		a := s.allocs[id]
		var rej *Rejection
		switch {
		case a == nil:
			rej = reject(CodeNotFound, "", "allocation %d does not exist", id)
		case a.State != model.StatePending:
			verb := "held"
			if c.Release {
				verb = "released"
			}
			rej = reject(CodeConflict, "", "allocation %d is %s; only PENDING allocations can be %s", id, a.State, verb)
		case c.Release && a.Held == "":
			// Nothing to release: idempotent.
		case c.Release && a.Held == model.HoldAdmin && !c.Admin:
			rej = reject(CodeConflict, model.ReasonJobHeldAdmin, "allocation %d is held by an admin; only an admin can release it", id)
		case !c.Release && a.Held == kind:
		case !c.Release && a.Held == model.HoldAdmin && kind == model.HoldUser:
			// An admin's hold stays: a user's hold adds nothing.
		default:
			cp := modify(a)
			if c.Release {
				cp.Held = ""
			} else {
				cp.Held = kind
			}
			s.replaceAlloc(a, cp)
			s.touch()
		}
		res.Items[i].Rejection = rej
		res.Items[i].Committed = rej == nil
	}
	return res
}

func (s *State) applyUpdateAlloc(c *UpdateAlloc) *Result {
	if len(c.IDs) == 0 {
		return &Result{Rejection: reject(CodeInvalid, "", "update names no allocation")}
	}
	olds := make([]*model.Allocation, len(c.IDs))
	news := make([]*model.Allocation, len(c.IDs))
	for i, id := range c.IDs {
		a := s.allocs[id]
		if a == nil {
			return &Result{Rejection: reject(CodeNotFound, "", "allocation %d does not exist", id)}
		}
		if slices.Contains(c.IDs[:i], id) {
			return &Result{Rejection: reject(CodeInvalid, "", "allocation %d named twice", id)}
		}
		cp, rej := s.updated(a, c)
		if rej != nil {
			return &Result{Rejection: rej}
		}
		olds[i], news[i] = a, cp
	}
	for i := range olds {
		s.replaceAlloc(olds[i], news[i])
	}
	s.touch()
	return &Result{IDs: slices.Clone(c.IDs)}
}

// updated is a with c's changes, or why not.
func (s *State) updated(a *model.Allocation, c *UpdateAlloc) (*model.Allocation, *Rejection) {
	id := a.ID
	if a.State.Terminal() {
		return nil, reject(CodeConflict, "", "allocation %d already ended %s", id, a.State)
	}
	pending := a.State == model.StatePending
	if !pending && (c.NodesMin != nil || c.NodesMax != nil || c.PriorityClass != nil || c.VCluster != nil || c.BeginTime != nil || c.QOS != nil) {
		return nil, reject(CodeConflict, "", "allocation %d is %s: only its time limit (shorter) and name can change; nodes, priority, vcluster, qos and begin time only while PENDING", id, a.State)
	}
	cp := modify(a)
	if c.Walltime != nil {
		if !pending && !c.Admin && *c.Walltime > a.Walltime {
			return nil, reject(CodeConflict, "", "allocation %d is %s: its time limit may only shrink (now %s, asked %s); an admin may extend it",
				id, a.State, model.FormatWalltime(a.Walltime), model.FormatWalltime(*c.Walltime))
		}
		cp.Walltime = *c.Walltime
	}
	if c.NodesMin != nil {
		cp.NodesMin = *c.NodesMin
	}
	if c.NodesMax != nil {
		cp.NodesMax = *c.NodesMax
	}
	if c.NodesMin != nil && c.NodesMax == nil && cp.NodesMax < cp.NodesMin {
		cp.NodesMax = cp.NodesMin
	}
	if c.PriorityClass != nil {
		cp.PriorityClass = *c.PriorityClass
	}
	if c.QOS != nil {
		cp.QOS = *c.QOS
	}
	if c.Name != nil {
		cp.Name = *c.Name
	}
	if c.BeginTime != nil {
		cp.BeginTime = *c.BeginTime
	}
	if c.VCluster != nil {
		vc := s.resolvePartition(*c.VCluster)
		if s.vclusters[vc] == nil {
			return nil, reject(CodeInvalid, "", "invalid vcluster %q: allowed %s", *c.VCluster, s.vclusterNames())
		}
		cp.VCluster = vc
	}
	if err := cp.Request.ValidateLevel0(); err != nil {
		return nil, reject(CodeInvalid, "", "%v", err)
	}
	if n := len(s.nodeNames); n > 0 && cp.NodesMin > n && cp.Held == "" {
		return nil, reject(CodeInvalid, model.ReasonBadConstraints, "invalid nodes %d: the cluster has %d nodes", cp.NodesMin, n)
	}
	return cp, nil
}

func (s *State) applyRequeueJobs(c *RequeueJobs) *Result {
	res := &Result{Items: make([]ItemResult, len(c.IDs))}
	for i, id := range c.IDs {
		res.Items[i] = ItemResult{ID: id}
		a := s.allocs[id]
		var rej *Rejection
		switch {
		case a == nil:
			rej = reject(CodeNotFound, "", "allocation %d does not exist", id)
		case a.State == model.StatePending:
			rej = reject(CodeConflict, "", "allocation %d is PENDING already; nothing to requeue", id)
		case a.State.Terminal():
			rej = reject(CodeConflict, "", "allocation %d already ended %s; submit it again to run it again", id, a.State)
		case a.CancelRequested && !a.RequeueRequested:
			rej = reject(CodeConflict, "", "allocation %d is being cancelled", id)
		case a.State == model.StateStaging || a.State == model.StateSuspended:
			rej = s.updateAlloc(AllocUpdate{AllocID: id, State: model.StatePending, Reason: model.ReasonRequeued}, c.Time)
		case a.RequeueRequested:
		default: // running or checkpointing: its agent stops it first
			cp := modify(a)
			cp.CancelRequested, cp.RequeueRequested = true, true
			s.replaceAlloc(a, cp)
			s.touch()
		}
		if rej == nil && c.Hold != "" {
			if b := s.allocs[id]; b.Held != model.HoldAdmin {
				cp := modify(b)
				cp.Held = c.Hold // takes effect once it is PENDING again
				s.replaceAlloc(b, cp)
				s.touch()
			}
		}
		res.Items[i].Rejection = rej
		res.Items[i].Committed = rej == nil
	}
	return res
}

// requeueStopped sends c (a copy being changed), whose agent reported the
// stop a user's requeue asked for, back to the queue: its run ends
// SUSPENDED (usage charged, nodes freed) and it goes PENDING, reason
// Requeued, requeue count + 1, in the same command.
func (s *State) requeueStopped(c *model.Allocation, t time.Time) {
	transition(c, model.StateSuspended, model.ReasonRequeued, t)
	s.checkpointEnded(c, model.ReasonRequeued, t)
	if !c.StartTime.IsZero() && len(c.Nodes) > 0 {
		s.chargeUsage(c.Tenant, float64(len(c.Nodes))*t.Sub(c.StartTime).Seconds(), t)
	}
	s.releaseNodes(c, t)
	c.Nodes = nil
	c.StartTime = time.Time{}
	c.CancelRequested, c.RequeueRequested = false, false
	transition(c, model.StatePending, model.ReasonRequeued, t)
	c.RequeueCount++
}

// --- Site configuration ---------------------------------------------------------------

// QOSTable lists the site's QOS entries by name; a cluster whose table was
// never set has model.DefaultQOS.
func (s *State) QOSTable() []model.QOS {
	if s.qos == nil {
		out := model.DefaultQOS()
		slices.SortFunc(out, func(a, b model.QOS) int { return strings.Compare(a.Name, b.Name) })
		return out
	}
	return slices.Clone(s.qos)
}

// QOS returns one QOS entry by name (case-insensitive).
func (s *State) QOS(name string) (model.QOS, bool) {
	for _, q := range s.QOSTable() {
		if strings.EqualFold(q.Name, name) {
			return q, true
		}
	}
	return model.QOS{}, false
}

// Partitions maps partition names to vClusters.
func (s *State) Partitions() map[string]string {
	out := make(map[string]string, len(s.partitions))
	for k, v := range s.partitions {
		out[k] = v
	}
	return out
}

// resolvePartition maps a partition name to its vCluster; any other name
// (a vCluster's own) is returned as is.
func (s *State) resolvePartition(name string) string {
	if s.vclusters[name] == nil {
		if vc, ok := s.partitions[name]; ok {
			return vc
		}
	}
	return name
}

// ResolveVCluster is resolvePartition for readers.
func (s *State) ResolveVCluster(name string) string { return s.resolvePartition(name) }

func (s *State) applySetQOS(c *SetQOS) *Result {
	if err := c.QOS.ValidateLevel0(); err != nil {
		return &Result{Rejection: reject(CodeInvalid, "", "%v", err)}
	}
	if c.QOS.VCluster != "" && s.vclusters[c.QOS.VCluster] == nil {
		return &Result{Rejection: reject(CodeInvalid, "", "invalid vcluster %q: allowed %s", c.QOS.VCluster, s.vclusterNames())}
	}
	table := s.QOSTable()
	i := slices.IndexFunc(table, func(q model.QOS) bool { return strings.EqualFold(q.Name, c.QOS.Name) })
	switch {
	case c.Delete && i < 0:
		return &Result{Rejection: reject(CodeNotFound, "", "qos %q does not exist", c.QOS.Name)}
	case c.Delete:
		table = slices.Delete(table, i, i+1)
	case i >= 0:
		table[i] = c.QOS
	default:
		table = append(table, c.QOS)
		slices.SortFunc(table, func(a, b model.QOS) int { return strings.Compare(a.Name, b.Name) })
	}
	if table == nil {
		table = []model.QOS{}
	}
	s.qos = table
	s.touch()
	return &Result{}
}

func (s *State) applySetPartition(c *SetPartition) *Result {
	if err := model.ValidatePartition(c.Name); err != nil {
		return &Result{Rejection: reject(CodeInvalid, "", "%v", err)}
	}
	if c.VCluster == "" {
		if _, ok := s.partitions[c.Name]; !ok {
			return &Result{Rejection: reject(CodeNotFound, "", "partition %q does not exist", c.Name)}
		}
		delete(s.partitions, c.Name)
		s.touch()
		return &Result{}
	}
	if s.vclusters[c.VCluster] == nil {
		return &Result{Rejection: reject(CodeInvalid, "", "invalid vcluster %q: allowed %s", c.VCluster, s.vclusterNames())}
	}
	if s.vclusters[c.Name] != nil && c.Name != c.VCluster {
		return &Result{Rejection: reject(CodeInvalid, "", "partition %q is a vCluster's own name; choose another", c.Name)}
	}
	if s.partitions == nil {
		s.partitions = map[string]string{}
	}
	s.partitions[c.Name] = c.VCluster
	s.touch()
	return &Result{}
}
