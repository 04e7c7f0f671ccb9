package dag

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/latticehpc/lattice/model"
)

// DefaultMaxStages is how many stages a DAG may have unless the cluster
// says otherwise (max_dag_stages).
const DefaultMaxStages = 1000

// Limits bound a workflow; zero values mean the defaults.
type Limits struct {
	MaxStages    int // DefaultMaxStages
	MaxArraySize int // model.DefaultMaxArraySize
}

func (l Limits) maxStages() int {
	if l.MaxStages > 0 {
		return l.MaxStages
	}
	return DefaultMaxStages
}

// Defaults fill what a stage of a file leaves out.
type Defaults struct {
	Name          string // dag_id when the file has none (e.g. the file's base name)
	Tenant        string
	WorkDir       string
	PriorityClass int
}

// Spec is a workflow with every stage resolved into a request: what
// latticectl sends and the server checks again before submitting.
type Spec struct {
	Name   string
	Stages []SpecStage // in file order
}

// SpecStage is one stage of a Spec. DependsOn names earlier or later
// stages; a singleton ("mutex") names the stage itself or none.
type SpecStage struct {
	Name      string
	Line      int // in the file; 0 when unknown
	Request   model.Request
	DependsOn []model.DAGDependency
}

// Plan is a valid workflow in the order it is submitted in: every stage
// after the stages it depends on.
type Plan struct {
	Name   string
	Stages []PlannedStage
}

// PlannedStage is one stage of a Plan; its request carries a singleton
// dependency when it has one.
type PlannedStage struct {
	Name    string
	Request model.Request
	After   []After
}

// After is a dependency on an earlier stage of the plan.
type After struct {
	Index     int
	Condition model.DependencyCondition
}

// Spec resolves a parsed file's stages into requests.
func (f *File) Spec(def Defaults) (*Spec, error) {
	s := &Spec{Name: f.ID}
	if s.Name == "" {
		s.Name = def.Name
	}
	index := map[string]int{}
	for _, st := range f.Allocations {
		r, err := st.request(def)
		if err != nil {
			return nil, err
		}
		ss := SpecStage{Name: st.Name, Line: st.Line, Request: r}
		for _, e := range st.DependsOn {
			ss.DependsOn = append(ss.DependsOn, model.DAGDependency{Name: e.From, Condition: model.DependencyCondition(e.Condition)})
		}
		if _, dup := index[st.Name]; !dup {
			index[st.Name] = len(s.Stages)
		}
		s.Stages = append(s.Stages, ss)
	}
	for _, e := range f.Edges {
		if e.From == "" || e.To == "" {
			return nil, errAt(e.Line, "an edge needs from and to (allocation names)")
		}
		i, ok := index[e.To]
		if !ok {
			return nil, errAt(e.Line, "edge %s -> %s: no allocation named %q%s", e.From, e.To, e.To, known(f.Allocations, stageName))
		}
		s.Stages[i].DependsOn = append(s.Stages[i].DependsOn, model.DAGDependency{Name: e.From, Condition: model.DependencyCondition(e.Condition)})
	}
	return s, nil
}

// request resolves a stage's fields; it does not validate the result.
func (st *Stage) request(def Defaults) (model.Request, error) {
	where := func(err error) error {
		return errAt(st.Line, "allocation %q: %v", st.Name, err)
	}
	r := model.Request{Name: st.Name, Tenant: st.Tenant, Project: st.Project, VCluster: st.VCluster,
		Command: st.Entrypoint, Script: st.Script, WorkDir: def.WorkDir, Env: st.Env, PriorityClass: def.PriorityClass}
	if r.Tenant == "" {
		r.Tenant = def.Tenant
	}
	nodes := st.Nodes
	if strings.TrimSpace(nodes) == "" {
		nodes = "1"
	}
	var err error
	if r.NodesMin, r.NodesMax, err = model.ParseNodeRange(nodes); err != nil {
		return r, where(err)
	}
	switch {
	case st.Walltime != "" && st.WalltimeHours > 0:
		return r, errAt(st.Line, "allocation %q: give walltime or walltime_hours, not both", st.Name)
	case st.Walltime != "":
		if r.Walltime, err = model.ParseWalltime(st.Walltime); err != nil {
			return r, where(err)
		}
	case st.WalltimeHours > 0:
		h := st.WalltimeHours
		if math.IsInf(h, 0) || h*float64(time.Hour) > float64(model.MaxWalltime) {
			return r, where(&model.FieldError{Field: "walltime_hours", Value: fmt.Sprint(h), Allowed: "hours > 0 and at most 8760 (365 days)"})
		}
		r.Walltime = time.Duration(math.Round(h*3600)) * time.Second
		if r.Walltime <= 0 {
			return r, where(&model.FieldError{Field: "walltime_hours", Value: fmt.Sprint(h), Allowed: "at least one second"})
		}
	}
	if st.PriorityClass != nil {
		r.PriorityClass = *st.PriorityClass
	}
	if r.Checkpoint, err = model.ParseCheckpointMode(st.Checkpoint); err != nil {
		return r, where(err)
	}
	if strings.TrimSpace(st.Array) != "" {
		if r.Array, err = model.ParseArraySpec(st.Array); err != nil {
			return r, where(err)
		}
	}
	return r, nil
}

