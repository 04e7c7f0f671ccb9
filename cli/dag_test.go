package cli

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// fakeDAGs is an in-process DAGService that records what it was asked.
type fakeDAGs struct {
	latticev1.UnimplementedDAGServiceServer
	mu      sync.Mutex
	addr    string
	submits []*latticev1.SubmitDAGRequest
	cancels []*latticev1.CancelDAGRequest
}

func newFakeDAGs(t *testing.T) *fakeDAGs {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeDAGs{addr: lis.Addr().String()}
	s := grpc.NewServer()
	latticev1.RegisterDAGServiceServer(s, f)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return f
}

func (f *fakeDAGs) SubmitDAG(_ context.Context, req *latticev1.SubmitDAGRequest) (*latticev1.SubmitDAGResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.submits = append(f.submits, req)
	if len(req.Stages) > 3 {
		return nil, status.Error(codes.InvalidArgument, "the workflow has 4 allocations; at most 3 are allowed (this cluster's max_dag_stages)")
	}
	resp := &latticev1.SubmitDAGResponse{DagId: 50, Name: req.Name}
	next := uint64(50)
	for _, st := range req.Stages {
		ref := &latticev1.DAGStageRef{Name: st.Name, Id: next, DisplayId: strconv.FormatUint(next, 10)}
		next++
		if a := st.Request.GetArray(); a != nil {
			ref.Tasks = a.End - a.Start + 1
			next += uint64(ref.Tasks) - 1
		}
		resp.Allocations = append(resp.Allocations, ref)
	}
	return resp, nil
}

func (f *fakeDAGs) status() *latticev1.DAGStatus {
	return &latticev1.DAGStatus{DagId: 50, Name: "pipeline", State: "FAILED", Tenant: "alice", SubmitTimeUnixMs: ms(0), EndTimeUnixMs: ms(60e9),
		Allocations: []*latticev1.DAGStageStatus{
			{Name: "prep", Id: 50, DisplayId: "50", Tasks: 2, State: "COMPLETED", TasksEnded: 2, TasksCompleted: 2},
			{Name: "train", Id: 52, DisplayId: "52", State: "FAILED", Reason: "NonZeroExit",
				DependsOn: []*latticev1.DAGDependency{{Name: "prep", Condition: "afterok"}}},
			{Name: "evaluate", Id: 53, DisplayId: "53", State: "CANCELLED", Reason: "DependencyNeverSatisfied", ReasonDetail: "afterok:52 (train) ended FAILED",
				DependsOn: []*latticev1.DAGDependency{{Name: "train", Condition: "afterok"}}},
			{Name: "notify", Id: 54, DisplayId: "54", State: "COMPLETED",
				DependsOn: []*latticev1.DAGDependency{{Name: "train", Condition: "afternotok"}}},
		}}
}

func (f *fakeDAGs) GetDAG(_ context.Context, req *latticev1.GetDAGRequest) (*latticev1.DAGStatus, error) {
	if req.Id != "50" && req.Id != "pipeline" {
		return nil, status.Errorf(codes.NotFound, "DAG %s not found", req.Id)
	}
	return f.status(), nil
}

func (f *fakeDAGs) ListDAGs(_ context.Context, req *latticev1.ListDAGsRequest) (*latticev1.ListDAGsResponse, error) {
	s := f.status()
	s.Allocations = nil
	s.Stages, s.StagesCompleted, s.StagesFailed, s.StagesSkipped = 4, 2, 1, 1
	return &latticev1.ListDAGsResponse{Dags: []*latticev1.DAGStatus{s}}, nil
}

func (f *fakeDAGs) CancelDAG(_ context.Context, req *latticev1.CancelDAGRequest) (*latticev1.CancelDAGResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancels = append(f.cancels, req)
	return &latticev1.CancelDAGResponse{DagId: 50, Cancelled: []uint64{53, 54}, Running: 1}, nil
}

const pipelineYAML = `dag_id: pipeline
allocations:
  - name: prep
    array: 0-1
    entrypoint: ./prep.sh
    walltime_hours: 0.5
  - name: train
    tenant: ml
    nodes: 2-4
    walltime: "1:00:00"
    entrypoint: [python, train.py]
    depends_on: [{name: prep, condition: success}]
  - name: notify
    entrypoint: echo failed
    depends_on: [{name: train, condition: failure}, {condition: mutex}]
`

