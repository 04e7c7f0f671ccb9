package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

var allocIDPattern = lazyRegexp(`^[0-9]+(_[0-9]+)?$`)

// checkIDs validates allocation ids as users type them: 12 or 12_3.
func checkIDs(ids []string) error {
	for _, id := range ids {
		if !allocIDPattern().MatchString(id) {
			return &model.FieldError{Field: "id", Value: id, Allowed: "an allocation id such as 12, or an array task such as 12_3"}
		}
	}
	return nil
}

func getAllocation(ctx context.Context, cn *conn, id string) (*latticev1.Allocation, error) {
	var a *latticev1.Allocation
	err := cn.unary(ctx, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		var err error
		a, err = latticev1.NewAllocationServiceClient(cc).Get(ctx, &latticev1.GetAllocationRequest{Id: id})
		return err
	})
	return a, err
}

func getAllocationID(ctx context.Context, cn *conn, display string) (uint64, error) {
	a, err := getAllocation(ctx, cn, display)
	if err != nil {
		return 0, fmt.Errorf("looking up %s: %w", display, err)
	}
	return a.GetId(), nil
}

func (r *runner) statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "list allocations (squeue-like)",
		ArgsUsage: "[ID...]",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "state", Aliases: []string{"t", "states"}, Usage: "only these states: STATE[,STATE...] (" + allowedStates + ")"},
			&cli.StringFlag{Name: "vcluster", Aliases: []string{"p", "partition"}, Usage: "only this vCluster"},
			&cli.StringFlag{Name: "user", Aliases: []string{"u"}, Usage: "only allocations submitted by USER[,USER...] (\"\": you)"},
			&cli.StringFlag{Name: "name", Usage: "only allocations named NAME[,NAME...]"},
			&cli.BoolFlag{Name: "mine", Aliases: []string{"me"}, Usage: "only your tenant's allocations (--tenant, LATTICE_TENANT or your default tenant)"},
			&cli.BoolFlag{Name: "start", Usage: "pending allocations with their expected start from the backfill plan (squeue --start)"},
			&cli.StringFlag{Name: "format", Aliases: []string{"O", "Format"}, Usage: "the table's columns: squeue letters \"%i %j %u %T %M %D %R\" (%.8i right-justifies in 8) or names \"id,name,user,state,elapsed,nodes,reason\""},
			&cli.StringFlag{Name: "ended-within", Usage: "only show ended allocations that ended within this duration, e.g. 1h (default: all the server retains)"},
		}, listingFlags()...),
		Action: r.status,
	}
}

