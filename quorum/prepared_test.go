package quorum

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

// An entry applies as it says, whatever the rules of the member applying
// it: a prepared request is taken as it is (a rule tightened since it was
// proposed does not reject it on replay), and an entry written before
// level 1 is defaulted and validated by level 0's frozen rules.
func TestEntriesApplyAsTheySay(t *testing.T) {
	f := newFixture(t)
	long := strings.Repeat("n", 300) // beyond today's 200-byte rule: as if the rule was tightened later
	r := model.Request{Name: long, Command: []string{"x"}, NodesMin: 1, NodesMax: 1, Walltime: time.Hour,
		Tenant: "default", VCluster: "batch", Checkpoint: model.CheckpointNone}
	if r.Validate() == nil {
		t.Fatal("the request must break a rule of today for the test to show anything")
	}
	res := f.ok(&Submit{Items: []SubmitItem{{Request: r}}, Prepared: true})
	if a := f.s.Allocation(res.IDs[0]); a.Name != long || a.Walltime != time.Hour {
		t.Fatalf("prepared entry applied as %+v", a.Request)
	}

	// The same request in an entry of level 0 is judged by level 0's rules.
	if r := f.apply(&Submit{Items: []SubmitItem{{Request: r}}}); r.Rejection == nil || !strings.Contains(r.Rejection.Message, "200 characters") {
		t.Fatalf("a level-0 entry breaking a level-0 rule: %+v", r.Rejection)
	}
	// And an entry of level 0 is defaulted at apply, as it was.
	res = f.ok(&Submit{Items: []SubmitItem{{Request: model.Request{Command: []string{"x"}, NodesMin: 1}}}})
	a := f.s.Allocation(res.IDs[0])
	if a.VCluster != "batch" || a.Walltime != model.DefaultWalltime || a.Tenant != model.DefaultTenant || a.NodesMax != 1 {
		t.Fatalf("level-0 entry not defaulted at apply: %+v", a.Request)
	}
}

// A member of level 0 ignores Prepared and applies level 0's rules to the
// request: for a request prepared by a leader (resolved and defaulted),
// that changes nothing, so old and new members keep the same allocation.
func TestPreparedRequestsAreFixedPointsOfLevel0(t *testing.T) {
	reqs := []model.Request{
		{Command: []string{"x"}, NodesMin: 1},
		{Script: "#!/bin/sh\n", NodesMin: 2, NodesMax: 4, Constraints: []string{"b", "a"}, Array: &model.ArraySpec{End: 3, Step: 1}},
		{Command: []string{"x"}, NodesMin: 1, DependsOn: []model.Dependency{{Condition: model.AfterOK, IDs: []uint64{2, 1, 2}}}, Tenant: "t", Walltime: time.Minute},
	}
	for _, r := range reqs {
		prepared := r
		prepared.VCluster = "batch"
		prepared.ApplyDefaults()
		again := prepared
		again.ApplyDefaultsLevel0()
		a, _ := json.Marshal(prepared)
		b, _ := json.Marshal(again)
		if string(a) != string(b) {
			t.Fatalf("level 0's defaults change a prepared request:\n%s\n%s", a, b)
		}
		if err := again.ValidateLevel0(); err != nil {
			t.Fatalf("level 0 refuses a prepared request: %v", err)
		}
	}
}
