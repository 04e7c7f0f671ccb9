package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/cli"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// ctl runs latticectl in process against the dev stack, in dir.
func (d *devStack) ctl(t *testing.T, dir string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	env := cli.Env{
		Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb,
		Getenv: func(k string) string {
			switch k {
			case "LATTICE_SERVER":
				return d.srv.APIAddr()
			case "LATTICE_TENANT":
				return "alice"
			}
			return ""
		},
		Environ: func() []string { return nil }, Getwd: func() (string, error) { return dir, nil },
		Now: time.Now, Location: time.UTC,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code = cli.Main(ctx, env, args)
	return out.String(), errb.String(), code
}

func (d *devStack) dagStatus(t *testing.T, id string) *latticev1.DAGStatus {
	t.Helper()
	s, err := latticev1.NewDAGServiceClient(d.conn).GetDAG(context.Background(), &latticev1.GetDAGRequest{Id: id})
	if err != nil {
		t.Fatalf("GetDAG %s: %v", id, err)
	}
	return s
}

func (d *devStack) waitDAG(t *testing.T, id string, want model.DAGState) *latticev1.DAGStatus {
	t.Helper()
	var s *latticev1.DAGStatus
	deadline := time.Now().Add(90 * time.Second)
	for {
		s = d.dagStatus(t, id)
		if s.State == string(want) {
			return s
		}
		if s.State != string(model.DAGRunning) || time.Now().After(deadline) {
			var b strings.Builder
			for _, a := range s.Allocations {
				fmt.Fprintf(&b, "\n  %s %s %s %s", a.Name, a.State, a.Reason, a.ReasonDetail)
			}
			t.Fatalf("DAG %s (%s) is %s, want %s:%s", id, s.Name, s.State, want, b.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func stageOf(t *testing.T, s *latticev1.DAGStatus, name string) *latticev1.DAGStageStatus {
	t.Helper()
	for _, a := range s.Allocations {
		if a.Name == name {
			return a
		}
	}
	t.Fatalf("DAG %d has no stage %s", s.DagId, name)
	return nil
}

// placedAt is when a was first placed on nodes (its STAGING transition):
// a short job may be reported ended without a RUNNING report, so without
// a start time.
func placedAt(a *latticev1.Allocation) int64 {
	for _, h := range a.History {
		if h.State == string(model.StateStaging) {
			return h.TimeUnixMs
		}
	}
	return 0
}

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDAGExamplesRunToCompletion submits the three example workflows with
// latticectl on a dev stack and waits for each to complete.
func TestDAGExamplesRunToCompletion(t *testing.T) {
	d := startDev(t, t.TempDir(), 8)
	work := t.TempDir()
	files, _ := filepath.Glob("../examples/*.yaml")
	if len(files) != 3 {
		t.Fatalf("examples: %v", files)
	}
	ids := map[string]string{}
	for _, f := range files {
		out, stderr, code := d.ctl(t, work, "dag", "submit", "-o", "json", f)
		if code != 0 {
			t.Fatalf("dag submit %s: exit %d: %s", f, code, stderr)
		}
		// CLI.md: {"dag_id", "allocations": [{"name", "id"}]}.
		var v struct {
			DAGID       *uint64 `json:"dag_id"`
			Allocations []struct {
				Name *string `json:"name"`
				ID   *uint64 `json:"id"`
			} `json:"allocations"`
		}
		if err := json.Unmarshal([]byte(out), &v); err != nil || v.DAGID == nil || len(v.Allocations) < 4 {
			t.Fatalf("dag submit -o json: %s (%v)", out, err)
		}
		for _, a := range v.Allocations {
			if a.Name == nil || a.ID == nil || *a.ID < *v.DAGID {
				t.Fatalf("allocation entry %s", out)
			}
		}
		ids[filepath.Base(f)] = strconv.FormatUint(*v.DAGID, 10)
	}
	for name, id := range ids {
		s := d.waitDAG(t, id, model.DAGCompleted)
		for _, a := range s.Allocations {
			skipped := a.State == string(model.StateCancelled) && a.Reason == model.ReasonDependencyNeverSatisfied
			if a.State != string(model.StateCompleted) && !(name == "training-pipeline.yaml" && a.Name == "notify-failure" && skipped) {
				t.Errorf("%s: stage %s %s %s", name, a.Name, a.State, a.Reason)
			}
		}
	}
	// The ETL's transform ran element by element after extract, at most
	// four extractions at once; its load ran after every transform.
	etl := d.dagStatus(t, ids["etl.yaml"])
	extract, transform, load := stageOf(t, etl, "extract"), stageOf(t, etl, "transform"), stageOf(t, etl, "load")
	if extract.Tasks != 8 || extract.TasksCompleted != 8 || transform.TasksEnded != 8 {
		t.Errorf("extract %+v transform %+v", extract, transform)
	}
	var lastTransform int64
	for i := range 8 {
		e, tr := d.get(t, fmt.Sprintf("%s_%d", extract.DisplayId, i)), d.get(t, fmt.Sprintf("%s_%d", transform.DisplayId, i))
		if tr.EligibleTimeUnixMs < e.EndTimeUnixMs {
			t.Errorf("transform %d eligible at %d, before extract %d ended at %d", i, tr.EligibleTimeUnixMs, i, e.EndTimeUnixMs)
		}
		lastTransform = max(lastTransform, tr.EndTimeUnixMs)
	}
	if l := d.get(t, load.DisplayId); placedAt(l) < lastTransform {
		t.Errorf("load started at %d, before the last transform ended at %d", placedAt(l), lastTransform)
	}
	// The output of a stage is the entrypoint's.
	if got := d.logs(t, stageOf(t, d.dagStatus(t, ids["training-pipeline.yaml"]), "train").DisplayId, false); !strings.Contains(got, "for 3 epochs") {
		t.Errorf("train output %q", got)
	}

	// dag list and dag status as a user sees them.
	out, _, code := d.ctl(t, work, "dag", "list")
	if code != 0 || !strings.Contains(out, "nightly-etl") || !strings.Contains(out, "COMPLETED") {
		t.Errorf("dag list (%d):\n%s", code, out)
	}
	out, _, code = d.ctl(t, work, "dag", "status", "training-pipeline")
	if code != 0 || !strings.Contains(out, "└── train (afterok)") || !strings.Contains(out, "notify-failure (afternotok)") ||
		!strings.Contains(out, "DependencyNeverSatisfied") {
		t.Errorf("dag status (%d):\n%s", code, out)
	}
}

// TestDAGWhenTrainFails: the afterok successor of a failed stage is
// cancelled naming it, the afternotok one runs, an afterany stage
// downstream runs; the DAG ends FAILED. Fan-out runs in parallel, fan-in
// waits for all.
func TestDAGWhenTrainFails(t *testing.T) {
	d := startDev(t, t.TempDir(), 8)
	work := t.TempDir()
	f := writeFile(t, work, "pipeline.yaml", `
dag_id: failing-pipeline
allocations:
  - {name: prep, entrypoint: "true"}
  - {name: shard-a, entrypoint: "sleep 1", depends_on: [prep]}
  - {name: shard-b, entrypoint: "sleep 1", depends_on: [prep]}
  - {name: train, entrypoint: "echo diverged; exit 1", depends_on: [shard-a, shard-b]}
  - {name: evaluate, entrypoint: "true", depends_on: [{name: train, condition: success}]}
  - {name: notify, entrypoint: "echo train failed", depends_on: [{name: train, condition: failure}]}
  - {name: cleanup, entrypoint: "true", depends_on: [{name: evaluate, condition: any}]}
`)
	out, stderr, code := d.ctl(t, work, "dag", "submit", f)
	if code != 0 {
		t.Fatalf("dag submit: exit %d: %s", code, stderr)
	}
	id := strings.TrimSpace(out)
	s := d.waitDAG(t, id, model.DAGFailed)
	want := map[string]model.AllocState{"prep": "COMPLETED", "shard-a": "COMPLETED", "shard-b": "COMPLETED", "train": "FAILED",
		"evaluate": "CANCELLED", "notify": "COMPLETED", "cleanup": "COMPLETED"}
	for name, st := range want {
		if got := stageOf(t, s, name); got.State != string(st) {
			t.Errorf("%s is %s (%s), want %s", name, got.State, got.Reason, st)
		}
	}
	ev, train := stageOf(t, s, "evaluate"), stageOf(t, s, "train")
	if ev.Reason != model.ReasonDependencyNeverSatisfied || ev.ReasonDetail != fmt.Sprintf("afterok:%s (train) ended FAILED", train.DisplayId) {
		t.Errorf("evaluate: %s %q", ev.Reason, ev.ReasonDetail)
	}
	// Fan-out in parallel, fan-in after both.
	a, b, tr := d.get(t, stageOf(t, s, "shard-a").DisplayId), d.get(t, stageOf(t, s, "shard-b").DisplayId), d.get(t, train.DisplayId)
	if !(placedAt(a) < b.EndTimeUnixMs && placedAt(b) < a.EndTimeUnixMs) {
		t.Errorf("shards did not overlap: a %d-%d, b %d-%d", placedAt(a), a.EndTimeUnixMs, placedAt(b), b.EndTimeUnixMs)
	}
	if placedAt(tr) < max(a.EndTimeUnixMs, b.EndTimeUnixMs) {
		t.Errorf("train started at %d before both shards ended (%d, %d)", placedAt(tr), a.EndTimeUnixMs, b.EndTimeUnixMs)
	}
	// f2 counts from the release: train became eligible when the quorum
	// learnt that the last shard ended (its end is the agent's, a moment
	// earlier).
	if last := max(a.EndTimeUnixMs, b.EndTimeUnixMs); tr.EligibleTimeUnixMs < last || tr.EligibleTimeUnixMs > last+5000 {
		t.Errorf("train eligible at %d, shards ended at %d and %d", tr.EligibleTimeUnixMs, a.EndTimeUnixMs, b.EndTimeUnixMs)
	}

	// dag status -o json holds the CLI.md shape.
	out, _, code = d.ctl(t, work, "dag", "status", id, "-o", "json")
	var v map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil {
		t.Fatalf("dag status -o json (%d): %s", code, out)
	}
	for _, k := range []string{"dag_id", "state", "allocations"} {
		if _, ok := v[k]; !ok {
			t.Errorf("dag status -o json lacks %q", k)
		}
	}
	if v["state"] != "FAILED" {
		t.Errorf("state %v", v["state"])
	}
	for _, al := range v["allocations"].([]any) {
		m := al.(map[string]any)
		for _, k := range []string{"name", "id", "state", "reason", "depends_on"} {
			if _, ok := m[k]; !ok {
				t.Errorf("allocation %v lacks %q", m["name"], k)
			}
		}
		if m["name"] == "notify" {
			deps := m["depends_on"].([]any)
			if len(deps) != 1 || deps[0].(map[string]any)["name"] != "train" || deps[0].(map[string]any)["condition"] != "afternotok" {
				t.Errorf("notify depends_on %v", deps)
			}
		}
	}
	out, _, code = d.ctl(t, work, "dag", "status", id, "--dot")
	if code != 0 || !strings.HasPrefix(out, "digraph") || !strings.Contains(out, `"train" -> "notify" [label="afternotok", style=dashed];`) {
		t.Errorf("dag status --dot (%d):\n%s", code, out)
	}
}

// TestDAGRefusals: a cyclic file and one over the stage limit exit 2 with
// a message naming the problem, and nothing is stored.
func TestDAGRefusals(t *testing.T) {
	d := startDev(t, t.TempDir(), 2)
	work := t.TempDir()
	cyclic := writeFile(t, work, "cyclic.yaml", `dag_id: loop
allocations:
  - {name: a, entrypoint: "true", depends_on: [c]}
  - {name: b, entrypoint: "true", depends_on: [a]}
  - {name: c, entrypoint: "true", depends_on: [b]}
`)
	_, stderr, code := d.ctl(t, work, "dag", "submit", cyclic)
	if code != cli.ExitUsage || !strings.Contains(stderr, "cycle: a -> b -> c -> a") {
		t.Errorf("cyclic: exit %d: %s", code, stderr)
	}
	var b strings.Builder
	b.WriteString("dag_id: huge\nallocations:\n")
	for i := range 1001 {
		fmt.Fprintf(&b, "  - {name: s%d, entrypoint: \"true\"}\n", i)
	}
	huge := writeFile(t, work, "huge.yaml", b.String())
	_, stderr, code = d.ctl(t, work, "dag", "submit", huge)
	if code != cli.ExitUsage || !strings.Contains(stderr, "the workflow has 1001 allocations; at most 1000 are allowed") {
		t.Errorf("1,001 stages: exit %d: %s", code, stderr)
	}
	unknown := writeFile(t, work, "typo.yaml", "dag_id: t\nallocations:\n  - name: a\n    entrypont: \"true\"\n")
	_, stderr, code = d.ctl(t, work, "dag", "submit", unknown)
	if code != cli.ExitUsage || !strings.Contains(stderr, `typo.yaml: line 4: unknown key "entrypont"`) || !strings.Contains(stderr, "did you mean entrypoint?") {
		t.Errorf("typo: exit %d: %s", code, stderr)
	}
	var n int
	d.srv.view(func(st *quorum.State) { n = st.AllocationCount() + len(st.DAGs()) })
	if n != 0 {
		t.Errorf("refused workflows stored %d allocations and DAGs", n)
	}
	// Arrays beyond max_array_size are refused before anything is proposed.
	_, err := d.allocs.Submit(context.Background(), &latticev1.SubmitRequest{Request: &latticev1.AllocationRequest{NodesMin: 1, WalltimeSeconds: 60,
		Command: []string{"true"}, Array: &latticev1.ArraySpec{Start: 0, End: 99999, Step: 1}}})
	if err == nil || !strings.Contains(err.Error(), "max_array_size is 10001") {
		t.Errorf("100,000-task array: %v", err)
	}
}

// watchArray follows every committed change and records the most tasks of
// array id ever active at once, until stop is closed.
func watchArray(d *devStack, id uint64, stop <-chan struct{}) func() int {
	var mu sync.Mutex
	most := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			ch := d.srv.fsm.Changed()
			d.srv.view(func(st *quorum.State) {
				_, active, _, _, _ := st.ArrayProgress(id)
				mu.Lock()
				most = max(most, active)
				mu.Unlock()
			})
			select {
			case <-ch:
			case <-stop:
				return
			}
		}
	}()
	return func() int {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return most
	}
}

// TestDependenciesOnDevStack: %MAX holds at every commit; aftercorr
// releases element by element; afterok on an array waits for every task;
// singleton holds a second job of the same name; a?b starts when either
// holds.
func TestDependenciesOnDevStack(t *testing.T) {
	d := startDev(t, t.TempDir(), 8)
	sub := func(r *latticev1.AllocationRequest) string {
		t.Helper()
		if r.NodesMin == 0 {
			r.NodesMin = 1
		}
		return d.submit(t, r)
	}
	ids := func(display string) uint64 {
		n, _ := strconv.ParseUint(display, 10, 64)
		return n
	}

	t.Run("array of 20 with %4", func(t *testing.T) {
		stop := make(chan struct{})
		first := sub(&latticev1.AllocationRequest{Command: []string{"sleep 0.2"}, Array: &latticev1.ArraySpec{Start: 0, End: 19, Step: 1, MaxConcurrent: 4}})
		most := watchArray(d, ids(first), stop)
		for i := range 20 {
			d.waitState(t, fmt.Sprintf("%s_%d", first, i), model.StateCompleted)
		}
		close(stop)
		if m := most(); m > 4 || m < 2 {
			t.Fatalf("at most %d tasks ran at once, want 2..4", m)
		}
	})

	t.Run("aftercorr, afterok on an array", func(t *testing.T) {
		// Element i sleeps longer the lower i is: element 3 ends first.
		parent := sub(&latticev1.AllocationRequest{Command: []string{"sleep 0.$(( (4 - SLURM_ARRAY_TASK_ID) * 2 ))"}, Vcluster: "ml-training",
			Array: &latticev1.ArraySpec{Start: 0, End: 3, Step: 1}})
		child := sub(&latticev1.AllocationRequest{Command: []string{"true"}, Vcluster: "ml-training", Array: &latticev1.ArraySpec{Start: 0, End: 3, Step: 1},
			DependsOn: []*latticev1.Dependency{{Condition: "aftercorr", Ids: []uint64{ids(parent)}}}})
		post := sub(&latticev1.AllocationRequest{Command: []string{"true"}, DependsOn: []*latticev1.Dependency{{Condition: "afterok", Ids: []uint64{ids(parent)}}}})
		var ends []int64
		for i := range 4 {
			p := d.waitState(t, fmt.Sprintf("%s_%d", parent, i), model.StateCompleted)
			c := d.waitState(t, fmt.Sprintf("%s_%d", child, i), model.StateCompleted)
			if c.EligibleTimeUnixMs < p.EndTimeUnixMs {
				t.Errorf("child %d eligible at %d, before its parent ended at %d", i, c.EligibleTimeUnixMs, p.EndTimeUnixMs)
			}
			ends = append(ends, p.EndTimeUnixMs)
		}
		if c3 := d.get(t, child+"_3"); c3.EligibleTimeUnixMs >= ends[0] {
			t.Errorf("child 3 released at %d, not before parent 0 ended at %d: not element by element", c3.EligibleTimeUnixMs, ends[0])
		}
		p := d.waitState(t, post, model.StateCompleted)
		if last := slices.Max(ends); p.EligibleTimeUnixMs < last {
			t.Errorf("afterok on the array released at %d, before its last task ended at %d", p.EligibleTimeUnixMs, last)
		}
	})

	t.Run("singleton", func(t *testing.T) {
		single := []*latticev1.Dependency{{Condition: "singleton"}}
		one := sub(&latticev1.AllocationRequest{Name: "nightly", Command: []string{"sleep 1"}, DependsOn: single})
		d.waitState(t, one, model.StateRunning)
		two := sub(&latticev1.AllocationRequest{Name: "nightly", Command: []string{"true"}, DependsOn: single})
		if a := d.get(t, two); a.State != "PENDING" || a.Reason != model.ReasonDependency {
			t.Fatalf("second singleton: %s %s", a.State, a.Reason)
		}
		a1 := d.waitState(t, one, model.StateCompleted)
		a2 := d.waitState(t, two, model.StateCompleted)
		if a2.EligibleTimeUnixMs < a1.EndTimeUnixMs || placedAt(a2) < a1.EndTimeUnixMs {
			t.Errorf("second singleton released at %d and started at %d, before the first ended at %d", a2.EligibleTimeUnixMs, placedAt(a2), a1.EndTimeUnixMs)
		}
	})

	t.Run("any of", func(t *testing.T) {
		slow := sub(&latticev1.AllocationRequest{Command: []string{"sleep 60"}})
		fast := sub(&latticev1.AllocationRequest{Command: []string{"true"}})
		either := sub(&latticev1.AllocationRequest{Command: []string{"true"}, DependencyAny: true, DependsOn: []*latticev1.Dependency{
			{Condition: "afterok", Ids: []uint64{ids(slow)}}, {Condition: "afterok", Ids: []uint64{ids(fast)}}}})
		d.waitState(t, either, model.StateCompleted)
		if a := d.get(t, slow); a.State != "RUNNING" {
			t.Errorf("the slow dependency is %s", a.State)
		}
		if _, err := d.allocs.Cancel(context.Background(), &latticev1.CancelRequest{Ids: []string{slow}}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestDAGCancel: cancel --pending-only leaves the running stage alone and
// cancels what waits; a plain cancel stops the rest.
func TestDAGCancel(t *testing.T) {
	d := startDev(t, t.TempDir(), 4)
	work := t.TempDir()
	f := writeFile(t, work, "long.yaml", `
dag_id: long
allocations:
  - {name: first, entrypoint: "sleep 60"}
  - {name: second, entrypoint: "true", depends_on: [first]}
  - {name: third, entrypoint: "true", depends_on: [second]}
`)
	out, stderr, code := d.ctl(t, work, "dag", "submit", "--parsable", f)
	if code != 0 {
		t.Fatalf("submit: %s", stderr)
	}
	id := strings.TrimSpace(out)
	d.waitState(t, id, model.StateRunning)
	out, stderr, code = d.ctl(t, work, "dag", "cancel", id, "--pending-only", "-o", "json")
	var v struct {
		Cancelled []uint64 `json:"cancelled"`
		Running   int      `json:"running"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || len(v.Cancelled) != 2 || v.Running != 1 {
		t.Fatalf("cancel --pending-only (%d): %s %s", code, out, stderr)
	}
	if s := d.dagStatus(t, id); stageOf(t, s, "first").State != "RUNNING" || stageOf(t, s, "third").State != "CANCELLED" || s.State != "RUNNING" {
		t.Fatalf("after cancel --pending-only: %+v", s)
	}
	if _, stderr, code = d.ctl(t, work, "dag", "cancel", "long"); code != 0 {
		t.Fatalf("cancel: %s", stderr)
	}
	s := d.waitDAG(t, id, model.DAGCancelled)
	states := []string{}
	for _, a := range s.Allocations {
		states = append(states, a.State)
	}
	sort.Strings(states)
	if strings.Join(states, ",") != "CANCELLED,CANCELLED,CANCELLED" {
		t.Errorf("states %v", states)
	}
}