func writeWorkflow(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "pipeline.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDAGSubmit(t *testing.T) {
	f := newFakeDAGs(t)
	file := writeWorkflow(t, pipelineYAML)
	r := run(t, servers(f.addr), "dag", "submit", "-o", "json", file)
	mustCode(t, r, 0)
	var v map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatal(err)
	}
	// CLI.md: {"dag_id", "allocations": [{"name", "id"}]}.
	if v["dag_id"] != 50.0 || len(v["allocations"].([]any)) != 3 {
		t.Fatalf("dag submit -o json: %s", r.stdout)
	}
	for i, want := range []map[string]any{{"name": "prep", "id": 50.0}, {"name": "train", "id": 52.0}, {"name": "notify", "id": 53.0}} {
		got := v["allocations"].([]any)[i].(map[string]any)
		if got["name"] != want["name"] || got["id"] != want["id"] {
			t.Errorf("allocation %d: %v", i, got)
		}
	}
	req := f.submits[0]
	if req.Name != "pipeline" || len(req.Stages) != 3 || req.ClientRequestId == "" {
		t.Fatalf("request %v", req)
	}
	prep, train, notify := req.Stages[0].Request, req.Stages[1].Request, req.Stages[2]
	if prep.Name != "prep" || prep.Tenant != "" || prep.WorkDir != "/home/alice/proj" || prep.WalltimeSeconds != 1800 ||
		!reflect.DeepEqual(prep.Command, []string{"./prep.sh"}) || prep.Array.GetEnd() != 1 || prep.PriorityClass != DefaultPriorityClass {
		t.Errorf("prep %v", prep)
	}
	if train.Tenant != "ml" || train.NodesMin != 2 || train.NodesMax != 4 || train.WalltimeSeconds != 3600 || len(train.Command) != 2 {
		t.Errorf("train %v", train)
	}
	if len(notify.DependsOn) != 2 || notify.DependsOn[0].Condition != "failure" || notify.DependsOn[1].Condition != "mutex" {
		t.Errorf("notify depends_on %v", notify.DependsOn)
	}

	r = run(t, servers(f.addr), "dag", "submit", file)
	mustCode(t, r, 0)
	if r.stdout != "50\n" || !strings.Contains(r.stderr, "submitted DAG 50 pipeline: prep=50 (2 tasks), train=52, notify=53") {
		t.Errorf("table: %q %q", r.stdout, r.stderr)
	}
	r = run(t, servers(f.addr), "dag", "submit", "--parsable", file)
	if r.stdout != "50\n" {
		t.Errorf("--parsable: %q", r.stdout)
	}
	// A server refusal (its own max_dag_stages) is invalid input: exit 2.
	big := writeWorkflow(t, pipelineYAML+"  - {name: extra, entrypoint: x}\n")
	r = run(t, servers(f.addr), "dag", "submit", big)
	mustCode(t, r, ExitUsage)
	if !strings.Contains(r.stderr, "at most 3 are allowed") {
		t.Errorf("stderr %q", r.stderr)
	}
}

func TestDAGSubmitInvalid(t *testing.T) {
	dead := deadAddr(t)
	cases := []struct {
		name, body, want string
	}{
		{"cycle", "dag_id: c\nallocations:\n  - {name: a, entrypoint: x, depends_on: [b]}\n  - {name: b, entrypoint: x, depends_on: [a]}\n",
			"pipeline.yaml: line 3: the workflow has a cycle: a -> b -> a"},
		{"unknown key", "dag_id: c\nallocations:\n  - {name: a, entrypoint: x, gpus: 4}\n", `pipeline.yaml: line 3: unknown key "gpus" in allocation "a"`},
		{"unknown reference", "dag_id: c\nallocations:\n  - {name: a, entrypoint: x, depends_on: [z]}\n", `depends on "z", which is not an allocation`},
		{"bad walltime", "dag_id: c\nallocations:\n  - {name: a, entrypoint: x, walltime: 2 days}\n", `invalid walltime "2 days": allowed MM, MM:SS`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Nothing is sent: the server address is dead and the exit code is 2.
			r := run(t, servers(dead), "dag", "submit", writeWorkflow(t, tc.body))
			mustCode(t, r, ExitUsage)
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr %q, want %q", r.stderr, tc.want)
			}
		})
	}
	r := run(t, servers(dead), "dag", "submit", "/no/such/file.yaml")
	mustCode(t, r, ExitUsage)
	r = run(t, servers(dead), "dag", "submit")
	mustCode(t, r, ExitUsage)
}