func (r *runner) status(c *cli.Context) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	ids := c.Args().Slice()
	if err := checkIDs(ids); err != nil {
		return err
	}
	req := &latticev1.ListAllocationsRequest{Ids: ids, Vcluster: c.String("vcluster")}
	var states []stateFilter
	if s := c.String("state"); s != "" {
		if states, err = parseStateFilters(s); err != nil {
			return err
		}
		req.States = serverStates(states)
	} else if c.Bool("start") {
		states = []stateFilter{{state: model.StatePending}}
		req.States = []string{string(model.StatePending)}
	}
	var cols []column
	if f := c.String("format"); f != "" {
		if cols, err = parseFormat(f); err != nil {
			return err
		}
	}
	if v, ok := explicit(c, "tenant"); ok {
		req.Tenant = v
	} else if c.Bool("mine") {
		req.Tenant, req.Mine = r.tenant(c), true
	}
	if s := c.String("ended-within"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return &model.FieldError{Field: "ended-within", Value: s, Allowed: "a duration > 0 such as 30m or 24h"}
		}
		req.TerminalWindowSeconds = int64(d / time.Second)
	}
	users, names := splitList(c.String("user")), splitList(c.String("name"))
	if c.IsSet("user") && len(users) == 0 {
		// -u "" (squeue -u "$USER" where USER is unset): the caller.
		users = []string{r.callerName(c)}
	}
	all, err := r.listAllocations(c, req)
	if err != nil {
		return err
	}
	var allocs []*latticev1.Allocation
	for _, a := range all {
		if matchStates(states, a) && (len(users) == 0 || slices.Contains(users, userOf(a))) &&
			(len(names) == 0 || slices.Contains(names, a.GetRequest().GetName())) {
			allocs = append(allocs, a)
		}
	}
	views := make([]allocationView, 0, len(allocs))
	for _, a := range allocs {
		v := allocationOf(a, false)
		if c.Bool("start") && model.AllocState(a.GetState()) == model.StatePending {
			v.ExpectedStart = rfc3339(a.GetExplanation().GetExpectedStartUnixMs())
		}
		views = append(views, v)
	}
	return r.emitAs(format, views, func(w io.Writer, wide bool) error {
		switch {
		case cols != nil:
			r.formatRows(w, cols, allocs)
			return nil
		case c.Bool("start"):
			// squeue --start's columns, in its order.
			row(w, "ID", "VCLUSTER", "NAME", "USER", "ST", "START_TIME", "NODES", "SCHEDNODES", "NODELIST(REASON)")
			for _, a := range allocs {
				row(w, displayID(a), orDash(a.GetRequest().GetVcluster()), truncate(a.GetRequest().GetName(), 20), userOf(a),
					shortState(a), r.startText(a), nodeCount(a), orDash(hostlist(a.GetExplanation().GetNodes())), nodelistReason(a))
			}
			return nil
		case wide:
			row(w, "ID", "NAME", "TENANT", "PROJECT", "VCLUSTER", "STATE", "PRIO", "TIME", "TIME_LIMIT", "SUBMIT_TIME", "START_TIME", "EXIT", "NODES", "NODELIST(REASON)")
		default:
			row(w, "ID", "NAME", "TENANT", "VCLUSTER", "STATE", "TIME", "NODES", "NODELIST(REASON)")
		}
		for _, a := range allocs {
			v := allocationOf(a, false)
			if wide {
				row(w, v.DisplayID, v.Name, v.Tenant, orDash(v.Project), orDash(v.VCluster), v.State, v.PriorityClass,
					r.runTime(a), model.FormatWalltime(secondsDur(v.WalltimeSeconds)),
					r.tableTime(a.GetSubmitTimeUnixMs()), r.tableTime(a.GetStartTimeUnixMs()), exitText(a), v.NodeCount, nodelistReason(a))
			} else {
				row(w, v.DisplayID, truncate(v.Name, 20), v.Tenant, orDash(v.VCluster), v.State, r.runTime(a), v.NodeCount, nodelistReason(a))
			}
		}
		return nil
	})
}

// listAllocations lists allocations page by page: a page stays under the
// message limit however many allocations the state holds.
func (r *runner) listAllocations(c *cli.Context, req *latticev1.ListAllocationsRequest) ([]*latticev1.Allocation, error) {
	cn, err := r.connect(c)
	if err != nil {
		return nil, err
	}
	var allocs []*latticev1.Allocation
	for {
		var resp *latticev1.ListAllocationsResponse
		err = cn.unary(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
			resp, err = latticev1.NewAllocationServiceClient(cc).List(ctx, req)
			return err
		})
		if err != nil {
			return nil, err
		}
		allocs = append(allocs, resp.GetAllocations()...)
		if resp.GetNextPageToken() == "" {
			return allocs, nil
		}
		req.PageToken = resp.GetNextPageToken()
	}
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// runTime is squeue's TIME: how long the allocation has run (so far).
func (r *runner) runTime(a *latticev1.Allocation) string { return elapsed(r.runDuration(a)) }

