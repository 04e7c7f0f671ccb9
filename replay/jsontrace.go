package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/latticehpc/lattice/model"
)

// JSONTraceFormat is the value of "format" in a JSON trace.
const JSONTraceFormat = "lattice-trace/1"

// JSONTrace is the replay's own trace format (docs/replay.md): SWF's job
// model plus tenants, vClusters, priority classes, checkpoint modes and DAG
// edges. Times are seconds.
type JSONTrace struct {
	Format string `json:"format"`
	// Capacity in nodes; 0 = the sum of the vClusters' nodes, or the largest
	// job when no vCluster is declared.
	Capacity  int            `json:"capacity,omitempty"`
	VClusters []VClusterSpec `json:"vclusters,omitempty"`
	Tenants   []TenantSpec   `json:"tenants,omitempty"`
	Jobs      []JSONJob      `json:"jobs"`
}

// JSONJob is one job of a JSON trace.
type JSONJob struct {
	ID      uint64  `json:"id"`
	Submit  float64 `json:"submit"`
	Runtime float64 `json:"runtime"`
	// Walltime is what schedulers see; 0 = the runtime; raised to the runtime
	// if below it.
	Walltime          float64  `json:"walltime,omitempty"`
	Nodes             int      `json:"nodes"`
	Tenant            string   `json:"tenant,omitempty"`
	VCluster          string   `json:"vcluster,omitempty"`
	PriorityClass     int      `json:"priority_class,omitempty"`
	Checkpoint        string   `json:"checkpoint,omitempty"`
	CheckpointMinutes float64  `json:"checkpoint_minutes,omitempty"`
	DependsOn         []uint64 `json:"depends_on,omitempty"`
}

// ReadJSON reads a JSON trace and validates it: unique positive job ids,
// nodes >= 1, runtime >= 0, known vClusters, priority classes 0..10, known
// checkpoint modes, dependencies on existing jobs and no cycles.
func ReadJSON(r io.Reader) (*Trace, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var jt JSONTrace
	if err := dec.Decode(&jt); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return nil, &SyntaxError{Line: lineAt(data, se.Offset), Msg: se.Error()}
		case errors.As(err, &te):
			return nil, &SyntaxError{Line: lineAt(data, te.Offset), Msg: te.Error()}
		}
		return nil, fmt.Errorf("json trace: %w", err)
	}
	return jt.Trace()
}

func lineAt(data []byte, off int64) int {
	off = min(max(off, 0), int64(len(data)))
	return bytes.Count(data[:off], []byte{'\n'}) + 1
}