// Validate checks a whole parsed file as Plan would.
func Validate(f *File, lim Limits) error {
	s, err := f.Spec(Defaults{Name: "workflow", Tenant: model.DefaultTenant, PriorityClass: 5})
	if err != nil {
		return err
	}
	_, err = s.Plan(lim)
	return err
}

// Plan checks the workflow — its name, size, stage names, references,
// self-loops, cycles, and every stage as a request — and orders it
// topologically (ties in file order).
func (s *Spec) Plan(lim Limits) (*Plan, error) {
	if s.Name == "" || len(s.Name) > 200 || strings.ContainsAny(s.Name, "\n\r\x00") {
		return nil, &Error{Msg: fmt.Sprintf("invalid dag_id %q: allowed a name of 1 to 200 characters on one line", s.Name)}
	}
	n := len(s.Stages)
	if n == 0 {
		return nil, &Error{Msg: "the workflow has no allocations"}
	}
	if max := lim.maxStages(); n > max {
		return nil, &Error{Msg: fmt.Sprintf("the workflow has %d allocations; at most %d are allowed (this cluster's max_dag_stages)", n, max)}
	}
	index := make(map[string]int, n)
	for i, st := range s.Stages {
		if !validStageName(st.Name) {
			return nil, errAt(st.Line, "invalid allocation name %q: allowed 1 to 200 letters, digits, '.', '-' and '_'", st.Name)
		}
		if j, dup := index[st.Name]; dup {
			return nil, errAt(st.Line, "allocation name %q is used twice%s; names must be unique", st.Name, atLine(s.Stages[j].Line, " (first at line %d)"))
		}
		index[st.Name] = i
	}

	// Edges: parents of each stage, each (parent, condition) once.
	parents := make([][]After, n)
	reqs := make([]model.Request, n)
	for i, st := range s.Stages {
		reqs[i] = st.Request
		reqs[i].Name = st.Name
		singleton := false
		for _, d := range st.DependsOn {
			cond := model.AfterOK
			if strings.TrimSpace(string(d.Condition)) != "" {
				c, err := model.ParseDependencyCondition(string(d.Condition))
				if err != nil {
					return nil, errAt(st.Line, "allocation %q: invalid condition %q on %q: allowed success, failure, any, corresponding, mutex (or afterok, afternotok, afterany, aftercorr, singleton; after)",
						st.Name, d.Condition, d.Name)
				}
				cond = c
			}
			if cond == model.Singleton {
				if d.Name != "" && d.Name != st.Name {
					return nil, errAt(st.Line, "allocation %q: condition mutex names %q, allowed: no name or its own (mutex keeps one allocation named %q of its tenant running at a time; to order two stages use success or any)",
						st.Name, d.Name, st.Name)
				}
				singleton = true
				continue
			}
			if d.Name == st.Name {
				return nil, errAt(st.Line, "allocation %q depends on itself", st.Name)
			}
			p, ok := index[d.Name]
			if !ok {
				return nil, errAt(st.Line, "allocation %q depends on %q, which is not an allocation of this workflow%s", st.Name, d.Name, known(s.Stages, specStageName))
			}
			a := After{Index: p, Condition: cond}
			if !containsAfter(parents[i], a) {
				parents[i] = append(parents[i], a)
			}
		}
		if singleton && !reqs[i].HasSingleton() {
			reqs[i].DependsOn = append(append([]model.Dependency(nil), reqs[i].DependsOn...), model.Dependency{Condition: model.Singleton})
		}
	}
	if cycle := findCycle(s.Stages, parents); cycle != nil {
		return nil, errAt(s.Stages[cycle[0]].Line, "the workflow has a cycle: %s", cyclePath(s.Stages, cycle))
	}

	// Each stage as a request.
	tasks, scripts := 0, 0
	for i, st := range s.Stages {
		r := &reqs[i]
		r.ApplyDefaults()
		if err := r.Validate(); err != nil {
			return nil, errAt(st.Line, "allocation %q: %v", st.Name, err)
		}
		if err := model.CheckArraySize(r.Array, lim.MaxArraySize); err != nil {
			return nil, errAt(st.Line, "allocation %q: %v", st.Name, err)
		}
		if r.Array != nil {
			tasks += r.Array.Count()
		} else {
			tasks++
		}
		scripts += len(r.Script)
	}
	if tasks > model.MaxArrayTasks {
		return nil, &Error{Msg: fmt.Sprintf("the workflow creates %d allocations (array tasks included); at most %d are allowed", tasks, model.MaxArrayTasks)}
	}
	if scripts > model.MaxScriptBytes {
		return nil, &Error{Msg: fmt.Sprintf("the workflow's scripts total %d bytes; at most %d are allowed (use entrypoint to run files)", scripts, model.MaxScriptBytes)}
	}

	order := topoOrder(parents)
	pos := make([]int, n)
	for k, i := range order {
		pos[i] = k
	}
	p := &Plan{Name: s.Name, Stages: make([]PlannedStage, n)}
	for k, i := range order {
		ps := PlannedStage{Name: s.Stages[i].Name, Request: reqs[i]}
		for _, a := range parents[i] {
			ps.After = append(ps.After, After{Index: pos[a.Index], Condition: a.Condition})
		}
		p.Stages[k] = ps
	}
	return p, nil
}