func TestDAGSubmitDryRun(t *testing.T) {
	file := writeWorkflow(t, pipelineYAML)
	r := run(t, servers(deadAddr(t)), "dag", "submit", "--dry-run", file)
	mustCode(t, r, 0)
	if !strings.Contains(r.stdout, "ORDER") || !strings.Contains(r.stdout, "prep") || !strings.Contains(r.stdout, "train:afternotok") || !strings.Contains(r.stderr, "nothing submitted") {
		t.Errorf("dry run:\n%s\n%s", r.stdout, r.stderr)
	}
	r = run(t, servers(deadAddr(t)), "dag", "submit", "--dry-run", "-o", "json", file)
	mustCode(t, r, 0)
	var v struct {
		Name   string `json:"name"`
		Stages []struct {
			Name    string `json:"name"`
			Tenant  string `json:"tenant"`
			After   []dagDependencyView
			Depends []any `json:"depends_on"`
		} `json:"stages"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || len(v.Stages) != 3 || v.Stages[2].After[0] != (dagDependencyView{"train", "afternotok"}) ||
		len(v.Stages[2].Depends) != 1 {
		t.Errorf("dry run json %s (%v)", r.stdout, err)
	}
}

func TestDAGStatusListCancel(t *testing.T) {
	f := newFakeDAGs(t)
	r := run(t, servers(f.addr), "dag", "status", "50", "-o", "json")
	mustCode(t, r, 0)
	var v map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatal(err)
	}
	// CLI.md: {"dag_id", "state", "allocations": [{"name", "id", "state", "reason", "depends_on": [{"name", "condition"}]}]}.
	if v["dag_id"] != 50.0 || v["state"] != "FAILED" {
		t.Fatalf("status json %s", r.stdout)
	}
	ev := v["allocations"].([]any)[2].(map[string]any)
	if ev["name"] != "evaluate" || ev["id"] != 53.0 || ev["state"] != "CANCELLED" || ev["reason"] != "DependencyNeverSatisfied" ||
		!reflect.DeepEqual(ev["depends_on"], []any{map[string]any{"name": "train", "condition": "afterok"}}) {
		t.Errorf("evaluate %v", ev)
	}
	if deps := v["allocations"].([]any)[0].(map[string]any)["depends_on"]; !reflect.DeepEqual(deps, []any{}) {
		t.Errorf("prep depends_on %v, want []", deps)
	}

	r = run(t, servers(f.addr), "dag", "status", "pipeline", "-o", "wide")
	mustCode(t, r, 0)
	for _, want := range []string{"DAG 50 pipeline: FAILED", "prep  ", "└── train (afterok)", "├── evaluate (afterok)", "CANCELLED DependencyNeverSatisfied: afterok:52 (train) ended FAILED",
		"└── notify (afternotok)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, r.stdout)
		}
	}
	r = run(t, servers(f.addr), "dag", "status", "50", "--dot")
	mustCode(t, r, 0)
	if !strings.HasPrefix(r.stdout, `digraph "DAG 50 pipeline" {`) || !strings.Contains(r.stdout, `"prep" -> "train" [label="afterok"];`) {
		t.Errorf("dot:\n%s", r.stdout)
	}
	r = run(t, servers(f.addr), "dag", "status", "77")
	mustCode(t, r, ExitNotFound)

	r = run(t, servers(f.addr), "dag", "list")
	mustCode(t, r, 0)
	if !strings.Contains(r.stdout, "DAG_ID") || !strings.Contains(r.stdout, "pipeline") || !strings.Contains(r.stdout, "FAILED") {
		t.Errorf("list:\n%s", r.stdout)
	}
	r = run(t, servers(f.addr), "dag", "list", "-o", "json")
	mustCode(t, r, 0)
	var list []dagListView
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 1 || list[0].Stages != 4 || list[0].Skipped != 1 {
		t.Errorf("list json %s", r.stdout)
	}

	r = run(t, servers(f.addr), "dag", "cancel", "50", "--pending-only")
	mustCode(t, r, 0)
	if !f.cancels[0].PendingOnly || f.cancels[0].ClientRequestId == "" || !strings.Contains(r.stderr, "cancelled 2 allocations of DAG 50; 1 running allocations left") {
		t.Errorf("cancel: %v %q", f.cancels[0], r.stderr)
	}
}