// Trace validates the JSON trace and turns it into the simulator's model.
func (jt *JSONTrace) Trace() (*Trace, error) {
	if jt.Format != "" && jt.Format != JSONTraceFormat {
		return nil, fmt.Errorf("json trace: format %q: allowed %q", jt.Format, JSONTraceFormat)
	}
	tr := &Trace{Capacity: jt.Capacity, VClusters: jt.VClusters, Tenants: jt.Tenants}
	vcNodes := map[string]int{}
	sum := 0
	for i, v := range jt.VClusters {
		if v.Name == "" || v.Nodes < 1 {
			return nil, fmt.Errorf("json trace: vclusters[%d]: want a name and nodes >= 1", i)
		}
		if _, dup := vcNodes[v.Name]; dup {
			return nil, fmt.Errorf("json trace: vclusters[%d]: duplicate name %q", i, v.Name)
		}
		if v.Type == "" {
			tr.VClusters[i].Type = model.TypeForName(v.Name)
		} else if _, err := model.ParseVClusterType(string(v.Type)); err != nil {
			return nil, fmt.Errorf("json trace: vclusters[%d]: %w", i, err)
		}
		if v.ReservationDepth < model.ReservationsAll {
			return nil, fmt.Errorf("json trace: vclusters[%d]: reservation_depth %d: allowed -1 (all), 0 (default) or N >= 1", i, v.ReservationDepth)
		}
		vcNodes[v.Name] = v.Nodes
		sum += v.Nodes
	}
	if tr.Capacity == 0 {
		tr.Capacity = sum
	}
	if len(jt.VClusters) > 0 && sum != tr.Capacity {
		return nil, fmt.Errorf("json trace: capacity %d but the vClusters hold %d nodes", tr.Capacity, sum)
	}
	for i, t := range jt.Tenants {
		if t.FairShareTarget < 0 || t.FairShareTarget > 1 || t.MaxNodes < 0 || t.MaxRunning < 0 {
			return nil, fmt.Errorf("json trace: tenants[%d] (%s): fair_share_target 0..1, max_nodes and max_running >= 0", i, t.Name)
		}
	}
	ids := make(map[uint64]int, len(jt.Jobs))
	for i, j := range jt.Jobs {
		where := fmt.Sprintf("json trace: jobs[%d] (id %d)", i, j.ID)
		if j.ID == 0 {
			return nil, fmt.Errorf("%s: id must be >= 1", where)
		}
		if _, dup := ids[j.ID]; dup {
			return nil, fmt.Errorf("%s: duplicate id", where)
		}
		ids[j.ID] = i
		if j.Nodes < 1 {
			return nil, fmt.Errorf("%s: nodes %d: allowed >= 1", where, j.Nodes)
		}
		if j.Runtime < 0 || j.Submit < 0 || j.Walltime < 0 || !finite(j.Runtime, j.Submit, j.Walltime) {
			return nil, fmt.Errorf("%s: submit, runtime and walltime must be finite numbers >= 0", where)
		}
		if j.PriorityClass < 0 || j.PriorityClass > model.MaxPriorityClass {
			return nil, fmt.Errorf("%s: priority_class %d: allowed 0..10", where, j.PriorityClass)
		}
		mode, err := model.ParseCheckpointMode(j.Checkpoint)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		vc := j.VCluster
		limit := tr.Capacity
		if len(jt.VClusters) > 0 {
			if vc == "" {
				vc = jt.VClusters[0].Name
			}
			n, ok := vcNodes[vc]
			if !ok {
				return nil, fmt.Errorf("%s: unknown vcluster %q", where, vc)
			}
			limit = n
		} else if vc != "" {
			return nil, fmt.Errorf("%s: vcluster %q but the trace declares no vclusters", where, vc)
		}
		if limit > 0 && j.Nodes > limit {
			tr.Dropped++
			continue
		}
		tenant := j.Tenant
		if tenant == "" {
			tenant = model.DefaultTenant
		}
		runtime := seconds(j.Runtime)
		tr.Jobs = append(tr.Jobs, Job{
			ID: j.ID, Submit: seconds(j.Submit), Runtime: runtime,
			Estimate: max(seconds(j.Walltime), runtime), Size: j.Nodes, Tenant: tenant, VCluster: vc,
			PriorityClass: j.PriorityClass, Checkpoint: mode, CheckpointMinutes: j.CheckpointMinutes,
			DependsOn: j.DependsOn,
		})
	}
	if tr.Capacity == 0 {
		for _, j := range tr.Jobs {
			tr.Capacity = max(tr.Capacity, j.Size)
		}
	}
	for _, j := range tr.Jobs {
		for _, d := range j.DependsOn {
			if _, ok := ids[d]; !ok {
				return nil, fmt.Errorf("json trace: job %d depends on unknown job %d", j.ID, d)
			}
		}
	}
	if err := checkAcyclic(tr.Jobs); err != nil {
		return nil, err
	}
	sortJobs(tr.Jobs)
	return tr, nil
}

func finite(vs ...float64) bool {
	for _, v := range vs {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}

// checkAcyclic rejects dependency cycles (iterative DFS, deterministic).
func checkAcyclic(jobs []Job) error {
	idx := make(map[uint64]int, len(jobs))
	for i, j := range jobs {
		idx[j.ID] = i
	}
	const (
		white = iota
		grey
		black
	)
	color := make([]uint8, len(jobs))
	type frame struct{ node, next int }
	for root := range jobs {
		if color[root] != white {
			continue
		}
		stack := []frame{{root, 0}}
		color[root] = grey
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			deps := jobs[top.node].DependsOn
			if top.next >= len(deps) {
				color[top.node] = black
				stack = stack[:len(stack)-1]
				continue
			}
			d, ok := idx[deps[top.next]]
			top.next++
			if !ok {
				continue // a dependency on a dropped job: ignored
			}
			switch color[d] {
			case grey:
				return fmt.Errorf("json trace: dependency cycle through job %d", jobs[d].ID)
			case white:
				color[d] = grey
				stack = append(stack, frame{d, 0})
			}
		}
	}
	return nil
}
