package quorum

import (
	"fmt"
	"slices"
	"time"

	"github.com/latticehpc/lattice/model"
)

// Dependencies are resolved here, inside the FSM, where the states they
// depend on change: atomically with that change, deterministically, and
// with no log entries of their own. This is the DAG controller's release
// and cancel logic (DESIGN.md puts it on the leader; see ARCHITECTURE.md).
//
// How it stays linear:
//
//   - Every store of an allocation goes through reindexDeps, which keeps
//     the dependency indexes in step (the waiters of each id, per-array
//     task counts, active allocations per name, singleton lines, DAG sizes)
//     and notes in s.wake what changed that someone may wait on: an id
//     that started or ended, an array that reached a milestone (all tasks
//     started, all ended, a first task that did not complete), a
//     (tenant, name) whose singleton gate may have opened or must close.
//   - At the end of each command settleWaiting re-evaluates the waiters of
//     what was noted, in order; what they become (released, cancelled)
//     is noted in turn, so DAG cancellations cascade within the command.
//   - A dependency on an array is evaluated from its task counts in O(1),
//     and its waiters are woken only at its milestones, not at each task.
//   - Removing a waiter from the list of an id is O(1) (slots).

// depVerdict says whether a pending allocation's dependencies hold.
type depVerdict int

const (
	depWait depVerdict = iota
	depMet
	depNever
)

// nameKey is what a singleton is unique by.
type nameKey struct{ tenant, name string }

// depEdge is one waiter on one dependency id.
type depEdge struct{ dep, waiter uint64 }

// arrayProgress counts the retained tasks of one array by how far they got.
type arrayProgress struct {
	total     int // tasks the array was submitted with
	retained  int // tasks not yet pruned
	started   int // active, ended, or started once (after: holds)
	ended     int
	completed int
	active    int // holding nodes (%MAX)
}

// singletonLine is the pending singletons of one (tenant, name), by id.
type singletonLine struct {
	waiting  []uint64 // not yet eligible
	eligible []uint64 // released, not yet started: at most one
}

// depIndex is derived from the allocations: rebuilt on restore, compared
// by CheckInvariants. The waiters themselves are idx.dependents.
type depIndex struct {
	slot   map[depEdge]int // where a waiter sits in idx.dependents[dep]
	arrays map[uint64]arrayProgress
	active map[nameKey]int // active allocations by (tenant, name)
	lines  map[nameKey]*singletonLine
	dags   map[uint64]int // retained allocations per DAG
}

func newDepIndex() depIndex {
	return depIndex{slot: map[depEdge]int{}, arrays: map[uint64]arrayProgress{}, active: map[nameKey]int{},
		lines: map[nameKey]*singletonLine{}, dags: map[uint64]int{}}
}

// depStatus is everything about an allocation the indexes care about.
type depStatus struct {
	waiting   bool // pending, not eligible: listed under its dependency ids
	eligible  bool // pending and eligible
	singleton bool
	active    bool
	started   bool
	ended     bool
	completed bool
}

func statusOf(a *model.Allocation) depStatus {
	pending := a.State == model.StatePending
	return depStatus{
		waiting:   pending && a.EligibleTime.IsZero(),
		eligible:  pending && !a.EligibleTime.IsZero(),
		singleton: pending && a.HasSingleton(),
		active:    a.State.Active(),
		started:   started(a),
		ended:     a.State.Terminal(),
		completed: a.State == model.StateCompleted,
	}
}

// started is what `after` waits for: the allocation was placed at least
// once, or ended.
func started(a *model.Allocation) bool {
	return a.State.Active() || a.State.Terminal() || !a.StartTime.IsZero()
}

// --- indexes -----------------------------------------------------------------------

