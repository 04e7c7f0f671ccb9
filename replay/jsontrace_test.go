package replay

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const sampleJSON = `{
  "format": "lattice-trace/1",
  "vclusters": [
    {"name": "hpc-batch", "nodes": 4, "allow_lending": true},
    {"name": "ml-training", "nodes": 2, "allow_borrowing": true}
  ],
  "tenants": [{"name": "physics", "fair_share_target": 0.6}, {"name": "bio", "fair_share_target": 0.4}],
  "jobs": [
    {"id": 1, "submit": 0, "runtime": 10, "walltime": 20, "nodes": 4, "tenant": "physics"},
    {"id": 2, "submit": 0, "runtime": 5, "nodes": 2, "tenant": "bio", "vcluster": "ml-training",
     "priority_class": 5, "checkpoint": "signal", "checkpoint_minutes": 2},
    {"id": 3, "submit": 1, "runtime": 5, "walltime": 2, "nodes": 1, "tenant": "bio", "depends_on": [1, 2]},
    {"id": 4, "submit": 2, "runtime": 5, "nodes": 3, "vcluster": "ml-training"}
  ]
}`

func TestReadJSON(t *testing.T) {
	tr, err := ReadJSON(strings.NewReader(sampleJSON))
	if err != nil {
		t.Fatal(err)
	}
	if tr.Capacity != 6 || len(tr.VClusters) != 2 || len(tr.Tenants) != 2 {
		t.Fatalf("capacity %d vclusters %d tenants %d", tr.Capacity, len(tr.VClusters), len(tr.Tenants))
	}
	// Job 4 needs 3 nodes of ml-training's 2: dropped.
	if len(tr.Jobs) != 3 || tr.Dropped != 1 {
		t.Fatalf("%d jobs, %d dropped; want 3 and 1", len(tr.Jobs), tr.Dropped)
	}
	j2, j3 := tr.Jobs[1], tr.Jobs[2]
	if j2.VCluster != "ml-training" || j2.PriorityClass != 5 || j2.Checkpoint != "signal" || j2.Estimate != 5*time.Second {
		t.Errorf("job 2: %+v", j2)
	}
	if j3.VCluster != "hpc-batch" || j3.Estimate != 5*time.Second || len(j3.DependsOn) != 2 {
		t.Errorf("job 3 (walltime raised to runtime, first vcluster): %+v", j3)
	}
	// Replays under every baseline: job 3 waits for jobs 1 (ends 10) and 2.
	for _, p := range []string{PolicyFCFS, PolicyEASY, PolicyConservative} {
		got := starts(t, tr, Config{Policy: p})
		if got[1] != 0 || got[2] != 0 || got[3] != 10 {
			t.Errorf("%s: starts %v, want 1:0 2:0 3:10", p, got)
		}
	}
}

func TestReadJSONErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, msg string }{
		{"syntax", "{\n \"jobs\": [\n  {\"id\": 1,,}\n]}", "line 3"},
		{"type", "{\"jobs\": [{\"id\": \"x\"}]}", "line 1"},
		{"unknown field", `{"jobs": [{"id": 1, "nodes": 1, "cores": 2}]}`, "unknown field"},
		{"duplicate id", `{"jobs": [{"id": 1, "nodes": 1}, {"id": 1, "nodes": 1}]}`, "duplicate id"},
		{"zero nodes", `{"jobs": [{"id": 1, "nodes": 0}]}`, "nodes 0"},
		{"unknown dependency", `{"jobs": [{"id": 1, "nodes": 1, "depends_on": [9]}]}`, "unknown job 9"},
		{"cycle", `{"jobs": [{"id": 1, "nodes": 1, "depends_on": [2]}, {"id": 2, "nodes": 1, "depends_on": [1]}]}`, "cycle"},
		{"unknown vcluster", `{"vclusters": [{"name": "a", "nodes": 2}], "jobs": [{"id": 1, "nodes": 1, "vcluster": "b"}]}`, "unknown vcluster"},
		{"bad checkpoint", `{"jobs": [{"id": 1, "nodes": 1, "checkpoint": "dump"}]}`, "checkpoint"},
		{"bad priority", `{"jobs": [{"id": 1, "nodes": 1, "priority_class": 11}]}`, "priority_class"},
		{"bad format", `{"format": "other/2", "jobs": []}`, "format"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadJSON(strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %v, want one containing %q", err, tc.msg)
			}
			var se *SyntaxError
			if strings.HasPrefix(tc.msg, "line") && !errors.As(err, &se) {
				t.Errorf("want a SyntaxError, got %T", err)
			}
		})
	}
}