// runDuration is how long a ran: end − start once it ended, now − start
// while it runs, nothing before it started. A pending allocation that ran
// before (requeued) counts nothing until it starts again.
func (r *runner) runDuration(a *latticev1.Allocation) time.Duration {
	start := a.GetStartTimeUnixMs()
	if start == 0 || model.AllocState(a.GetState()) == model.StatePending {
		return 0
	}
	end := a.GetEndTimeUnixMs()
	if end == 0 {
		end = r.Now().UnixMilli()
	}
	if end < start {
		return 0
	}
	return time.Duration(end-start) * time.Millisecond
}

// nodelistReason is squeue's NODELIST(REASON): the nodes held or last
// held, or "(Reason)" while there are none.
func nodelistReason(a *latticev1.Allocation) string {
	if n := allocNodes(a); len(n) > 0 && model.AllocState(a.GetState()) != model.StatePending {
		return hostlist(n)
	}
	reason := a.GetReason()
	if reason == "" {
		reason = "None"
	}
	return "(" + reason + ")"
}

func (r *runner) showCommand() *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "everything about one allocation, including why it waits",
		ArgsUsage: "ID",
		Action: func(c *cli.Context) error {
			format, cn, err := r.oneID(c)
			if err != nil {
				return err
			}
			a, err := getAllocation(c.Context, cn, c.Args().First())
			if err != nil {
				return err
			}
			v := allocationOf(a, true)
			return r.emitAs(format, v, func(w io.Writer, wide bool) error { return r.showTable(w, a, v) })
		},
	}
}