// reindexDeps moves the dependency indexes from old to a (either may be nil:
// a new or a deleted allocation) and notes what waiters must look at.
func (s *State) reindexDeps(old, a *model.Allocation) {
	var was, is depStatus
	if old != nil {
		was = statusOf(old)
	}
	if a != nil {
		is = statusOf(a)
	}
	if old != nil && a != nil && was == is {
		return // the hot path: Staging → Running, Running ⇄ Checkpointing
	}
	ref := a
	if ref == nil {
		ref = old
	}
	d := &s.idx.deps
	arrayBefore := d.arrays[ref.ArrayJobID]
	if old != nil {
		s.indexDeps(old, -1)
	}
	if a != nil {
		s.indexDeps(a, +1)
	}
	if old == nil {
		return // nothing waits on a new allocation yet
	}
	// What a waiter may now see differently.
	if (was.started != is.started || was.ended != is.ended || was.completed != is.completed || a == nil) && len(s.idx.dependents[ref.ID]) > 0 {
		s.wake.id(ref.ID)
	}
	if id := ref.ArrayJobID; id != 0 && len(s.idx.dependents[id]) > 0 && arrayBefore.milestones() != d.arrays[id].milestones() {
		s.wake.id(id)
	}
	if ref.Name != "" && (was.active != is.active || was.eligible != is.eligible || was.singleton != is.singleton) {
		if d.lines[nameKey{ref.Tenant, ref.Name}] != nil {
			s.wake.key(nameKey{ref.Tenant, ref.Name})
		}
	}
	if a == nil && ref.DAGID != 0 && d.dags[ref.DAGID] == 0 {
		delete(s.dags, ref.DAGID) // its last allocation was pruned
	}
}

// indexDeps adds (sign +1) or removes (-1) a's entries.
func (s *State) indexDeps(a *model.Allocation, sign int) {
	d := &s.idx.deps
	st := statusOf(a)
	if st.waiting {
		for _, id := range waitIDs(a) {
			if sign > 0 {
				s.addWaiter(id, a.ID)
			} else {
				s.removeWaiter(id, a.ID)
			}
		}
	}
	key := nameKey{a.Tenant, a.Name}
	if st.active && a.Name != "" {
		addInt(d.active, key, sign)
	}
	if st.singleton {
		line := d.lines[key]
		if line == nil {
			line = &singletonLine{}
			d.lines[key] = line
		}
		if st.waiting {
			line.waiting = setSorted(line.waiting, a.ID, sign > 0)
		} else {
			line.eligible = setSorted(line.eligible, a.ID, sign > 0)
		}
		if len(line.waiting) == 0 && len(line.eligible) == 0 {
			delete(d.lines, key)
		}
	}
	if a.ArrayJobID != 0 {
		p := d.arrays[a.ArrayJobID]
		if a.Array != nil {
			p.total = a.Array.Count()
		}
		p.retained += sign
		p.started += sign * b2i(st.started)
		p.ended += sign * b2i(st.ended)
		p.completed += sign * b2i(st.completed)
		p.active += sign * b2i(st.active)
		if p.retained == 0 {
			delete(d.arrays, a.ArrayJobID)
		} else {
			d.arrays[a.ArrayJobID] = p
		}
	}
	if a.DAGID != 0 {
		addInt(d.dags, a.DAGID, sign)
	}
}

// waitIDs lists the ids a waits on, each once.
func waitIDs(a *model.Allocation) []uint64 {
	var out []uint64
	for _, d := range a.DependsOn {
		if d.Condition != model.Singleton {
			out = append(out, d.IDs...)
		}
	}
	if len(out) > 1 {
		slices.Sort(out)
		out = slices.Compact(out)
	}
	return out
}

func (s *State) addWaiter(dep, w uint64) {
	list := s.idx.dependents[dep]
	s.idx.deps.slot[depEdge{dep, w}] = len(list)
	s.idx.dependents[dep] = append(list, w)
}

// removeWaiter takes w out of dep's list in O(1): the last waiter takes its
// place (lists are sorted when read).
func (s *State) removeWaiter(dep, w uint64) {
	slot := s.idx.deps.slot
	e := depEdge{dep, w}
	i, ok := slot[e]
	if !ok {
		return
	}
	list := s.idx.dependents[dep]
	last := list[len(list)-1]
	list[i] = last
	slot[depEdge{dep, last}] = i
	delete(slot, e)
	if list = list[:len(list)-1]; len(list) == 0 {
		delete(s.idx.dependents, dep)
	} else {
		s.idx.dependents[dep] = list
	}
}

