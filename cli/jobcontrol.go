package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"google.golang.org/grpc"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// Job control (scontrol hold/release/requeue/update, scancel --signal) and
// the site configuration (QOS table, partitions).

var arrayRangePattern = lazyRegexp(`^([0-9]+)_\[([0-9,\-]+)\]$`)

// expandIDs accepts ids as users type them — 12, 12_3, and Slurm's array
// ranges 12_[1-3,7] — and returns them one task per entry.
func expandIDs(ids []string) ([]string, error) {
	var out []string
	for _, id := range ids {
		m := arrayRangePattern().FindStringSubmatch(id)
		if m == nil {
			if err := checkIDs([]string{id}); err != nil {
				return nil, &model.FieldError{Field: "id", Value: id, Allowed: "an allocation id such as 12, an array task such as 12_3, or a range of tasks such as 12_[1-3,7]"}
			}
			out = append(out, id)
			continue
		}
		for _, part := range strings.Split(m[2], ",") {
			lo, hi, isRange := strings.Cut(part, "-")
			a, err1 := strconv.Atoi(lo)
			b := a
			var err2 error
			if isRange {
				b, err2 = strconv.Atoi(hi)
			}
			if err1 != nil || err2 != nil || b < a || b-a >= model.MaxArrayTasks {
				return nil, &model.FieldError{Field: "id", Value: id, Allowed: "an array range such as 12_[1-3,7] with each START <= END"}
			}
			for i := a; i <= b; i++ {
				out = append(out, m[1]+"_"+strconv.Itoa(i))
			}
		}
	}
	return out, nil
}

// controlView is one line of a job-control command's -o json.
type controlView struct {
	ID    string `json:"id"`
	OK    bool   `json:"ok"`
	Error string `json:"error"`
}

func (r *runner) jobControlCommands() []*cli.Command {
	simple := func(name, usage, done string, call func(latticev1.AllocationServiceClient) func(context.Context, *latticev1.JobControlRequest, ...grpc.CallOption) (*latticev1.JobControlResponse, error), flags ...cli.Flag) *cli.Command {
		return &cli.Command{
			Name: name, Usage: usage, ArgsUsage: "ID...  (12, 12_3, 12_[1-3])", Flags: flags,
			Action: func(c *cli.Context) error {
				return r.control(c, done, func(ctx context.Context, cc grpc.ClientConnInterface, ids []string, reqID string) (*latticev1.JobControlResponse, error) {
					return call(latticev1.NewAllocationServiceClient(cc))(ctx, &latticev1.JobControlRequest{Ids: ids, ClientRequestId: reqID,
						UserHold: c.Bool("user"), Hold: c.Bool("hold")})
				})
			},
		}
	}
	return []*cli.Command{
		simple("hold", "hold pending allocations (scontrol hold): they wait, JobHeldUser (JobHeldAdmin when an admin holds), until released", "held",
			func(c latticev1.AllocationServiceClient) func(context.Context, *latticev1.JobControlRequest, ...grpc.CallOption) (*latticev1.JobControlResponse, error) {
				return c.Hold
			}, &cli.BoolFlag{Name: "user", Usage: "admins: a user hold (scontrol uhold), which the owner may release"}),
		simple("release", "release held allocations (scontrol release); only an admin releases an admin's hold", "released",
			func(c latticev1.AllocationServiceClient) func(context.Context, *latticev1.JobControlRequest, ...grpc.CallOption) (*latticev1.JobControlResponse, error) {
				return c.Release
			}),
		simple("requeue", "send allocations back to the queue (scontrol requeue): running ones are stopped (SIGTERM, grace, SIGKILL) first", "requeued",
			func(c latticev1.AllocationServiceClient) func(context.Context, *latticev1.JobControlRequest, ...grpc.CallOption) (*latticev1.JobControlResponse, error) {
				return c.Requeue
			}, &cli.BoolFlag{Name: "hold", Aliases: []string{"H"}, Usage: "requeue them held (scontrol requeuehold)"},
			&cli.BoolFlag{Name: "user", Usage: "admins: with --hold, a user hold"}),
		{
			Name:      "signal",
			Usage:     "send a signal to running allocations' processes (scancel --signal)",
			ArgsUsage: "ID... SIG  (or --signal SIG ID...)",
			Flags:     []cli.Flag{&cli.StringFlag{Name: "signal", Aliases: []string{"s"}, Usage: "the signal: a name (USR1, SIGTERM) or number"}},
			Action: func(c *cli.Context) error {
				args := c.Args().Slice()
				sig := c.String("signal")
				if sig == "" && len(args) >= 2 {
					sig, args = args[len(args)-1], args[:len(args)-1]
				}
				if sig == "" || len(args) == 0 {
					return usageErrorf("signal needs allocation ids and a signal, e.g. latticectl signal 12 USR1")
				}
				if _, err := model.ParseSignal(sig); err != nil {
					return err
				}
				return r.controlIDs(c, args, "signalled", func(ctx context.Context, cc grpc.ClientConnInterface, ids []string, _ string) (*latticev1.JobControlResponse, error) {
					return latticev1.NewAllocationServiceClient(cc).Signal(ctx, &latticev1.SignalRequest{Ids: ids, Signal: sig})
				})
			},
		},
		r.updateCommand(),
		r.qosCommand(),
		r.partitionCommand(),
	}
}

