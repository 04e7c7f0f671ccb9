package cli

import (
	"cmp"
	"fmt"
	"io"
	"slices"

	"github.com/urfave/cli/v2"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// explainPending is `explain` without an id: every pending allocation with
// its score and each factor's weighted contribution, like sprio, in
// queue order within each vCluster. The explanations are the ones the
// schedulers computed in their last cycle (List carries them).
func (r *runner) explainPending(c *cli.Context) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	req := &latticev1.ListAllocationsRequest{States: []string{string(model.StatePending)}, Vcluster: c.String("vcluster")}
	if v, ok := explicit(c, "tenant"); ok {
		req.Tenant = v
	}
	all, err := r.listAllocations(c, req)
	if err != nil {
		return err
	}
	users := splitList(c.String("user"))
	var allocs []*latticev1.Allocation
	for _, a := range all {
		if model.AllocState(a.GetState()) == model.StatePending && (len(users) == 0 || slices.Contains(users, userOf(a))) {
			allocs = append(allocs, a)
		}
	}
	// Queue order: by vCluster, then queue position (unplaced last), then id.
	pos := func(a *latticev1.Allocation) int32 {
		if p := a.GetExplanation().GetQueuePosition(); p > 0 {
			return p
		}
		return 1 << 30
	}
	slices.SortStableFunc(allocs, func(x, y *latticev1.Allocation) int {
		return cmp.Or(cmp.Compare(x.GetRequest().GetVcluster(), y.GetRequest().GetVcluster()), cmp.Compare(pos(x), pos(y)), cmp.Compare(x.GetId(), y.GetId()))
	})
	views := make([]pendingView, 0, len(allocs))
	factors := map[string]float64{} // the factor names seen (sortedWeights orders them)
	for _, a := range allocs {
		e := a.GetExplanation()
		if e == nil {
			e = &latticev1.Explanation{Id: displayID(a), State: a.GetState(), Reason: a.GetReason(),
				Message: "not yet considered by its vCluster's scheduler"}
		}
		for _, f := range e.GetFactors() {
			factors[f.GetName()] = 0
		}
		views = append(views, pendingView{explanationView: explanationOf(e), VCluster: a.GetRequest().GetVcluster(), User: userOf(a),
			Tenant: a.GetRequest().GetTenant(), PriorityClass: a.GetRequest().GetPriorityClass()})
	}
	names := sortedWeights(factors)
	return r.emitAs(format, views, func(w io.Writer, _ bool) error {
		// sprio -l's order: id, partition, user, priority, its factors.
		head := []any{"ID", "VCLUSTER", "USER", "SCORE"}
		for _, f := range names {
			head = append(head, f)
		}
		row(w, append(head, "POS", "REASON", "EXPECTED_START")...)
		for i, v := range views {
			e := allocs[i].GetExplanation()
			score, p := "-", "-"
			if e != nil && len(e.GetFactors()) > 0 {
				score = fmt.Sprintf("%.3f", e.GetScore())
			}
			if v.QueuePosition > 0 {
				p = fmt.Sprint(v.QueuePosition)
			}
			cols := []any{v.ID, orDash(v.VCluster), v.User, score}
			for _, f := range names {
				val := "-"
				for _, fs := range e.GetFactors() {
					if fs.GetName() == f {
						val = fmt.Sprintf("%.3f", fs.GetContribution())
					}
				}
				cols = append(cols, val)
			}
			start := "unknown"
			if ms := e.GetExpectedStartUnixMs(); ms != 0 {
				start = r.tableTime(ms)
			}
			row(w, append(cols, p, orDash(cmp.Or(v.Reason, allocs[i].GetReason())), start)...)
		}
		return nil
	})
}

// pendingView is one row of `explain -o json` without an id: the
// explanation (the shape `explain ID -o json` prints) with whose it is.
type pendingView struct {
	explanationView
	VCluster      string `json:"vcluster"`
	User          string `json:"user"`
	Tenant        string `json:"tenant"`
	PriorityClass int32  `json:"priority_class"`
}