func (r *runner) showTable(w io.Writer, a *latticev1.Allocation, v allocationView) error {
	req := a.GetRequest()
	id := v.DisplayID
	if v.ArrayJobID != nil {
		id = fmt.Sprintf("%s (allocation %d, task %d of array %d)", v.DisplayID, v.ID, *v.ArrayIndex, *v.ArrayJobID)
	}
	kv(w, "ID", id)
	kv(w, "Name", v.Name)
	kv(w, "Tenant", v.Tenant)
	kv(w, "Project", orDash(v.Project))
	kv(w, "vCluster", orDash(v.VCluster))
	kv(w, "State", v.State)
	kv(w, "Reason", orDash(v.Reason))
	if d := a.GetReasonDetail(); d != "" {
		kv(w, "Reason detail", d)
	}
	kv(w, "Nodes", fmt.Sprintf("%s (%d; asked %s)", orDash(hostlist(v.Nodes)), len(v.Nodes), nodeRange(int(v.NodesMin), int(v.NodesMax))))
	kv(w, "Walltime", model.FormatWalltime(secondsDur(v.WalltimeSeconds)))
	kv(w, "Run time", r.runTime(a))
	kv(w, "Priority class", v.PriorityClass)
	kv(w, "Checkpoint", v.Checkpoint)
	kv(w, "Submit time", r.tableTime(a.GetSubmitTimeUnixMs()))
	kv(w, "Eligible time", r.tableTime(a.GetEligibleTimeUnixMs()))
	kv(w, "Start time", r.tableTime(a.GetStartTimeUnixMs()))
	kv(w, "End time", r.tableTime(a.GetEndTimeUnixMs()))
	if v.ExitCode != nil {
		kv(w, "Exit code", *v.ExitCode)
	}
	if v.DAGID != nil {
		kv(w, "DAG", *v.DAGID)
	}
	var deps []string
	for _, d := range req.GetDependsOn() {
		s := d.GetCondition()
		for _, id := range d.GetIds() {
			s += fmt.Sprintf(":%d", id)
		}
		deps = append(deps, s)
	}
	if sep := ","; len(deps) > 0 {
		if req.GetDependencyAny() {
			sep = "?" // any one of them
		}
		kv(w, "Depends on", strings.Join(deps, sep))
	}
	if cs := req.GetConstraints(); len(cs) > 0 {
		kv(w, "Constraints", strings.Join(cs, "&"))
	}
	if req.GetGpusPerNode() > 0 || req.GetGpuType() != "" {
		kv(w, "GPUs per node", strings.TrimSpace(fmt.Sprintf("%d %s", req.GetGpusPerNode(), req.GetGpuType())))
	}
	if cmd := req.GetCommand(); len(cmd) > 0 {
		kv(w, "Command", shellJoin(cmd))
	} else {
		n := len(req.GetScript())
		if b := req.GetScriptBytes(); len(b) > 0 {
			n = len(b)
		}
		if n > 0 {
			kv(w, "Script", fmt.Sprintf("%d bytes", n))
		} else {
			// Ended allocations keep no script (the state keeps it for live work only).
			kv(w, "Script", "-")
		}
	}
	kv(w, "Work dir", orDash(req.GetWorkDir()))
	kv(w, "Output", orDash(req.GetStdout()))
	kv(w, "Error", orDash(req.GetStderr()))
	if v.RequeueCount > 0 || v.CheckpointCount > 0 {
		kv(w, "Requeues", v.RequeueCount)
		kv(w, "Checkpoints", v.CheckpointCount)
	}
	if ms := a.GetLastCheckpointUnixMs(); ms != 0 {
		kv(w, "Last checkpoint", r.tableTime(ms))
	}
	if v.CheckpointReason != "" {
		kv(w, "Checkpointing", fmt.Sprintf("%s, until %s", v.CheckpointReason, r.tableTime(a.GetCheckpointDeadlineUnixMs())))
	}
	if p := v.Preemption; p != nil {
		kv(w, "Preempted", preemptionText(p, r.tableTime(a.GetPreemption().GetTimeUnixMs())))
	}
	if steps := a.GetSteps(); len(steps) > 0 {
		fmt.Fprintln(w)
		row(w, "STEP", "NODES", "TASKS", "STATE", "EXIT", "TOTALCPU", "MAXRSS", "COMMAND")
		for _, st := range steps {
			exit := "-"
			if st.GetHasExitCode() {
				exit = strconv.Itoa(int(st.GetExitCode()))
			}
			u := st.GetUsage()
			row(w, strconv.Itoa(int(st.GetId())), hostlist(st.GetNodes()), strconv.Itoa(int(st.GetTasks())), st.GetState(), exit,
				orDash(cpuTime(u.GetUserCpuSeconds()+u.GetSystemCpuSeconds(), u != nil)), orDash(rssText(u)), shellJoin(st.GetCommand()))
		}
	}
	if len(v.History) > 0 {
		fmt.Fprintln(w)
		row(w, "TIME", "STATE", "REASON")
		for _, t := range a.GetHistory() {
			row(w, r.tableTime(t.GetTimeUnixMs()), t.GetState(), orDash(t.GetReason()))
		}
	}
	if e := a.GetExplanation(); e != nil {
		fmt.Fprintln(w)
		r.explanationTable(w, e)
	}
	return nil
}

func (r *runner) explainCommand() *cli.Command {
	return &cli.Command{
		Name:      "explain",
		Usage:     "why an allocation runs where it runs, or why it waits: its score factor by factor (no ID: every pending allocation, like sprio; a service's NAME: why it cannot grow)",
		ArgsUsage: "[ID|SERVICE]",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "user", Aliases: []string{"u"}, Usage: "without ID: only allocations submitted by USER[,USER...]"},
			&cli.StringFlag{Name: "vcluster", Aliases: []string{"p", "partition"}, Usage: "without ID: only this vCluster"},
		}, listingFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return r.explainPending(c)
			}
			if isServiceName(c.Args().First()) {
				return r.serviceExplain(c) // service.go
			}
			format, cn, err := r.oneID(c)
			if err != nil {
				return err
			}
			var e *latticev1.Explanation
			err = cn.unary(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
				e, err = latticev1.NewAllocationServiceClient(cc).Explain(ctx, &latticev1.ExplainRequest{Id: c.Args().First()})
				return err
			})
			if err != nil {
				return err
			}
			return r.emitAs(format, explanationOf(e), func(w io.Writer, _ bool) error {
				r.explanationTable(w, e)
				return nil
			})
		},
	}
}

