package cli

import (
	"cmp"
	"io"
	"slices"
	"time"

	"github.com/urfave/cli/v2"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// history is sacct for Lattice: allocations that ended (or, with --state,
// were in any state) within a time window, with their elapsed time, start,
// end, exit code and reason. It is built on the List RPC: the server keeps
// ended allocations listable for its retention period.

func (r *runner) historyCommand() *cli.Command {
	return &cli.Command{
		Name:      "history",
		Aliases:   []string{"sacct"},
		Usage:     "ended allocations with elapsed time, start, end, exit code and reason (sacct-like; default: since midnight)",
		ArgsUsage: "[ID...]",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "starttime", Aliases: []string{"S"}, Usage: "only allocations active at or after this time (" + slurmTimeForms + ")", DefaultText: "midnight"},
			&cli.StringFlag{Name: "endtime", Aliases: []string{"E"}, Usage: "only allocations active before this time (same forms)", DefaultText: "now"},
			&cli.StringFlag{Name: "user", Aliases: []string{"u"}, Usage: "only allocations submitted by USER[,USER...]"},
			&cli.StringFlag{Name: "state", Aliases: []string{"s", "t", "states"}, Usage: "only these states: STATE[,STATE...] (" + allowedStates + "; default: COMPLETED, FAILED, CANCELLED)"},
			&cli.StringFlag{Name: "vcluster", Aliases: []string{"r", "p", "partition"}, Usage: "only this vCluster"},
			&cli.StringFlag{Name: "name", Usage: "only allocations named NAME[,NAME...]"},
			&cli.BoolFlag{Name: "allusers", Aliases: []string{"a"}, Usage: "every user's allocations you may see (the default; kept for sacct habits)"},
			&cli.StringFlag{Name: "format", Aliases: []string{"O", "Format"}, Usage: "the table's columns, as for status: names \"id,name,state,elapsed,exitcode\" or letters \"%i %j %T %M %X\""},
		}, listingFlags()...),
		Action: r.history,
	}
}

// historyView is one row of `history -o json`: the allocation (the shape
// status prints) with who submitted it and how long it ran.
type historyView struct {
	allocationView
	User           string `json:"user"`
	ElapsedSeconds int64  `json:"elapsed_seconds"`
	// Usage is what it used (usage_job.go); its fields are absent when
	// it was not measured (no cgroups on its node).
	*usageView
}

func (r *runner) history(c *cli.Context) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	ids := c.Args().Slice()
	if err := checkIDs(ids); err != nil {
		return err
	}
	now := r.Now()
	from, err := parseSlurmTime("starttime", cmpOr(c.String("starttime"), "midnight"), now, r.Location)
	if err != nil {
		return err
	}
	to, err := parseSlurmTime("endtime", cmpOr(c.String("endtime"), "now"), now, r.Location)
	if err != nil {
		return err
	}
	if to.Before(from) {
		return &model.FieldError{Field: "endtime", Value: c.String("endtime"), Allowed: "a time after --starttime " + from.Format(time.RFC3339)}
	}
	states := []stateFilter{{state: model.StateCompleted}, {state: model.StateFailed}, {state: model.StateCancelled}}
	if s := c.String("state"); s != "" {
		if states, err = parseStateFilters(s); err != nil {
			return err
		}
	}
	var cols []column
	if f := c.String("format"); f != "" {
		if cols, err = parseFormat(f); err != nil {
			return err
		}
	}
	req := &latticev1.ListAllocationsRequest{Ids: ids, Vcluster: c.String("vcluster"), States: serverStates(states)}
	if v, ok := explicit(c, "tenant"); ok {
		req.Tenant = v
	}
	// The server keeps ended allocations that ended within the window
	// (plus a minute for clocks apart); the exact cut is made here.
	if w := now.Sub(from) + time.Minute; w > 0 {
		req.TerminalWindowSeconds = int64(w / time.Second)
	}
	users, names := splitList(c.String("user")), splitList(c.String("name"))
	all, err := r.listAllocations(c, req)
	if err != nil {
		return err
	}
	var allocs []*latticev1.Allocation
	for _, a := range all {
		if matchStates(states, a) && activeBetween(a, from, to) &&
			(len(users) == 0 || slices.Contains(users, userOf(a))) &&
			(len(names) == 0 || slices.Contains(names, a.GetRequest().GetName())) {
			allocs = append(allocs, a)
		}
	}
	slices.SortStableFunc(allocs, func(x, y *latticev1.Allocation) int { return cmp.Compare(x.GetId(), y.GetId()) })
	views := make([]historyView, 0, len(allocs))
	for _, a := range allocs {
		views = append(views, historyView{allocationView: allocationOf(a, false), User: userOf(a), ElapsedSeconds: int64(r.runDuration(a) / time.Second),
			usageView: usageViewOf(a.GetUsage())})
	}
	return r.emitAs(format, views, func(w io.Writer, wide bool) error {
		if cols != nil {
			r.formatRows(w, cols, allocs)
			return nil
		}
		if wide {
			row(w, "ID", "NAME", "USER", "TENANT", "VCLUSTER", "STATE", "ELAPSED", "TIME_LIMIT", "SUBMIT", "START", "END", "EXIT", "REASON", "NODES", "NODELIST")
		} else {
			row(w, "ID", "NAME", "USER", "STATE", "ELAPSED", "START", "END", "EXIT", "REASON", "NODES", "NODELIST")
		}
		for _, a := range allocs {
			if wide {
				row(w, displayID(a), a.GetRequest().GetName(), userOf(a), a.GetRequest().GetTenant(), orDash(a.GetRequest().GetVcluster()),
					a.GetState(), r.runTime(a), model.FormatWalltime(secondsDur(a.GetRequest().GetWalltimeSeconds())),
					r.tableTime(a.GetSubmitTimeUnixMs()), r.tableTime(a.GetStartTimeUnixMs()), r.tableTime(a.GetEndTimeUnixMs()),
					exitText(a), orDash(a.GetReason()), nodeCount(a), orDash(hostlist(a.GetNodes())))
			} else {
				row(w, displayID(a), truncate(a.GetRequest().GetName(), 20), userOf(a), a.GetState(), r.runTime(a),
					r.tableTime(a.GetStartTimeUnixMs()), r.tableTime(a.GetEndTimeUnixMs()), exitText(a), orDash(a.GetReason()),
					nodeCount(a), orDash(hostlist(a.GetNodes())))
			}
		}
		return nil
	})
}

// activeBetween reports whether a existed in [from, to]: it was submitted
// before to and had not ended before from (sacct's window).
func activeBetween(a *latticev1.Allocation, from, to time.Time) bool {
	if ms := a.GetSubmitTimeUnixMs(); ms != 0 && time.UnixMilli(ms).After(to) {
		return false
	}
	if ms := a.GetEndTimeUnixMs(); ms != 0 && time.UnixMilli(ms).Before(from) {
		return false
	}
	return true
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
