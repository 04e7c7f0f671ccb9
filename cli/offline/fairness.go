package offline

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/latticehpc/lattice/replay"
)

// replayFairnessTable prints the fairness report of every policy that has
// one (replay.CompareUsers): a summary row block, then one row per
// compared user, the users whose service fell most (in the first policy
// with a report) first; "!" marks a worse-off user.
func replayFairnessTable(tw io.Writer, ms []replay.Metrics, width int) {
	var fs []replay.Metrics
	for _, m := range ms {
		if m.Fairness != nil {
			fs = append(fs, m)
		}
	}
	if len(fs) == 0 {
		return
	}
	f0 := fs[0].Fairness
	fmt.Fprintf(tw, "%-*s\t\n", width, "")
	fmt.Fprintf(tw, "%-*s\t", width, fmt.Sprintf("FAIRNESS VS %s, USERS OF %d+ JOBS", strings.ToUpper(f0.Reference), f0.MinJobs))
	for _, m := range fs {
		fmt.Fprintf(tw, "%s\t", strings.ToUpper(m.Policy))
	}
	fmt.Fprintln(tw)
	rows := []struct {
		label string
		value func(f *replay.Fairness) string
	}{
		{"worst-served user", func(f *replay.Fairness) string { return userSlowdown(f.Worst) }},
		{"easy's worst-served user", func(f *replay.Fairness) string { return userSlowdown(f.ReferenceWorst) }},
		{"worse-off users", func(f *replay.Fairness) string { return fmt.Sprintf("%d of %d", f.WorseOffUsers, len(f.Users)) }},
		{"jobs of worse-off users", func(f *replay.Fairness) string { return fmtF(f.WorseOffJobs, 3) }},
		{"jain fairness (easy's)", func(f *replay.Fairness) string {
			return fmt.Sprintf("%s (%s)", fmtF(f.Jain, 3), fmtF(f.ReferenceJain, 3))
		}},
	}
	for _, r := range rows {
		fmt.Fprintf(tw, "%-*s\t", width, r.label)
		for _, m := range fs {
			fmt.Fprintf(tw, "%s\t", r.value(m.Fairness))
		}
		fmt.Fprintln(tw)
	}
	if len(f0.Users) == 0 {
		return
	}
	users := slices.Clone(f0.Users)
	slices.SortStableFunc(users, func(x, y replay.UserFairness) int { return cmp.Compare(y.Ratio, x.Ratio) })
	fmt.Fprintf(tw, "%-*s\t\n", width, "")
	fmt.Fprintf(tw, "%-*s\t%s\t", width, "USER (JOBS): BSLD (X EASY'S)", "EASY")
	for _, m := range fs {
		fmt.Fprintf(tw, "%s\t", strings.ToUpper(m.Policy))
	}
	fmt.Fprintln(tw)
	for _, u := range users {
		fmt.Fprintf(tw, "%-*s\t%s\t", width, fmt.Sprintf("%s (%d)", u.Tenant, u.Jobs), fmtF(u.ReferenceAvgBoundedSlowdown, 2))
		for _, m := range fs {
			v := "-"
			if i := slices.IndexFunc(m.Fairness.Users, func(x replay.UserFairness) bool { return x.Tenant == u.Tenant }); i >= 0 {
				x := m.Fairness.Users[i]
				v = fmt.Sprintf("%s (x%s)", fmtF(x.AvgBoundedSlowdown, 2), fmtF(x.Ratio, 2))
				if x.WorseOff {
					v += " !"
				}
			}
			fmt.Fprintf(tw, "%s\t", v)
		}
		fmt.Fprintln(tw)
	}
}

// replayFairnessWidth is the width of the fairness table's labels (0 when
// no policy has a report).
func replayFairnessWidth(ms []replay.Metrics) int {
	for _, m := range ms {
		if m.Fairness != nil {
			return len(fmt.Sprintf("FAIRNESS VS %s, USERS OF %d+ JOBS", strings.ToUpper(m.Fairness.Reference), m.Fairness.MinJobs))
		}
	}
	return 0
}

// userSlowdown is "TENANT (JOBS) BSLD".
func userSlowdown(u replay.UserSlowdown) string {
	if u.Tenant == "" {
		return "-"
	}
	return fmt.Sprintf("%s (%d) %s", u.Tenant, u.Jobs, fmtF(u.AvgBoundedSlowdown, 2))
}