func validStageName(s string) bool { return len(s) <= 200 && model.IsName(s) }

func containsAfter(list []After, a After) bool {
	for _, x := range list {
		if x == a {
			return true
		}
	}
	return false
}

func atLine(line int, format string) string {
	if line <= 0 {
		return ""
	}
	return fmt.Sprintf(format, line)
}

// known lists a few stage names for an unknown-reference message.
func known[S any](stages []S, name func(S) string) string {
	var names []string
	for _, st := range stages {
		if len(names) == 8 {
			names = append(names, "…")
			break
		}
		names = append(names, name(st))
	}
	return "; known: " + strings.Join(names, ", ")
}

func stageName(st Stage) string         { return st.Name }
func specStageName(st SpecStage) string { return st.Name }

// findCycle returns the stages of one cycle (first stage repeated last is
// left to cyclePath), or nil. Depth-first from each stage in file order,
// so the same file always names the same cycle.
func findCycle(stages []SpecStage, parents [][]After) []int {
	n := len(stages)
	children := make([][]int, n)
	for i, ps := range parents {
		for _, p := range ps {
			children[p.Index] = append(children[p.Index], i)
		}
	}
	const (
		white = iota
		grey
		black
	)
	color := make([]int, n)
	var stack []int
	var found []int
	var visit func(i int) bool
	visit = func(i int) bool {
		color[i] = grey
		stack = append(stack, i)
		for _, c := range children[i] {
			switch color[c] {
			case grey:
				for k, s := range stack {
					if s == c {
						found = append([]int(nil), stack[k:]...)
						return true
					}
				}
			case white:
				if visit(c) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[i] = black
		return false
	}
	for i := range n {
		if color[i] == white && visit(i) {
			return found
		}
	}
	return nil
}

func cyclePath(stages []SpecStage, cycle []int) string {
	names := make([]string, 0, len(cycle)+1)
	for _, i := range cycle {
		names = append(names, stages[i].Name)
	}
	return strings.Join(append(names, stages[cycle[0]].Name), " -> ")
}

// topoOrder orders an acyclic graph: Kahn's algorithm, always taking the
// ready stage that comes first in the file.
func topoOrder(parents [][]After) []int {
	n := len(parents)
	children := make([][]int, n)
	missing := make([]int, n)
	for i, ps := range parents {
		seen := map[int]bool{}
		for _, p := range ps {
			if !seen[p.Index] {
				seen[p.Index] = true
				children[p.Index] = append(children[p.Index], i)
				missing[i]++
			}
		}
	}
	ready := &minHeap{}
	for i := range n {
		if missing[i] == 0 {
			ready.push(i)
		}
	}
	order := make([]int, 0, n)
	for ready.len() > 0 {
		i := ready.pop()
		order = append(order, i)
		for _, c := range children[i] {
			if missing[c]--; missing[c] == 0 {
				ready.push(c)
			}
		}
	}
	return order
}

// minHeap of ints.
type minHeap struct{ a []int }

func (h *minHeap) len() int { return len(h.a) }

func (h *minHeap) push(x int) {
	h.a = append(h.a, x)
	for i := len(h.a) - 1; i > 0; {
		p := (i - 1) / 2
		if h.a[p] <= h.a[i] {
			break
		}
		h.a[p], h.a[i] = h.a[i], h.a[p]
		i = p
	}
}

func (h *minHeap) pop() int {
	top := h.a[0]
	last := len(h.a) - 1
	h.a[0] = h.a[last]
	h.a = h.a[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h.a) && h.a[l] < h.a[m] {
			m = l
		}
		if r < len(h.a) && h.a[r] < h.a[m] {
			m = r
		}
		if m == i {
			break
		}
		h.a[i], h.a[m] = h.a[m], h.a[i]
		i = m
	}
	return top
}