type controlCall func(ctx context.Context, cc grpc.ClientConnInterface, ids []string, reqID string) (*latticev1.JobControlResponse, error)

func (r *runner) control(c *cli.Context, done string, call controlCall) error {
	if err := needArgs(c, 1, -1, "ID..."); err != nil {
		return err
	}
	return r.controlIDs(c, c.Args().Slice(), done, call)
}

// controlIDs runs a job-control call and reports each id: on stderr in a
// table, as [{"id","ok","error"}] in JSON. Exit 3 when an id is unknown, 1
// when one could not be changed.
func (r *runner) controlIDs(c *cli.Context, args []string, done string, call controlCall) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	ids, err := expandIDs(args)
	if err != nil {
		return err
	}
	cn, err := r.connect(c)
	if err != nil {
		return err
	}
	var resp *latticev1.JobControlResponse
	reqID := r.reqID()
	err = cn.unary(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		var err error
		resp, err = call(ctx, cc, ids, reqID)
		return err
	})
	if err != nil {
		return err
	}
	return r.reportControl(format, done, resp.GetResults())
}

func (r *runner) reportControl(format, done string, results []*latticev1.JobControlResult) error {
	views := make([]controlView, 0, len(results))
	notFound, failed := 0, 0
	for _, res := range results {
		views = append(views, controlView{ID: res.GetId(), OK: res.GetOk(), Error: res.GetError()})
		switch {
		case res.GetOk():
		case isNotFoundText(res.GetError()):
			notFound++
		default:
			failed++
		}
	}
	if err := r.emitAs(format, views, func(io.Writer, bool) error {
		for _, v := range views {
			if v.OK {
				fmt.Fprintf(r.Stderr, "%s %s\n", done, v.ID)
			} else {
				fmt.Fprintf(r.Stderr, "latticectl: %s: %s\n", v.ID, v.Error)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	return perIDExit(notFound, failed, len(results), done)
}

func (r *runner) updateCommand() *cli.Command {
	return &cli.Command{
		Name:      "update",
		Usage:     "change a pending allocation (scontrol update); a running one only its name and a shorter time limit (admins may extend it)",
		ArgsUsage: "ID [--time T] [--nodes N|MIN-MAX] [--priority-class C] [--qos Q] [--vcluster V] [--name N] [--begin B]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "time", Aliases: []string{"t", "walltime"}, Usage: "new time limit: MM, HH:MM:SS, D-HH:MM, 90m, ..."},
			&cli.StringFlag{Name: "nodes", Aliases: []string{"N"}, Usage: "new node count N or MIN-MAX"},
			&cli.StringFlag{Name: "priority-class", Usage: "new priority class 0..10 (up to your ceiling)"},
			&cli.StringFlag{Name: "qos", Aliases: []string{"q"}, Usage: "new QOS (its priority class)"},
			&cli.StringFlag{Name: "vcluster", Aliases: []string{"p", "partition"}, Usage: "move it to another vCluster or partition"},
			&cli.StringFlag{Name: "name", Aliases: []string{"J", "job-name"}, Usage: "new name"},
			&cli.StringFlag{Name: "begin", Aliases: []string{"b"}, Usage: "new begin time (now = at once); sbatch --begin forms"},
		},
		Action: r.update,
	}
}

func (r *runner) update(c *cli.Context) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	if err := needArgs(c, 1, 1, "ID [--time T] [--nodes N] ..."); err != nil {
		return err
	}
	id := c.Args().First()
	if err := checkIDs([]string{id}); err != nil {
		return err
	}
	req := &latticev1.UpdateAllocationRequest{Id: id, ClientRequestId: r.reqID()}
	if v := c.String("time"); c.IsSet("time") {
		d, err := model.ParseWalltime(v)
		if err != nil {
			return err
		}
		s := int64(d / time.Second)
		req.WalltimeSeconds = &s
	}
	if v := c.String("nodes"); c.IsSet("nodes") {
		lo, hi, err := model.ParseNodeRange(v)
		if err != nil {
			return err
		}
		a, b := int32(lo), int32(hi)
		req.NodesMin, req.NodesMax = &a, &b
	}
	if v := c.String("priority-class"); c.IsSet("priority-class") {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 || n > model.MaxPriorityClass {
			return &model.FieldError{Field: "priority-class", Value: v, Allowed: "an integer 0..10"}
		}
		p := int32(n)
		req.PriorityClass = &p
	}
	if c.IsSet("qos") {
		v := strings.TrimSpace(c.String("qos"))
		req.Qos = &v
	}
	if c.IsSet("vcluster") {
		v := c.String("vcluster")
		req.Vcluster = &v
	}
	if c.IsSet("name") {
		v := c.String("name")
		req.Name = &v
	}
	if v := c.String("begin"); c.IsSet("begin") {
		t, err := model.ParseBeginTime(v, r.Now())
		if err != nil {
			return err
		}
		ms := int64(0)
		if t.After(r.Now()) {
			ms = t.UnixMilli()
		}
		req.BeginUnixMs = &ms
	}
	cn, err := r.connect(c)
	if err != nil {
		return err
	}
	var a *latticev1.Allocation
	err = cn.unary(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		var err error
		a, err = latticev1.NewAllocationServiceClient(cc).Update(ctx, req)
		return err
	})
	if err != nil {
		return err
	}
	v := allocationOf(a, true)
	return r.emitAs(format, v, func(w io.Writer, _ bool) error {
		fmt.Fprintf(r.Stderr, "updated %s\n", a.GetDisplayId())
		return r.showTable(w, a, v)
	})
}

// --- cancel with filters ---------------------------------------------------------------

// cancelFilters is scancel's selection: -u, --state, --name, --vcluster.
type cancelFilters struct {
	user, name, vcluster string
	states               []stateFilter
}

func (f cancelFilters) any() bool {
	return f.user != "" || f.name != "" || f.vcluster != "" || len(f.states) > 0
}

func (f cancelFilters) match(a *latticev1.Allocation) bool {
	if model.AllocState(a.GetState()).Terminal() {
		return false
	}
	switch {
	case f.user != "" && a.GetRequest().GetUser() != f.user:
		return false
	case f.name != "" && a.GetRequest().GetName() != f.name:
		return false
	case f.vcluster != "" && a.GetRequest().GetVcluster() != f.vcluster:
		return false
	case !matchStates(f.states, a):
		return false
	}
	return true
}

func cancelFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "user", Aliases: []string{"u"}, Usage: "only this user's allocations"},
		&cli.StringFlag{Name: "state", Aliases: []string{"t"}, Usage: "only allocations in these states: STATE[,STATE...] (PENDING, RUNNING, ... or PD, R)"},
		&cli.StringFlag{Name: "name", Aliases: []string{"n", "jobname"}, Usage: "only allocations of this name"},
		&cli.StringFlag{Name: "vcluster", Aliases: []string{"p", "partition"}, Usage: "only allocations of this vCluster"},
		&cli.StringFlag{Name: "signal", Aliases: []string{"s"}, Usage: "send this signal to the running ones instead of cancelling (scancel --signal)"},
	}
}

