package quorum

import (
	"fmt"
	"maps"
	"slices"

	"github.com/latticehpc/lattice/model"
)

// --- Submit -----------------------------------------------------------------------

// applySubmit creates the allocations of one submission: one, an array
// (expanded here, one allocation per task), or a DAG (every stage at once,
// names mapped to ids here, one DAG record). All or nothing. Its cost is
// linear in the allocations it creates.
func (s *State) applySubmit(c *Submit) *Result {
	if len(c.Items) == 0 {
		return &Result{Rejection: reject(CodeInvalid, "", "submission has no allocations")}
	}
	total := 0
	reqs := make([]model.Request, len(c.Items))
	var names map[string]int // DAG stage names
	if c.DAG {
		names = make(map[string]int, len(c.Items))
	}
	for i, item := range c.Items {
		r, rej := s.resolveRequest(item.Request, c.Prepared)
		if rej != nil {
			if len(c.Items) > 1 {
				rej.Message = fmt.Sprintf("allocation %d (%s): %s", i+1, item.Request.Name, rej.Message)
			}
			return &Result{Rejection: rej}
		}
		for _, d := range item.AfterItems {
			if d.Index < 0 || d.Index >= i {
				return &Result{Rejection: reject(CodeInvalid, "", "allocation %d: depends on item %d, allowed: an earlier item of the same submission", i+1, d.Index+1)}
			}
			if !itemCondition(d.Condition) {
				return &Result{Rejection: reject(CodeInvalid, "", "allocation %d: invalid condition %q on item %d: allowed afterok, afterany, afternotok, after, aftercorr",
					i+1, d.Condition, d.Index+1)}
			}
		}
		if c.DAG {
			if r.Name == "" {
				return &Result{Rejection: reject(CodeInvalid, "", "DAG stage %d has no name", i+1)}
			}
			if prev, dup := names[r.Name]; dup {
				return &Result{Rejection: reject(CodeInvalid, "", "DAG stages %d and %d are both named %q; names must be unique", prev+1, i+1, r.Name)}
			}
			names[r.Name] = i
		}
		reqs[i] = r
		if r.Array != nil {
			total += r.Array.Count()
		} else {
			total++
		}
	}
	if total > model.MaxArrayTasks {
		return &Result{Rejection: reject(CodeInvalid, "", "submission creates %d allocations, allowed at most %d", total, model.MaxArrayTasks)}
	}

	var dag *model.DAG
	if c.DAG {
		dag = &model.DAG{ID: s.NextID, Name: c.Name, SubmitTime: c.Time, Stages: make([]model.DAGStage, len(c.Items))}
	}
	firstIDs := make([]uint64, len(c.Items)) // id of each item (first task for arrays)
	ids := make([]uint64, 0, total)
	for i, r := range reqs {
		item := c.Items[i]
		deps := r.DependsOn
		if len(item.AfterItems) > 0 {
			deps = slices.Clip(slices.Clone(deps))
			for _, d := range item.AfterItems {
				deps = append(deps, model.Dependency{Condition: d.Condition, IDs: []uint64{firstIDs[d.Index]}})
			}
		}
		first := s.NextID
		firstIDs[i] = first
		n := 1
		if r.Array != nil {
			n = r.Array.Count()
		}
		for pos := range n {
			a := &model.Allocation{ID: s.NextID, Request: r, SubmitTime: c.Time}
			if dag != nil {
				a.DAGID = dag.ID
			}
			if r.Array != nil {
				a.ArrayJobID = first
				a.ArrayIndex = r.Array.Start + pos*r.Array.Step
				a.ArrayMaxConcurrent = r.Array.MaxConcurrent
			}
			// Tasks share the request's dependencies, unless aftercorr gives
			// each its own.
			a.DependsOn = s.resolveCorr(deps, a.ArrayIndex, r.Array != nil)
			s.NextID++
			if r.Hold {
				a.Held = model.HoldUser
			}
			transition(a, model.StatePending, "", c.Time)
			s.settleNew(a, c.Time)
			s.putAlloc(a)
			ids = append(ids, a.ID)
		}
		if dag != nil {
			st := model.DAGStage{Name: r.Name, ID: first}
			if r.Array != nil {
				st.Tasks = n
			}
			for _, d := range item.AfterItems {
				st.DependsOn = append(st.DependsOn, model.DAGDependency{Name: reqs[d.Index].Name, Condition: d.Condition})
			}
			if r.HasSingleton() {
				st.DependsOn = append(st.DependsOn, model.DAGDependency{Name: r.Name, Condition: model.Singleton})
			}
			dag.Stages[i] = st
		}
	}
	if dag != nil {
		s.dags[dag.ID] = dag
	}
	s.touch()
	return &Result{IDs: ids}
}

// itemCondition reports whether c may join two items of a submission.
func itemCondition(c model.DependencyCondition) bool {
	switch c {
	case model.AfterOK, model.AfterAny, model.AfterNotOK, model.AfterStart, model.AfterCorr:
		return true
	}
	return false
}

