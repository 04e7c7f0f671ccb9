package dag

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

var defaults = Defaults{Name: "wf", Tenant: "alice", WorkDir: "/home/alice", PriorityClass: 5}

func plan(t *testing.T, src string, lim Limits) (*Plan, error) {
	t.Helper()
	f, err := Parse([]byte(src))
	if err != nil {
		return nil, err
	}
	s, err := f.Spec(defaults)
	if err != nil {
		return nil, err
	}
	return s.Plan(lim)
}

func TestExamplesAreValid(t *testing.T) {
	files, _ := filepath.Glob("../examples/*.yaml")
	if len(files) < 3 {
		t.Fatalf("examples: %v", files)
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		p, err := plan(t, string(data), Limits{})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		// Topological: every parent comes first.
		for k, st := range p.Stages {
			for _, a := range st.After {
				if a.Index >= k {
					t.Errorf("%s: %s after %s, which comes later", name, st.Name, p.Stages[a.Index].Name)
				}
			}
		}
	}
}

func TestReferenceFormat(t *testing.T) {
	p, err := plan(t, `
dag_id: pipeline-1
allocations:
  - name: train
    tenant: ml
    project: llm
    entrypoint: python train.py --epochs 3
    nodes: 4
    walltime_hours: 1.5
    depends_on:
      - name: prep
        condition: Success
  - name: prep
    tenant: ml
    project: llm
    entrypoint: ["python", "prep.py", "a b"]
    nodes: 1-2
    walltime_hours: 0.25
  - name: report
    entrypoint: echo done
    walltime: "1-02:03"
    vcluster: interactive
    priority_class: 8
    checkpoint: signal
    array: 0-9:3%2
    env: {B: "2", A: "1"}
    script: ""
edges:
  - {from: train, to: report, condition: any}
  - {from: prep, to: report, condition: failure}
`, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "pipeline-1" || len(p.Stages) != 3 || p.Stages[0].Name != "prep" || p.Stages[1].Name != "train" {
		t.Fatalf("order %+v", p.Stages)
	}
	prep, train, report := p.Stages[0].Request, p.Stages[1].Request, p.Stages[2].Request
	if prep.NodesMin != 1 || prep.NodesMax != 2 || prep.Walltime != 15*time.Minute || len(prep.Command) != 3 || prep.Tenant != "ml" {
		t.Errorf("prep %+v", prep)
	}
	if train.Walltime != 90*time.Minute || train.Command[0] != "python train.py --epochs 3" || train.NodesMin != 4 ||
		train.WorkDir != "/home/alice" || train.PriorityClass != 5 {
		t.Errorf("train %+v", train)
	}
	if len(p.Stages[1].After) != 1 || p.Stages[1].After[0] != (After{0, model.AfterOK}) {
		t.Errorf("train after %+v", p.Stages[1].After)
	}
	if report.Tenant != "alice" || report.Walltime != 26*time.Hour+3*time.Minute || report.PriorityClass != 8 || report.Array.Count() != 4 ||
		report.Array.MaxConcurrent != 2 || strings.Join(report.Env, ",") != "A=1,B=2" || report.Checkpoint != model.CheckpointSignal {
		t.Errorf("report %+v", report)
	}
	if a := p.Stages[2].After; len(a) != 2 || a[0] != (After{1, model.AfterAny}) || a[1] != (After{0, model.AfterNotOK}) {
		t.Errorf("report after %+v", a)
	}
}

func TestInvalidWorkflows(t *testing.T) {
	stage := func(name string, deps ...string) string {
		s := fmt.Sprintf("  - name: %s\n    entrypoint: \"true\"\n", name)
		if len(deps) > 0 {
			s += "    depends_on:\n"
			for _, d := range deps {
				s += "      - " + d + "\n"
			}
		}
		return s
	}
	head := "dag_id: x\nallocations:\n"
	cases := []struct {
		name, src, want string
	}{
		{"unknown top key", "dag_id: x\nallocs: []\n", `line 2: unknown key "allocs" in the top level; allowed: dag_id, allocations, edges`},
		{"unknown stage key with a hint", head + "  - name: a\n    entrypoint: \"true\"\n    walltme: 5\n", `line 5: unknown key "walltme" in allocation "a"; allowed: name, tenant, project, vcluster, entrypoint, script, nodes, walltime_hours, walltime, priority_class, checkpoint, array, env, depends_on (did you mean walltime?)`},
		{"unknown depends_on key", head + stage("a") + stage("b", "{name: a, when: success}"), `line 8: unknown key "when" in a depends_on entry`},
		{"repeated key", head + "  - name: a\n    name: b\n", `line 4: key "name" appears twice in allocation "b" (first at line 3)`},
		{"yaml syntax", "dag_id: [x\n", "did not find expected"},
		{"empty", "", "the file is empty"},
		{"no allocations", "dag_id: x\n", "no allocations"},
		{"alias", "dag_id: &n x\nallocations:\n  - name: *n\n", "YAML aliases"},
		{"list for a value", head + "  - name: [a]\n", "line 3: name must be a single value, not a list"},
		{"duplicate names", head + stage("a") + stage("a"), `line 5: allocation name "a" is used twice (first at line 3)`},
		{"unknown reference", head + stage("a") + stage("b", "{name: c}"), `allocation "b" depends on "c", which is not an allocation of this workflow; known: a, b`},
		{"self-loop", head + stage("a", "{name: a, condition: any}"), `allocation "a" depends on itself`},
		{"cycle", head + stage("a", "{name: c}") + stage("b", "{name: a}") + stage("c", "{name: b}") + stage("d"), "the workflow has a cycle: a -> b -> c -> a"},
		{"cycle through edges", head + stage("a") + stage("b", "a") + "edges:\n  - {from: b, to: a}\n", "cycle: a -> b -> a"},
		{"bad condition", head + stage("a") + stage("b", "{name: a, condition: maybe}"), `invalid condition "maybe" on "a": allowed success, failure, any, corresponding, mutex`},
		{"mutex on another stage", head + stage("a") + stage("b", "{name: a, condition: mutex}"), `condition mutex names "a", allowed: no name or its own`},
		{"edge to nowhere", head + stage("a") + "edges:\n  - {from: a, to: z}\n", `line 6: edge a -> z: no allocation named "z"`},
		{"edge without to", head + stage("a") + "edges:\n  - {from: a}\n", "an edge needs from and to"},
		{"no entrypoint", head + "  - name: a\n", `allocation "a": invalid entrypoint: allowed a command after -- or a batch script`},
		{"bad nodes", head + "  - name: a\n    entrypoint: x\n    nodes: 0\n", `allocation "a": invalid nodes "0"`},
		{"bad walltime", head + "  - name: a\n    entrypoint: x\n    walltime: soon\n", `allocation "a": invalid walltime "soon"`},
		{"both walltimes", head + "  - name: a\n    entrypoint: x\n    walltime: 5\n    walltime_hours: 1\n", "walltime or walltime_hours, not both"},
		{"bad walltime_hours", head + "  - name: a\n    entrypoint: x\n    walltime_hours: -1\n", `line 5: invalid walltime_hours "-1"`},
		{"bad priority", head + "  - name: a\n    entrypoint: x\n    priority_class: 11\n", `invalid priority-class "11": allowed an integer 0..10`},
		{"bad checkpoint", head + "  - name: a\n    entrypoint: x\n    checkpoint: often\n", `invalid checkpoint "often"`},
		{"bad array", head + "  - name: a\n    entrypoint: x\n    array: 5-1\n", `invalid array "5-1"`},
		{"array over the size limit", head + "  - name: a\n    entrypoint: x\n    array: 0-20000\n", "max_array_size is 10001"},
		{"bad env", head + "  - name: a\n    entrypoint: x\n    env: [NOEQUALS]\n", `line 5: invalid env "NOEQUALS"`},
		{"bad stage name", head + "  - name: a b\n    entrypoint: x\n", `invalid allocation name "a b"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := plan(t, tc.src, Limits{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v\nwant an error with %q", err, tc.want)
			}
			if _, ok := err.(*Error); !ok {
				t.Errorf("error is %T, not *dag.Error", err)
			}
		})
	}
}

func TestStageLimit(t *testing.T) {
	var b strings.Builder
	b.WriteString("dag_id: big\nallocations:\n")
	for i := range DefaultMaxStages + 1 {
		fmt.Fprintf(&b, "  - {name: s%d, entrypoint: \"true\"}\n", i)
	}
	_, err := plan(t, b.String(), Limits{})
	if err == nil || !strings.Contains(err.Error(), "the workflow has 1001 allocations; at most 1000 are allowed") {
		t.Fatalf("1,001 stages: %v", err)
	}
	if _, err := plan(t, b.String(), Limits{MaxStages: 2000}); err != nil {
		t.Fatalf("1,001 stages with a limit of 2,000: %v", err)
	}
}

func TestMutexAndDuplicateEdges(t *testing.T) {
	p, err := plan(t, `
dag_id: m
allocations:
  - {name: a, entrypoint: x}
  - name: b
    entrypoint: x
    depends_on: [a, {name: a, condition: success}, {condition: mutex}, {name: b, condition: singleton}]
`, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	b := p.Stages[1]
	if len(b.After) != 1 || !b.Request.HasSingleton() || len(b.Request.DependsOn) != 1 {
		t.Fatalf("b %+v", b)
	}
}

func TestTopologicalOrderIsStable(t *testing.T) {
	p, err := plan(t, `
dag_id: o
allocations:
  - {name: d, entrypoint: x, depends_on: [b, c]}
  - {name: c, entrypoint: x, depends_on: [a]}
  - {name: b, entrypoint: x, depends_on: [a]}
  - {name: a, entrypoint: x}
  - {name: e, entrypoint: x}
`, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range p.Stages {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, " "); got != "a c b d e" {
		t.Fatalf("order %s", got)
	}
}

func status(states ...model.AllocState) []StageStatus {
	var out []StageStatus
	for i, s := range states {
		out = append(out, StageStatus{Name: fmt.Sprint("s", i), State: s})
	}
	return out
}

func TestState(t *testing.T) {
	skipped := StageStatus{State: model.StateCancelled, Reason: model.ReasonDependencyNeverSatisfied}
	user := StageStatus{State: model.StateCancelled, Reason: model.ReasonCancelled}
	cases := []struct {
		stages []StageStatus
		want   model.DAGState
	}{
		{status(model.StateCompleted, model.StatePending), model.DAGRunning},
		{status(model.StateFailed, model.StateRunning), model.DAGRunning},
		{status(model.StateCompleted, model.StateCompleted), model.DAGCompleted},
		{append(status(model.StateCompleted), skipped), model.DAGCompleted},
		{append(status(model.StateFailed, model.StateCompleted), skipped), model.DAGFailed},
		{append(status(model.StateCompleted), user, skipped), model.DAGCancelled},
	}
	for i, tc := range cases {
		if got := State(tc.stages); got != tc.want {
			t.Errorf("case %d: %s, want %s", i, got, tc.want)
		}
	}
	arrays := map[model.AllocState][]model.AllocState{
		model.StateRunning:   {model.StateCompleted, model.StateRunning, model.StatePending},
		model.StatePending:   {model.StateCompleted, model.StatePending},
		model.StateFailed:    {model.StateCompleted, model.StateFailed, model.StateCancelled},
		model.StateCancelled: {model.StateCompleted, model.StateCancelled},
		model.StateCompleted: {model.StateCompleted, model.StateCompleted},
	}
	for want, tasks := range arrays {
		if got := ArrayState(tasks); got != want {
			t.Errorf("ArrayState(%v) = %s, want %s", tasks, got, want)
		}
	}
}

func sampleStatus() *Status {
	dep := func(name string, c model.DependencyCondition) model.DAGDependency {
		return model.DAGDependency{Name: name, Condition: c}
	}
	s := &Status{ID: 12, Name: "pipeline", Stages: []StageStatus{
		{Name: "prep", ID: 12, DisplayID: "12", Tasks: 4, State: model.StateCompleted},
		{Name: "train", ID: 16, DisplayID: "16", State: model.StateFailed, Reason: model.ReasonNonZeroExit, DependsOn: []model.DAGDependency{dep("prep", model.AfterOK)}},
		{Name: "evaluate", ID: 17, DisplayID: "17", State: model.StateCancelled, Reason: model.ReasonDependencyNeverSatisfied,
			Detail: "afterok:16 (train) ended FAILED", DependsOn: []model.DAGDependency{dep("train", model.AfterOK)}},
		{Name: "notify", ID: 18, DisplayID: "18", State: model.StateRunning, DependsOn: []model.DAGDependency{dep("train", model.AfterNotOK), dep("notify", model.Singleton)}},
		{Name: "cleanup", ID: 19, DisplayID: "19", State: model.StatePending, Reason: model.ReasonDependency,
			DependsOn: []model.DAGDependency{dep("evaluate", model.AfterAny), dep("notify", model.AfterAny)}},
	}}
	s.State = State(s.Stages)
	return s
}

func TestWriteText(t *testing.T) {
	var b bytes.Buffer
	if err := WriteText(&b, sampleStatus(), true); err != nil {
		t.Fatal(err)
	}
	want := `DAG 12 pipeline: RUNNING (5 stages: 2 ended, 1 running, 1 pending, 1 skipped)
prep                            12     COMPLETED [array of 4]
└── train (afterok)             16     FAILED NonZeroExit
    ├── evaluate (afterok)      17     CANCELLED DependencyNeverSatisfied: afterok:16 (train) ended FAILED
    │   └── cleanup (afterany)  19     PENDING Dependency
    └── notify (afternotok)     18     RUNNING [mutex]
        └── cleanup (afterany)  ↑ see above
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestWriteDOT(t *testing.T) {
	var b bytes.Buffer
	if err := WriteDOT(&b, sampleStatus()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		`digraph "DAG 12 pipeline" {`,
		`"evaluate" [label="evaluate\n17 CANCELLED\nDependencyNeverSatisfied", fillcolor="#d7ccc8"];`,
		`"notify" [label="notify\n18 RUNNING", fillcolor="#90caf9", peripheries=2];`,
		`"train" -> "notify" [label="afternotok", style=dashed];`,
		`"prep" -> "train" [label="afterok"];`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("DOT lacks %s\n%s", want, out)
		}
	}
	if strings.Contains(out, `"notify" -> "notify"`) || !strings.HasSuffix(out, "}\n") {
		t.Errorf("DOT\n%s", out)
	}
}

// FuzzParse: no input crashes the parser or the validation, and every
// error is a *dag.Error. Seeds: testdata/fuzz/FuzzParse and the examples.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("../examples/*.yaml")
	for _, name := range files {
		if data, err := os.ReadFile(name); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("dag_id: x\nallocations:\n  - {name: a, entrypoint: x, depends_on: [b]}\n  - {name: b, entrypoint: x, depends_on: [a]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("Parse error %T: %v", err, err)
			}
			return
		}
		spec, err := file.Spec(defaults)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("Spec error %T: %v", err, err)
			}
			return
		}
		p, err := spec.Plan(Limits{MaxStages: 50})
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("Plan error %T: %v", err, err)
			}
			return
		}
		for k, st := range p.Stages {
			if err := st.Request.Validate(); err != nil {
				t.Fatalf("planned stage %s does not validate: %v", st.Name, err)
			}
			for _, a := range st.After {
				if a.Index < 0 || a.Index >= k {
					t.Fatalf("stage %s after %d, not an earlier stage", st.Name, a.Index)
				}
			}
		}
	})
}