// cancelSelection resolves cancel's arguments and filters to ids: the ids
// given (array ranges expanded), kept when they match the filters; or,
// with filters alone, every unended allocation the caller may see that
// matches them.
func (r *runner) cancelSelection(c *cli.Context, cn *conn) ([]string, error) {
	f := cancelFilters{user: c.String("user"), name: c.String("name"), vcluster: c.String("vcluster")}
	if s := c.String("state"); s != "" {
		states, err := parseStateFilters(s)
		if err != nil {
			return nil, err
		}
		f.states = states
	}
	ids, err := expandIDs(c.Args().Slice())
	if err != nil {
		return nil, err
	}
	if !f.any() {
		if len(ids) == 0 {
			return nil, usageErrorf("cancel needs allocation ids or a filter (-u USER, --state, --name, --vcluster), e.g. latticectl cancel 12 or latticectl cancel -u alice --state PD")
		}
		return ids, nil
	}
	req := &latticev1.ListAllocationsRequest{Ids: ids, Vcluster: f.vcluster}
	var list []*latticev1.Allocation
	for {
		var resp *latticev1.ListAllocationsResponse
		err := cn.unary(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
			var err error
			resp, err = latticev1.NewAllocationServiceClient(cc).List(ctx, req)
			return err
		})
		if err != nil {
			return nil, err
		}
		list = append(list, resp.GetAllocations()...)
		if resp.GetNextPageToken() == "" {
			break
		}
		req.PageToken = resp.GetNextPageToken()
	}
	var out []string
	for _, a := range list {
		if f.match(a) {
			out = append(out, a.GetDisplayId())
		}
	}
	return slices.Compact(out), nil
}