func (r *runner) explanationTable(w io.Writer, e *latticev1.Explanation) {
	head := fmt.Sprintf("Allocation %s: %s", e.GetId(), orDash(e.GetState()))
	if e.GetReason() != "" {
		head += " (" + e.GetReason() + ")"
	}
	fmt.Fprintln(w, head)
	if m := e.GetMessage(); m != "" {
		fmt.Fprintln(w, m)
	}
	// Scores exist for allocations the scheduler considered while pending.
	if len(e.GetFactors()) > 0 || model.AllocState(e.GetState()) == model.StatePending {
		kv(w, "Score", fmt.Sprintf("%.3f", e.GetScore()))
		kv(w, "Weights profile", orDash(e.GetWeightsProfile()))
		if p := e.GetQueuePosition(); p > 0 {
			kv(w, "Queue position", p)
		}
		if ms := e.GetExpectedStartUnixMs(); ms != 0 {
			kv(w, "Expected start", r.tableTime(ms))
		} else if model.AllocState(e.GetState()) == model.StatePending {
			kv(w, "Expected start", "unknown")
		}
	}
	if v := e.GetReservation(); v != "" {
		kv(w, "Reservation", v)
	}
	if ms := e.GetStartUnixMs(); ms != 0 {
		kv(w, "Started", r.tableTime(ms))
	}
	if wt := e.GetWalltimeSeconds(); wt > 0 {
		kv(w, "Walltime", model.FormatWalltime(secondsDur(wt)))
		kv(w, "Walltime left", model.FormatWalltime(secondsDur(e.GetWalltimeLeftSeconds())))
	}
	if n := e.GetNodes(); len(n) > 0 {
		label := "Nodes"
		if model.AllocState(e.GetState()) == model.StatePending {
			label = "Planned nodes"
		}
		kv(w, label, hostlist(n))
	}
	if ms := e.GetComputedUnixMs(); ms != 0 {
		kv(w, "Computed", r.tableTime(ms))
	}
	if fs := e.GetFactors(); len(fs) > 0 {
		fmt.Fprintln(w)
		row(w, "FACTOR", "TITLE", "VALUE", "WEIGHT", "CONTRIBUTION")
		total := 0.0
		for _, f := range fs {
			row(w, f.GetName(), orDash(f.GetTitle()), fmt.Sprintf("%.3f", f.GetValue()), fmt.Sprintf("%.3f", f.GetWeight()),
				fmt.Sprintf("%.3f", f.GetContribution()))
			total += f.GetContribution()
		}
		row(w, "total", "", "", "", fmt.Sprintf("%.3f", total))
	}
	if fs := e.GetFiltered(); len(fs) > 0 {
		fmt.Fprintln(w)
		row(w, "FILTER", "NODES_REMOVED")
		for _, f := range fs {
			row(w, f.GetFilter(), f.GetRemoved())
		}
	}
}

func (r *runner) cancelCommand() *cli.Command {
	return &cli.Command{
		Name:      "cancel",
		Usage:     "cancel allocations (running work gets SIGTERM, a grace period, then SIGKILL), by id or by filter (scancel)",
		ArgsUsage: "[ID...] (12, 12_3, 12_[1-3,7]) [-u USER] [--state S] [--name N] [--vcluster V] [--signal SIG]",
		Flags:     cancelFlags(),
		Action:    r.cancel,
	}
}

// cancelView is one line of `cancel -o json`.
type cancelView struct {
	ID        string `json:"id"`
	Cancelled bool   `json:"cancelled"`
	Error     string `json:"error"`
}

