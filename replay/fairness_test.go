package replay

import (
	"math"
	"testing"
)

// users builds a Metrics of per-user rows: tenant → (jobs, avg bsld); jobs
// is the trace's job count (users below the cut included).
func users(policy string, jobs int, rows ...UserMetrics) Metrics {
	return Metrics{Policy: policy, Jobs: jobs, Users: rows}
}

func u(tenant string, jobs int, bsld float64) UserMetrics {
	return UserMetrics{Tenant: tenant, Jobs: jobs, AvgBoundedSlowdown: bsld}
}

func TestCompareUsers(t *testing.T) {
	for _, tc := range []struct {
		name          string
		m, ref        Metrics
		minJobs       int
		compared      int
		worse         int
		worseJobs     float64
		worst, refW   string
		worstV, refWV float64
	}{
		{name: "no users", m: users("lattice", 0), ref: users("easy", 0)},
		{
			// 1.25 × 4 + 1 = 6 is not worse off; 6.01 is.
			name: "threshold", m: users("lattice", 100, u("a", 40, 6), u("b", 30, 6.01), u("c", 30, 2)),
			ref:      users("easy", 100, u("a", 40, 4), u("b", 30, 4), u("c", 30, 9)),
			compared: 3, worse: 1, worseJobs: 0.30, worst: "b", worstV: 6.01, refW: "c", refWV: 9,
		},
		{
			// Users under 20 jobs are neither compared nor counted, but
			// their jobs stay in the share's denominator.
			name: "cut", m: users("lattice", 100, u("a", 50, 30), u("b", 19, 500), u("c", 31, 1)),
			ref:      users("easy", 100, u("a", 50, 10), u("b", 19, 1), u("c", 31, 2)),
			compared: 2, worse: 1, worseJobs: 0.50, worst: "a", worstV: 30, refW: "a", refWV: 10,
		},
		{
			name: "min jobs 1", m: users("lattice", 100, u("a", 50, 30), u("b", 19, 500), u("c", 31, 1)),
			ref: users("easy", 100, u("a", 50, 10), u("b", 19, 1), u("c", 31, 2)), minJobs: 1,
			compared: 3, worse: 2, worseJobs: 0.69, worst: "b", worstV: 500, refW: "a", refWV: 10,
		},
		{
			// A user the reference never saw is left out.
			name: "missing", m: users("lattice", 60, u("a", 30, 3), u("z", 30, 90)),
			ref:      users("easy", 60, u("a", 30, 1)),
			compared: 1, worse: 1, worseJobs: 0.5, worst: "a", worstV: 3, refW: "a", refWV: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := CompareUsers(tc.m, tc.ref, tc.minJobs)
			if len(f.Users) != tc.compared || f.WorseOffUsers != tc.worse || math.Abs(f.WorseOffJobs-tc.worseJobs) > 1e-12 {
				t.Errorf("compared %d, worse off %d, share %v; want %d, %d, %v", len(f.Users), f.WorseOffUsers, f.WorseOffJobs,
					tc.compared, tc.worse, tc.worseJobs)
			}
			if f.Worst.Tenant != tc.worst || f.Worst.AvgBoundedSlowdown != tc.worstV ||
				f.ReferenceWorst.Tenant != tc.refW || f.ReferenceWorst.AvgBoundedSlowdown != tc.refWV {
				t.Errorf("worst %+v, reference's worst %+v; want %s %v, %s %v", f.Worst, f.ReferenceWorst, tc.worst, tc.worstV, tc.refW, tc.refWV)
			}
			for i, r := range f.Users {
				if i > 0 && r.Jobs > f.Users[i-1].Jobs {
					t.Errorf("users not most jobs first: %+v", f.Users)
				}
				if want := r.AvgBoundedSlowdown / r.ReferenceAvgBoundedSlowdown; math.Abs(r.Ratio-want) > 1e-12 {
					t.Errorf("%s: ratio %v, want %v", r.Tenant, r.Ratio, want)
				}
				if r.WorseOff != (r.AvgBoundedSlowdown > 1.25*r.ReferenceAvgBoundedSlowdown+1) {
					t.Errorf("%s: worse off %v at %v against %v", r.Tenant, r.WorseOff, r.AvgBoundedSlowdown, r.ReferenceAvgBoundedSlowdown)
				}
			}
			wantMin := tc.minJobs
			if wantMin == 0 {
				wantMin = FairnessMinJobs
			}
			if f.Reference != tc.ref.Policy || f.MinJobs != wantMin {
				t.Errorf("reference %q, min jobs %d", f.Reference, f.MinJobs)
			}
		})
	}
}

// TestCompareUsersReplayed: on a replayed trace, a policy compared with
// itself leaves nobody worse off, and its rows are its users' figures.
func TestCompareUsersReplayed(t *testing.T) {
	tr := loadTrace(t, "hpc2n.swf")
	res, err := Run(tr, Config{Policy: PolicyEASY})
	if err != nil {
		t.Fatal(err)
	}
	f := CompareUsers(res.Metrics, res.Metrics, 0)
	if f.WorseOffUsers != 0 || f.WorseOffJobs != 0 || f.Worst != f.ReferenceWorst || len(f.Users) == 0 {
		t.Errorf("easy against itself: %+v", f)
	}
	n := 0
	for _, u := range res.Users {
		if u.Jobs >= FairnessMinJobs {
			n++
		}
	}
	if len(f.Users) != n {
		t.Errorf("%d users compared, %d have ≥ %d jobs", len(f.Users), n, FairnessMinJobs)
	}
}