// --- site configuration ----------------------------------------------------------------

// qosView is one QOS of `qos list -o json`.
type qosView struct {
	Name            string `json:"name"`
	PriorityClass   int    `json:"priority_class"`
	MaxWalltimeSecs int64  `json:"max_walltime_seconds"`
	MaxNodes        int    `json:"max_nodes"`
	VCluster        string `json:"vcluster"`
	Description     string `json:"description"`
	// PreemptMode is what preemption does to its work in place of its
	// vCluster's mode; "" = the vCluster's.
	PreemptMode string `json:"preempt_mode"`
}

// partitionView is one partition of `partition list -o json`.
type partitionView struct {
	Name     string `json:"name"`
	VCluster string `json:"vcluster"`
}

func (r *runner) listQOS(c *cli.Context) (*latticev1.ListQOSResponse, error) {
	cn, err := r.connect(c)
	if err != nil {
		return nil, err
	}
	var resp *latticev1.ListQOSResponse
	err = cn.unary(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		var err error
		resp, err = latticev1.NewAllocationServiceClient(cc).ListQOS(ctx, &latticev1.ListQOSRequest{})
		return err
	})
	return resp, err
}

func (r *runner) qosCommand() *cli.Command {
	return &cli.Command{
		Name:  "qos",
		Usage: "the site's QOS table: name → priority class and limits (sacctmgr show qos)",
		Subcommands: []*cli.Command{
			{Name: "list", Usage: "list the QOS table", Flags: listingFlags(), Action: func(c *cli.Context) error {
				format, err := r.format(c)
				if err != nil {
					return err
				}
				resp, err := r.listQOS(c)
				if err != nil {
					return err
				}
				views := []qosView{}
				for _, q := range resp.GetQos() {
					views = append(views, qosView{Name: q.GetName(), PriorityClass: int(q.GetPriorityClass()), MaxWalltimeSecs: q.GetMaxWalltimeSeconds(),
						MaxNodes: int(q.GetMaxNodes()), VCluster: q.GetVcluster(), Description: q.GetDescription(), PreemptMode: q.GetPreemptMode()})
				}
				return r.emitAs(format, views, func(w io.Writer, _ bool) error {
					row(w, "NAME", "PRIORITY_CLASS", "MAX_WALLTIME", "MAX_NODES", "VCLUSTER", "PREEMPT", "DESCRIPTION")
					for _, v := range views {
						wall, nodes := "-", "-"
						if v.MaxWalltimeSecs > 0 {
							wall = model.FormatWalltime(secondsDur(v.MaxWalltimeSecs))
						}
						if v.MaxNodes > 0 {
							nodes = strconv.Itoa(v.MaxNodes)
						}
						row(w, v.Name, v.PriorityClass, wall, nodes, orDash(v.VCluster), orDash(v.PreemptMode), orDash(v.Description))
					}
					return nil
				})
			}},
			{
				Name: "set", Usage: "create or change a QOS (admins)", ArgsUsage: "NAME --priority-class C [--max-walltime T] [--max-nodes N] [--vcluster V] [--preempt-mode M] [--description D]",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "priority-class", Usage: "its priority class 0..10", Required: true},
					&cli.StringFlag{Name: "max-walltime", Usage: "longest time limit of one job (0 = none)"},
					&cli.IntFlag{Name: "max-nodes", Usage: "most nodes of one job (0 = none)"},
					&cli.StringFlag{Name: "vcluster", Usage: "where its jobs run unless they name a vCluster"},
					&cli.StringFlag{Name: "description", Usage: "one line shown by qos list"},
					&cli.StringFlag{Name: "preempt-mode", Usage: "what higher-class work does to this QOS's work, in place of its vCluster's mode: off (never preempted), checkpoint, requeue, cancel or suspend (see vcluster set --preempt-mode)"},
				},
				Action: func(c *cli.Context) error {
					if err := needArgs(c, 1, 1, "NAME --priority-class C"); err != nil {
						return err
					}
					q := &latticev1.QOS{Name: c.Args().First(), Vcluster: c.String("vcluster"), Description: c.String("description"), MaxNodes: int32(c.Int("max-nodes"))}
					n, err := strconv.Atoi(strings.TrimSpace(c.String("priority-class")))
					if err != nil || n < 0 || n > model.MaxPriorityClass {
						return &model.FieldError{Field: "priority-class", Value: c.String("priority-class"), Allowed: "an integer 0..10"}
					}
					q.PriorityClass = int32(n)
					if v := c.String("preempt-mode"); v != "" {
						m, err := model.ParsePreemptMode(v)
						if err != nil {
							return err
						}
						q.PreemptMode = string(m)
					}
					if v := c.String("max-walltime"); v != "" && v != "0" {
						d, err := model.ParseWalltime(v)
						if err != nil {
							return err
						}
						q.MaxWalltimeSeconds = int64(d / time.Second)
					}
					return r.siteChange(c, "qos "+q.Name+" set", func(ctx context.Context, cl latticev1.AllocationServiceClient) error {
						_, err := cl.SetQOS(ctx, &latticev1.SetQOSRequest{Qos: q})
						return err
					})
				},
			},
			{
				Name: "delete", Usage: "delete a QOS (admins)", ArgsUsage: "NAME",
				Action: func(c *cli.Context) error {
					if err := needArgs(c, 1, 1, "NAME"); err != nil {
						return err
					}
					name := c.Args().First()
					return r.siteChange(c, "qos "+name+" deleted", func(ctx context.Context, cl latticev1.AllocationServiceClient) error {
						_, err := cl.SetQOS(ctx, &latticev1.SetQOSRequest{Qos: &latticev1.QOS{Name: name}, Delete: true})
						return err
					})
				},
			},
		},
	}
}