// resolveRequest checks the request against the cluster. A request not
// prepared before the proposal (an entry of level 0) is first resolved,
// defaulted and validated by level 0's rules, as it was applied then.
func (s *State) resolveRequest(r model.Request, prepared bool) (model.Request, *Rejection) {
	if !prepared {
		r.VCluster = s.ResolveDefaultVCluster(r.VCluster)
		r.ApplyDefaultsLevel0()
		if err := r.ValidateLevel0(); err != nil {
			return r, reject(CodeInvalid, "", "%v", err)
		}
	}
	if s.vclusters[r.VCluster] == nil {
		return r, reject(CodeInvalid, "", "invalid vcluster %q: allowed %s", r.VCluster, s.vclusterNames())
	}
	if n := len(s.nodeNames); n > 0 && r.NodesMin > n && !r.Hold { // held: kept until the cluster grows or it is updated
		return r, reject(CodeInvalid, model.ReasonBadConstraints, "invalid nodes %d: the cluster has %d nodes", r.NodesMin, n)
	}
	for _, name := range r.NodeList {
		if len(s.nodeNames) > 0 && s.nodes[name] == nil {
			return r, reject(CodeInvalid, model.ReasonBadConstraints, "invalid nodelist: node %s does not exist", name)
		}
	}
	for _, d := range r.DependsOn {
		for _, id := range d.IDs {
			if s.allocs[id] == nil {
				return r, reject(CodeInvalid, "", "invalid depends-on %s:%d: no allocation %d", d.Condition, id, id)
			}
		}
	}
	return r, nil
}

// ResolveDefaultVCluster is the vCluster a request naming name goes to:
// the one a partition name maps to, else the default vCluster, else the
// first one, when name is empty.
func (s *State) ResolveDefaultVCluster(name string) string {
	name = s.resolvePartition(name)
	if name == "" {
		name = s.DefaultVCluster
	}
	if name == "" {
		if vcs := s.VClusters(); len(vcs) > 0 {
			name = vcs[0].Name
		}
	}
	return name
}

// resolveCorr turns aftercorr into afterok for one allocation: for task
// index of an array (child), on the task of the same index of each parent
// array (nothing to wait for when a parent has no such index); for anything
// else, on the parent as a whole. Without aftercorr it returns deps as is,
// so the tasks of an array share one slice.
func (s *State) resolveCorr(deps []model.Dependency, index int, child bool) []model.Dependency {
	if !slices.ContainsFunc(deps, func(d model.Dependency) bool { return d.Condition == model.AfterCorr }) {
		return deps
	}
	out := make([]model.Dependency, 0, len(deps))
	for _, d := range deps {
		if d.Condition != model.AfterCorr {
			out = append(out, d)
			continue
		}
		whole := model.Dependency{Condition: model.AfterOK, Task: d.Task}
		tasks := model.Dependency{Condition: model.AfterOK, Task: true}
		for _, id := range d.IDs {
			if _, isArray := s.arrayOf(id); !child || d.Task || !isArray {
				whole.IDs = append(whole.IDs, id)
			} else if t := s.LookupArrayTask(id, index); t != nil {
				tasks.IDs = append(tasks.IDs, t.ID)
			}
		}
		if len(whole.IDs) > 0 {
			out = append(out, whole)
		}
		if len(tasks.IDs) > 0 {
			out = append(out, tasks)
		}
	}
	return out
}

// DAG returns a workflow record by id (nil if unknown or pruned).
func (s *State) DAG(id uint64) *model.DAG { return s.dags[id] }

// DAGs returns every workflow record in id order.
func (s *State) DAGs() []*model.DAG {
	ids := slices.Sorted(maps.Keys(s.dags))
	out := make([]*model.DAG, len(ids))
	for i, id := range ids {
		out[i] = s.dags[id]
	}
	return out
}

// applySubmitBatch applies each submission on its own: a retried one (by
// its request id) answers its first outcome, a rejected one leaves the
// others standing. Every submission takes the batch's time.
func (s *State) applySubmitBatch(c *SubmitBatch) *Result {
	if len(c.Submissions) == 0 || len(c.Submissions) > MaxBatchSubmissions {
		return &Result{Rejection: reject(CodeInvalid, "", "invalid batch of %d submissions: allowed 1..%d", len(c.Submissions), MaxBatchSubmissions)}
	}
	out := &Result{Submissions: make([]*Result, len(c.Submissions))}
	var fresh []*Result
	for i := range c.Submissions {
		sub := &c.Submissions[i]
		sub.Time = c.Time
		if id := sub.RequestID; id != "" {
			if prev, ok := s.requests[id]; ok {
				out.Submissions[i] = prev
				continue
			}
		}
		r := s.applySubmit(sub)
		if sub.RequestID != "" {
			s.remember(sub.RequestID, r)
		}
		out.Submissions[i] = r
		fresh = append(fresh, r)
	}
	for _, r := range fresh {
		r.Version = s.Version
	}
	return out
}
