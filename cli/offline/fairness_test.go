package offline

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latticehpc/lattice/replay"
)

// usersSWF is 60 jobs of three users on 4 nodes: u1 and u2 submit 25 each,
// u3 10 (below the report's cut).
func usersSWF(t *testing.T) string {
	t.Helper()
	lines := []string{"; MaxProcs: 4"}
	for i := range 60 {
		user := 1 + i%2
		if i >= 50 {
			user = 3
		}
		run, procs := 10+(i*37)%200, 1+(i*7)%4
		lines = append(lines, fmt.Sprintf("%d %d -1 %d %d -1 -1 %d %d -1 1 %d -1 -1 -1 -1 -1 -1", i+1, i*20, run, procs, procs, 3*run, user))
	}
	path := filepath.Join(t.TempDir(), "users.swf")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReplayFairnessReport: every policy but easy carries the report
// against easy replayed in the same run, also when --policy does not name
// easy (then easy is not shown); --fairness=false leaves it out.
func TestReplayFairnessReport(t *testing.T) {
	trace := usersSWF(t)
	out, stderr, err := runReplayCmd(t, "-o", "json", "replay", "--policy", "easy", trace)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var easy replay.Metrics
	if err := json.Unmarshal([]byte(out), &easy); err != nil {
		t.Fatal(err)
	}
	if easy.Fairness != nil {
		t.Errorf("easy compared with itself: %+v", easy.Fairness)
	}
	ref := map[string]float64{}
	for _, u := range easy.Users {
		ref[u.Tenant] = u.AvgBoundedSlowdown
	}

	for _, policies := range []string{"fcfs", "easy,fcfs"} {
		out, stderr, err := runReplayCmd(t, "-o", "json", "replay", "--policy", policies, trace)
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		var ms []replay.Metrics
		if policies == "fcfs" {
			var m replay.Metrics
			err = json.Unmarshal([]byte(out), &m)
			ms = []replay.Metrics{m}
		} else {
			err = json.Unmarshal([]byte(out), &ms)
		}
		if err != nil {
			t.Fatalf("%s: %v\n%s", policies, err, out)
		}
		fcfs := ms[len(ms)-1]
		f := fcfs.Fairness
		if f == nil || f.Reference != "easy" || f.MinJobs != 20 || len(f.Users) != 2 {
			t.Fatalf("%s: fairness %+v", policies, f)
		}
		for _, u := range f.Users {
			if u.Tenant == "u3" || u.ReferenceAvgBoundedSlowdown != ref[u.Tenant] {
				t.Errorf("%s: row %+v, easy's figure %v", policies, u, ref[u.Tenant])
			}
		}
		if !strings.Contains(out, `"worse_off_jobs"`) || !strings.Contains(out, `"reference_worst_user"`) {
			t.Errorf("%s: JSON keys missing:\n%s", policies, out)
		}
	}

	out, _, err = runReplayCmd(t, "-o", "json", "replay", "--policy", "fcfs", "--fairness=false", trace)
	if err != nil || strings.Contains(out, `"fairness"`) {
		t.Errorf("--fairness=false: %v\n%s", err, out)
	}
	out, _, err = runReplayCmd(t, "replay", "--policy", "fcfs,sjbf", trace)
	if err != nil || !strings.Contains(out, "FAIRNESS VS EASY, USERS OF 20+ JOBS") || !strings.Contains(out, "jobs of worse-off users") ||
		!strings.Contains(out, "USER (JOBS): BSLD (X EASY'S)") {
		t.Errorf("table: %v\n%s", err, out)
	}
}