func (r *runner) partitionCommand() *cli.Command {
	return &cli.Command{
		Name:  "partition",
		Usage: "partition names: aliases of vClusters that scripts write as -p/--partition",
		Subcommands: []*cli.Command{
			{Name: "list", Usage: "list partition names and their vClusters", Flags: listingFlags(), Action: func(c *cli.Context) error {
				format, err := r.format(c)
				if err != nil {
					return err
				}
				resp, err := r.listQOS(c)
				if err != nil {
					return err
				}
				views := []partitionView{}
				for _, p := range resp.GetPartitions() {
					views = append(views, partitionView{Name: p.GetName(), VCluster: p.GetVcluster()})
				}
				return r.emitAs(format, views, func(w io.Writer, _ bool) error {
					row(w, "PARTITION", "VCLUSTER")
					for _, v := range views {
						row(w, v.Name, v.VCluster)
					}
					return nil
				})
			}},
			{
				Name: "set", Usage: "map a partition name to a vCluster (admins)", ArgsUsage: "NAME VCLUSTER",
				Action: func(c *cli.Context) error {
					if err := needArgs(c, 2, 2, "NAME VCLUSTER"); err != nil {
						return err
					}
					name, vc := c.Args().Get(0), c.Args().Get(1)
					return r.siteChange(c, "partition "+name+" → "+vc, func(ctx context.Context, cl latticev1.AllocationServiceClient) error {
						_, err := cl.SetPartition(ctx, &latticev1.SetPartitionRequest{Name: name, Vcluster: vc})
						return err
					})
				},
			},
			{
				Name: "delete", Usage: "forget a partition name (admins)", ArgsUsage: "NAME",
				Action: func(c *cli.Context) error {
					if err := needArgs(c, 1, 1, "NAME"); err != nil {
						return err
					}
					name := c.Args().First()
					return r.siteChange(c, "partition "+name+" deleted", func(ctx context.Context, cl latticev1.AllocationServiceClient) error {
						_, err := cl.SetPartition(ctx, &latticev1.SetPartitionRequest{Name: name})
						return err
					})
				},
			},
		},
	}
}

func (r *runner) siteChange(c *cli.Context, done string, call func(context.Context, latticev1.AllocationServiceClient) error) error {
	if _, err := r.format(c); err != nil {
		return err
	}
	cn, err := r.connect(c)
	if err != nil {
		return err
	}
	if err := cn.unary(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		return call(ctx, latticev1.NewAllocationServiceClient(cc))
	}); err != nil {
		return err
	}
	fmt.Fprintln(r.Stderr, done)
	return nil
}