// setSorted adds or removes id in a sorted list.
func setSorted(list []uint64, id uint64, add bool) []uint64 {
	i, found := slices.BinarySearch(list, id)
	switch {
	case add && !found:
		return slices.Insert(list, i, id)
	case !add && found:
		if i == 0 {
			return list[1:] // the usual case: the head of a line leaves
		}
		return slices.Delete(list, i, i+1)
	}
	return list
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// milestones are the moments an array's waiters must look again.
type milestones struct{ allStarted, allEnded, bad bool }

func (p arrayProgress) milestones() milestones {
	missing := p.total - p.retained // pruned: ended, outcome unknown
	return milestones{
		allStarted: p.started+missing >= p.total,
		allEnded:   p.ended+missing >= p.total,
		bad:        p.ended-p.completed+missing > 0,
	}
}

// arrayOf reports whether id names an array (its first task's id, even
// once that task is pruned), and its progress.
func (s *State) arrayOf(id uint64) (arrayProgress, bool) {
	if a := s.allocs[id]; a != nil && a.ArrayJobID != id {
		return arrayProgress{}, false
	}
	p, ok := s.idx.deps.arrays[id]
	return p, ok
}

// ArrayProgress reports how many tasks of array id exist, are active and
// ended, and how many completed (false when id is not an array).
func (s *State) ArrayProgress(id uint64) (tasks, active, ended, completed int, ok bool) {
	p, ok := s.arrayOf(id)
	return p.total, p.active, p.ended + p.total - p.retained, p.completed, ok
}

// DAGSize counts the retained allocations of a DAG.
func (s *State) DAGSize(id uint64) int { return s.idx.deps.dags[id] }

// --- evaluation ----------------------------------------------------------------------

// verdict evaluates a's id dependencies (not its singleton gate), and says
// why when they can never hold.
func (s *State) verdict(a *model.Allocation) (depVerdict, string) {
	anyOf := a.DependencyAny
	result, pairs, why := depMet, 0, ""
	if anyOf {
		result = depNever
	}
	for _, d := range a.DependsOn {
		if d.Condition == model.Singleton {
			continue
		}
		for _, id := range d.IDs {
			pairs++
			v, reason := s.evalDep(d, id)
			switch {
			case anyOf && v == depMet:
				return depMet, ""
			case anyOf && v == depWait:
				result = depWait
			case anyOf && why == "":
				why = reason
			case !anyOf && v == depNever:
				return depNever, reason
			case !anyOf && v == depWait:
				result = depWait
			}
		}
	}
	if pairs == 0 {
		return depMet, ""
	}
	if result == depNever {
		return depNever, fmt.Sprintf("none of %s can hold; %s", model.FormatDependencies(a.DependsOn, true), why)
	}
	return result, ""
}

// evalDep evaluates one condition on one id.
func (s *State) evalDep(d model.Dependency, id uint64) (depVerdict, string) {
	cond := d.Condition
	if !d.Task {
		if p, ok := s.arrayOf(id); ok {
			v := evalArray(cond, p)
			if v != depNever {
				return v, ""
			}
			return v, fmt.Sprintf("%s:%d: %s", cond, id, p.describe(id))
		}
	}
	dep := s.allocs[id]
	v := evalOne(cond, dep)
	if v != depNever {
		return v, ""
	}
	if dep == nil {
		return v, fmt.Sprintf("%s:%d: allocation %d was pruned; its outcome is no longer known", cond, id, id)
	}
	name := ""
	if dep.Name != "" {
		name = " (" + dep.Name + ")"
	}
	return v, fmt.Sprintf("%s:%s%s ended %s", cond, dep.DisplayID(), name, dep.State)
}

func (p arrayProgress) describe(id uint64) string {
	missing := p.total - p.retained
	if p.ended == p.completed && missing > 0 {
		return fmt.Sprintf("%d of the %d tasks of array %d were pruned; their outcome is no longer known", missing, p.total, id)
	}
	if p.ended-p.completed > 0 {
		return fmt.Sprintf("%d of the %d tasks of array %d did not complete", p.ended-p.completed, p.total, id)
	}
	return fmt.Sprintf("all %d tasks of array %d completed", p.total, id)
}

// evalArray evaluates a condition over every task of an array.
func evalArray(cond model.DependencyCondition, p arrayProgress) depVerdict {
	m := p.milestones()
	switch cond {
	case model.AfterOK, model.AfterCorr:
		if m.bad {
			return depNever
		}
		if p.completed >= p.total {
			return depMet
		}
	case model.AfterAny:
		if m.allEnded {
			return depMet
		}
	case model.AfterNotOK:
		if m.allEnded {
			if m.bad {
				return depMet
			}
			return depNever
		}
	case model.AfterStart:
		if m.allStarted {
			return depMet
		}
	}
	return depWait
}

func evalOne(cond model.DependencyCondition, dep *model.Allocation) depVerdict {
	if dep == nil { // pruned long after it ended: its outcome is no longer known
		if cond == model.AfterAny || cond == model.AfterStart {
			return depMet
		}
		return depNever
	}
	switch cond {
	case model.AfterOK, model.AfterCorr:
		switch dep.State {
		case model.StateCompleted:
			return depMet
		case model.StateFailed, model.StateCancelled:
			return depNever
		}
	case model.AfterAny:
		if dep.State.Terminal() {
			return depMet
		}
	case model.AfterNotOK:
		switch dep.State {
		case model.StateFailed, model.StateCancelled:
			return depMet
		case model.StateCompleted:
			return depNever
		}
	case model.AfterStart:
		if started(dep) {
			return depMet
		}
	}
	return depWait
}

// --- settling ----------------------------------------------------------------------

// settleNew decides a new allocation's eligibility (a is not stored yet).
func (s *State) settleNew(a *model.Allocation, t time.Time) {
	v, why := s.verdict(a)
	switch {
	case v == depMet && a.HasSingleton():
		a.Reason = model.ReasonDependency
		s.wake.key(nameKey{a.Tenant, a.Name}) // released at the end of the command if its gate is open
	case v == depMet:
		a.EligibleTime = t
		a.Reason = model.ReasonWaitingForScheduling
	case v == depWait:
		a.Reason = model.ReasonDependency
	case a.DAGID != 0:
		// A workflow stage whose condition can never hold is cancelled.
		transition(a, model.StateCancelled, model.ReasonDependencyNeverSatisfied, t)
		a.EndTime = t
		a.ReasonDetail = why
	default:
		a.Reason = model.ReasonDependencyNeverSatisfied
		a.ReasonDetail = why
	}
}

// settle re-evaluates a stored waiting allocation and stores what changed.
func (s *State) settle(w *model.Allocation, t time.Time) {
	v, why := s.verdict(w)
	switch {
	case v == depMet && w.HasSingleton():
		s.wake.key(nameKey{w.Tenant, w.Name})
	case v == depMet:
		s.release(w, t)
	case v == depWait:
		if w.Reason != model.ReasonDependency {
			c := modify(w)
			c.Reason, c.ReasonDetail = model.ReasonDependency, ""
			s.replaceAlloc(w, c)
			s.touch()
		}
	case w.DAGID != 0:
		c := modify(w)
		transition(c, model.StateCancelled, model.ReasonDependencyNeverSatisfied, t)
		c.EndTime = t
		c.ReasonDetail = why
		s.replaceAlloc(w, c)
		s.touch()
	case w.Reason != model.ReasonDependencyNeverSatisfied || w.ReasonDetail != why:
		c := modify(w)
		c.Reason, c.ReasonDetail = model.ReasonDependencyNeverSatisfied, why
		s.replaceAlloc(w, c)
		s.touch()
	}
}

// release makes a waiting allocation eligible: the scheduler may place it,
// and its wait (f2) counts from t.
func (s *State) release(w *model.Allocation, t time.Time) {
	c := modify(w)
	c.EligibleTime = t
	c.Reason, c.ReasonDetail = model.ReasonWaitingForScheduling, ""
	s.replaceAlloc(w, c)
	s.touch()
}

// dependencyChanged notes that allocation id started or ended. Storing it
// notes that already; callers that say so explicitly cost nothing more.
func (s *State) dependencyChanged(id uint64, _ time.Time) {
	if len(s.idx.dependents[id]) > 0 {
		s.wake.id(id)
	}
}

// settleWaiting re-evaluates, in order, the waiters of everything the
// command noted; what they become is noted in turn.
func (s *State) settleWaiting(t time.Time) {
	q := &s.wake
	for i := 0; i < len(q.items); i++ {
		it := q.items[i]
		if it.byKey {
			delete(q.keys, it.key)
			s.settleSingletons(it.key, t)
			continue
		}
		delete(q.ids, it.id)
		waiting := slices.Clone(s.idx.dependents[it.id])
		slices.Sort(waiting) // slots keep no order; ids do
		for _, wid := range waiting {
			if w := s.allocs[wid]; w != nil && w.State == model.StatePending && w.EligibleTime.IsZero() {
				s.settle(w, t)
			}
		}
	}
	q.items = q.items[:0]
}

// settleSingletons keeps at most one singleton of a (tenant, name)
// eligible, and none while an allocation of that name runs: an eligible
// one goes back to waiting when another starts first; when the gate is
// open, the first waiting one (by id) whose other dependencies hold is
// released.
func (s *State) settleSingletons(key nameKey, t time.Time) {
	d := &s.idx.deps
	line := d.lines[key]
	if line == nil {
		return
	}
	if d.active[key] > 0 {
		for _, id := range slices.Clone(line.eligible) {
			w := s.allocs[id]
			c := modify(w)
			c.EligibleTime = time.Time{}
			c.Reason = model.ReasonDependency
			c.ReasonDetail = fmt.Sprintf("singleton: another allocation named %q of tenant %s started first", key.name, key.tenant)
			s.replaceAlloc(w, c)
			s.touch()
		}
		return
	}
	if len(line.eligible) > 0 {
		return
	}
	for _, id := range line.waiting {
		w := s.allocs[id]
		if v, _ := s.verdict(w); v == depMet {
			s.release(w, t) // changes line.waiting: stop here
			return
		}
	}
}

// wakeQueue is what the current command changed that waiters depend on:
// ids (and arrays) whose waiters must be re-evaluated, and singleton keys
// whose gate must be looked at. Each is queued at most once at a time.
type wakeQueue struct {
	items []wakeItem
	ids   map[uint64]bool
	keys  map[nameKey]bool
}

type wakeItem struct {
	id    uint64
	key   nameKey
	byKey bool
}

func (q *wakeQueue) id(id uint64) {
	if q.ids == nil {
		q.ids = map[uint64]bool{}
	}
	if !q.ids[id] {
		q.ids[id] = true
		q.items = append(q.items, wakeItem{id: id})
	}
}

func (q *wakeQueue) key(k nameKey) {
	if q.keys == nil {
		q.keys = map[nameKey]bool{}
	}
	if !q.keys[k] {
		q.keys[k] = true
		q.items = append(q.items, wakeItem{key: k, byKey: true})
	}
}

// checkArrayLimit keeps an array's active tasks at most its %MAX
// (Slurm's JobArrayTaskLimit); the scheduler holds them back too.
func checkArrayLimit(s *State, ctx *assignCtx) *Rejection {
	a := ctx.alloc
	if a.ArrayJobID == 0 || a.ArrayMaxConcurrent <= 0 {
		return nil
	}
	if n := s.idx.deps.arrays[a.ArrayJobID].active; n >= a.ArrayMaxConcurrent {
		return reject(CodeConflict, model.ReasonArrayTaskLimit, "array %d runs %d tasks, its limit (%%%d)", a.ArrayJobID, n, a.ArrayMaxConcurrent)
	}
	return nil
}

// --- invariants ----------------------------------------------------------------------

// checkDependencies compares the dependency indexes with fresh ones built
// from the objects, and checks the rules they enforce: a singleton starts
// only alone, an array runs at most %MAX tasks.
func checkDependencies(s, fresh *State) []string {
	var v []string
	bad := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }
	d, f := &s.idx.deps, &fresh.idx.deps
	if len(d.slot) != len(f.slot) {
		bad("dependency slots: %d, fresh %d", len(d.slot), len(f.slot))
	}
	for e, i := range d.slot {
		if list := s.idx.dependents[e.dep]; i >= len(list) || list[i] != e.waiter {
			bad("dependency slot of %d waiting on %d is wrong", e.waiter, e.dep)
		}
	}
	if !mapsEqual(d.arrays, f.arrays) || !mapsEqual(d.active, f.active) || !mapsEqual(d.dags, f.dags) || len(d.lines) != len(f.lines) {
		bad("dependency indexes out of step with the objects")
	}
	for k, l := range d.lines {
		fl := f.lines[k]
		if fl == nil || !slices.Equal(l.waiting, fl.waiting) || !slices.Equal(l.eligible, fl.eligible) {
			bad("singleton line %s/%s out of step with the objects", k.tenant, k.name)
			continue
		}
		if len(l.eligible) > 1 || (len(l.eligible) > 0 && d.active[k] > 0) {
			bad("singleton %s/%s: %d eligible while %d run", k.tenant, k.name, len(l.eligible), d.active[k])
		}
	}
	for _, a := range s.Allocations() {
		if a.ArrayJobID != 0 && a.ArrayMaxConcurrent > 0 && a.ID == a.ArrayJobID {
			if n := d.arrays[a.ID].active; n > a.ArrayMaxConcurrent {
				bad("array %d runs %d tasks, more than its %%%d", a.ID, n, a.ArrayMaxConcurrent)
			}
		}
		if a.DAGID != 0 && s.dags[a.DAGID] == nil {
			bad("allocation %d belongs to DAG %d, which has no record", a.ID, a.DAGID)
		}
	}
	for id := range s.dags {
		if d.dags[id] == 0 {
			bad("DAG %d has no allocations left", id)
		}
	}
	return v
}

func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, x := range a {
		if y, ok := b[k]; !ok || x != y {
			return false
		}
	}
	return true
}