func (r *runner) cancel(c *cli.Context) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	if _, err := expandIDs(c.Args().Slice()); err != nil {
		return err
	}
	if sig := c.String("signal"); sig != "" {
		if _, err := model.ParseSignal(sig); err != nil {
			return err
		}
	}
	cn, err := r.connect(c)
	if err != nil {
		return err
	}
	ids, err := r.cancelSelection(c, cn)
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		fmt.Fprintln(r.Stderr, "nothing matches: no allocation cancelled")
		return r.emitAs(format, []cancelView{}, func(io.Writer, bool) error { return nil })
	}
	if sig := c.String("signal"); sig != "" { // scancel --signal: signal, do not cancel
		var resp *latticev1.JobControlResponse
		err := cn.unary(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
			var err error
			resp, err = latticev1.NewAllocationServiceClient(cc).Signal(ctx, &latticev1.SignalRequest{Ids: ids, Signal: sig})
			return err
		})
		if err != nil {
			return err
		}
		return r.reportControl(format, "signalled", resp.GetResults())
	}
	call := func(ids []string, reqID string) (*latticev1.CancelResponse, error) {
		var resp *latticev1.CancelResponse
		err := cn.unary(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
			var err error
			resp, err = latticev1.NewAllocationServiceClient(cc).Cancel(ctx, &latticev1.CancelRequest{Ids: ids, ClientRequestId: reqID})
			return err
		})
		return resp, err
	}
	var results []cancelView
	resp, err := call(ids, r.reqID())
	switch {
	case err == nil:
		for _, res := range resp.GetResults() {
			results = append(results, cancelView{ID: res.GetId(), Cancelled: res.GetCancelled(), Error: res.GetError()})
		}
	case rpcCode(err) == codes.NotFound && len(ids) > 1:
		// The server refused the whole batch for one unknown id: cancel
		// one by one so the others still go, each with its own request id.
		for i, id := range ids {
			resp, err := call([]string{id}, fmt.Sprintf("%s-%d", r.reqID(), i))
			switch {
			case err == nil && len(resp.GetResults()) > 0:
				res := resp.GetResults()[0]
				results = append(results, cancelView{ID: res.GetId(), Cancelled: res.GetCancelled(), Error: res.GetError()})
			case err == nil:
				results = append(results, cancelView{ID: id, Cancelled: true})
			case rpcCode(err) == codes.NotFound || rpcCode(err) == codes.FailedPrecondition:
				results = append(results, cancelView{ID: id, Error: err.Error()})
			default:
				return err
			}
		}
	default:
		return err
	}
	notFound, failed := 0, 0
	for _, res := range results {
		switch {
		case res.Error == "":
		case isNotFoundText(res.Error):
			notFound++
		default:
			failed++
		}
	}
	if err := r.emitAs(format, nonNil(results), func(io.Writer, bool) error {
		for _, res := range results {
			if res.Error == "" {
				fmt.Fprintf(r.Stderr, "cancelled %s\n", res.ID)
			} else {
				fmt.Fprintf(r.Stderr, "latticectl: cancel %s: %s\n", res.ID, res.Error)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	return perIDExit(notFound, failed, len(results), "cancelled")
}

func isNotFoundText(s string) bool {
	s = strings.ToLower(s)
	return strings.Contains(s, "not found") || strings.Contains(s, "unknown") || strings.Contains(s, "no such")
}

func (r *runner) logsCommand() *cli.Command {
	return &cli.Command{
		Name:      "logs",
		Usage:     "print an allocation's output: its standard output on stdout and its standard error on stderr",
		ArgsUsage: "ID",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "stdout", Usage: "print only its standard output"},
			&cli.BoolFlag{Name: "stderr", Usage: "print only its standard error (on stdout)"},
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing until the allocation ends"},
		},
		Action: func(c *cli.Context) error {
			if _, err := r.format(c); err != nil {
				return err
			}
			if err := needArgs(c, 1, 1, "ID [--stdout|--stderr] [-f]"); err != nil {
				return err
			}
			if err := checkIDs(c.Args().Slice()); err != nil {
				return err
			}
			if c.Bool("stdout") && c.Bool("stderr") {
				return usageErrorf("--stdout and --stderr pick one stream; without either, logs prints both")
			}
			cn, err := r.connect(c)
			if err != nil {
				return err
			}
			id, follow := c.Args().First(), c.Bool("follow")
			if c.Bool("stdout") || c.Bool("stderr") {
				return r.logs(c.Context, cn, r.Stdout, &latticev1.LogsRequest{Id: id, Stderr: c.Bool("stderr"), Follow: follow})
			}
			a, err := getAllocation(c.Context, cn, id)
			if err != nil {
				return err
			}
			stdout := &latticev1.LogsRequest{Id: id, Follow: follow}
			if oneFile(a.GetRequest()) {
				return r.logs(c.Context, cn, r.Stdout, stdout) // slurm-%j.out: both streams, interleaved as written
			}
			stderr := &latticev1.LogsRequest{Id: id, Stderr: true, Follow: follow}
			if !follow {
				if err := r.logs(c.Context, cn, r.Stdout, stdout); err != nil {
					return err
				}
				return r.logs(c.Context, cn, r.Stderr, stderr)
			}
			// Both followed at once; the first to fail stops the other.
			ctx, cancel := context.WithCancel(c.Context)
			defer cancel()
			errc := make(chan error, 2)
			go func() { errc <- r.logs(ctx, cn, r.Stderr, stderr) }()
			go func() { errc <- r.logs(ctx, cn, r.Stdout, stdout) }()
			var first error
			for range 2 {
				if err := <-errc; err != nil && first == nil && (c.Context.Err() != nil || !errors.Is(err, context.Canceled)) {
					first = err
					cancel()
				}
			}
			return first
		},
	}
}

// oneFile reports whether an allocation's standard output and error go
// to the same file: -o without -e (Slurm's rule, and the slurm-%j.out
// default), or both naming the same pattern.
func oneFile(req *latticev1.AllocationRequest) bool {
	out, errf := req.GetStdout(), req.GetStderr()
	return out != "" && (errf == "" || errf == out)
}

// logs streams an allocation's output to stdout. When the stream breaks
// (leader change, member down) it resumes from the last offset received,
// on any server, so nothing is printed twice.
func (r *runner) logs(ctx context.Context, cn *conn, out io.Writer, req *latticev1.LogsRequest) error {
	progress := false
	for {
		err := cn.stream(ctx, func(ctx context.Context, cc grpc.ClientConnInterface) error {
			st, err := latticev1.NewAllocationServiceClient(cc).Logs(ctx, req)
			if err != nil {
				return err
			}
			for {
				ch, err := st.Recv()
				if errors.Is(err, io.EOF) {
					return nil
				}
				if err != nil {
					return err
				}
				if d := ch.GetData(); len(d) > 0 {
					if _, err := out.Write(d); err != nil {
						return withCode(ExitError, err)
					}
					progress = true
					req.Offset += int64(len(d))
				}
				if o := ch.GetOffset(); o > 0 {
					req.Offset = o
				}
				if ch.GetEof() {
					return nil
				}
			}
		})
		if err != nil && progress && ExitCode(err) == ExitUnavailable {
			progress = false
			continue
		}
		return err
	}
}

// perIDExit is the exit of a command that acts on allocations one by one
// (cancel, hold, release, requeue, signal): 3 when some were not found, 1
// when some could not be changed (the others still were), else 0.
func perIDExit(notFound, failed, total int, done string) error {
	switch {
	case notFound > 0:
		return &exitError{code: ExitNotFound, err: fmt.Errorf("%d of %d allocations not found", notFound, total)}
	case failed > 0:
		return fmt.Errorf("%d of %d allocations could not be %s", failed, total, done)
	}
	return nil
}
