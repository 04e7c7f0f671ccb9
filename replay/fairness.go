package replay

import (
	"cmp"
	"slices"
)

// Fairness report defaults (issue 32): users with fewer jobs than
// FairnessMinJobs are left out, and a user is worse off than under the
// reference when its average bounded slowdown exceeds
// WorseOffFactor × the reference's + WorseOffSlack.
const (
	FairnessMinJobs = 20
	WorseOffFactor  = 1.25
	WorseOffSlack   = 1.0
)

// Fairness compares each user's service under one policy with the same
// user's under a reference policy (EASY) replayed on the same trace. Only
// users with at least MinJobs jobs are compared: fewer jobs make a user's
// average a matter of when they happened to arrive.
type Fairness struct {
	// Reference is the policy compared against (easy).
	Reference string `json:"reference"`
	MinJobs   int    `json:"min_jobs"`
	// Users has one row per compared user, most jobs first.
	Users []UserFairness `json:"users"`
	// Worst is the compared user with the highest average bounded
	// slowdown under the policy; ReferenceWorst the same under the
	// reference (often another user).
	Worst          UserSlowdown `json:"worst_user"`
	ReferenceWorst UserSlowdown `json:"reference_worst_user"`
	// WorseOffUsers counts the users worse off than under the reference:
	// average bounded slowdown > WorseOffFactor × the reference's +
	// WorseOffSlack. WorseOffJobs is the share of all the trace's jobs
	// that belong to them.
	WorseOffUsers int     `json:"worse_off_users"`
	WorseOffJobs  float64 `json:"worse_off_jobs"`
	// Jain and ReferenceJain are Jain's index over all users (information
	// only: a handful of jobs decides it).
	Jain          float64 `json:"jain_fairness"`
	ReferenceJain float64 `json:"reference_jain_fairness"`
}

// UserSlowdown names a user and its average bounded slowdown.
type UserSlowdown struct {
	Tenant             string  `json:"tenant"`
	Jobs               int     `json:"jobs"`
	AvgBoundedSlowdown float64 `json:"avg_bounded_slowdown"`
}

// UserFairness is one compared user.
type UserFairness struct {
	Tenant string `json:"tenant"`
	Jobs   int    `json:"jobs"`
	// AvgBoundedSlowdown under the policy, and under the reference.
	AvgBoundedSlowdown          float64 `json:"avg_bounded_slowdown"`
	ReferenceAvgBoundedSlowdown float64 `json:"reference_avg_bounded_slowdown"`
	// Ratio is AvgBoundedSlowdown / ReferenceAvgBoundedSlowdown.
	Ratio    float64 `json:"ratio"`
	WorseOff bool    `json:"worse_off"`
}

// WorseOff reports whether a user whose average bounded slowdown is bsld
// under a policy and ref under the reference is worse off.
func WorseOff(bsld, ref float64) bool {
	return bsld > WorseOffFactor*ref+WorseOffSlack
}

// CompareUsers is m's fairness report against ref, a replay of the same
// trace under the reference policy, over the users with at least minJobs
// jobs (0 = FairnessMinJobs). A user missing from ref is left out.
func CompareUsers(m, ref Metrics, minJobs int) *Fairness {
	if minJobs <= 0 {
		minJobs = FairnessMinJobs
	}
	f := &Fairness{Reference: ref.Policy, MinJobs: minJobs, Users: []UserFairness{},
		Jain: m.JainFairness, ReferenceJain: ref.JainFairness}
	refs := make(map[string]UserMetrics, len(ref.Users))
	for _, u := range ref.Users {
		refs[u.Tenant] = u
	}
	worseJobs := 0
	for _, u := range m.Users {
		r, ok := refs[u.Tenant]
		if u.Jobs < minJobs || !ok {
			continue
		}
		row := UserFairness{Tenant: u.Tenant, Jobs: u.Jobs, AvgBoundedSlowdown: u.AvgBoundedSlowdown,
			ReferenceAvgBoundedSlowdown: r.AvgBoundedSlowdown, WorseOff: WorseOff(u.AvgBoundedSlowdown, r.AvgBoundedSlowdown)}
		if r.AvgBoundedSlowdown > 0 {
			row.Ratio = u.AvgBoundedSlowdown / r.AvgBoundedSlowdown
		}
		if row.WorseOff {
			f.WorseOffUsers++
			worseJobs += u.Jobs
		}
		if u.AvgBoundedSlowdown > f.Worst.AvgBoundedSlowdown {
			f.Worst = UserSlowdown{u.Tenant, u.Jobs, u.AvgBoundedSlowdown}
		}
		if r.AvgBoundedSlowdown > f.ReferenceWorst.AvgBoundedSlowdown {
			f.ReferenceWorst = UserSlowdown{r.Tenant, r.Jobs, r.AvgBoundedSlowdown}
		}
		f.Users = append(f.Users, row)
	}
	slices.SortStableFunc(f.Users, func(x, y UserFairness) int {
		if x.Jobs != y.Jobs {
			return y.Jobs - x.Jobs
		}
		return cmp.Compare(x.Tenant, y.Tenant)
	})
	if m.Jobs > 0 {
		f.WorseOffJobs = float64(worseJobs) / float64(m.Jobs)
	}
	return f
}
