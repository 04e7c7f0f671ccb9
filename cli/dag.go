package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"
	"google.golang.org/grpc"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/dag"
	"github.com/latticehpc/lattice/model"
)

func (r *runner) dagCommand() *cli.Command {
	return &cli.Command{
		Name:  "dag",
		Usage: "DAG workflows: submit a workflow file, follow it, cancel it",
		Subcommands: []*cli.Command{
			{
				Name:      "submit",
				Usage:     "check a workflow file and submit all its allocations at once",
				ArgsUsage: "FILE",
				Description: "FILE is YAML: dag_id, allocations (name, tenant, project, vcluster, entrypoint or script, nodes, walltime or\n" +
					"walltime_hours, priority_class, checkpoint, array, env, depends_on: [{name, condition}]) and optional edges:\n" +
					"[{from, to, condition}]; conditions success, failure, any, corresponding, mutex (or afterok, afternotok,\n" +
					"afterany, aftercorr, singleton). Nothing is submitted unless the whole file is valid. - reads standard input.",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "dry-run", Usage: "check the file and print its stages in submission order; submit nothing (needs no server)"},
					&cli.BoolFlag{Name: "parsable", Aliases: []string{"parseable"}, Usage: "print only the DAG id"},
				},
				Action: r.dagSubmit,
			},
			{
				Name:      "status",
				Usage:     "a workflow's state and its stages, drawn as a tree (--dot: Graphviz)",
				ArgsUsage: "ID|NAME",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "dot", Usage: "write the graph in Graphviz DOT instead (latticectl dag status ID --dot | dot -Tsvg > dag.svg)"},
				},
				Action: r.dagStatus,
			},
			{
				Name:      "cancel",
				Usage:     "cancel a workflow's allocations that have not ended",
				ArgsUsage: "ID|NAME",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "pending-only", Usage: "cancel only what has not started; running stages finish (their successors are cancelled)"},
				},
				Action: r.dagCancel,
			},
			{
				Name:   "list",
				Usage:  "workflows and their states",
				Flags:  append([]cli.Flag{&cli.BoolFlag{Name: "mine", Usage: "only this tenant's (--tenant / LATTICE_TENANT / your default tenant)"}}, listingFlags()...),
				Action: r.dagList,
			},
		},
	}
}

// dagSubmitView is `dag submit -o json` (CLI.md: dag_id, allocations of
// name and id; the rest are extensions).
type dagSubmitView struct {
	DAGID       uint64         `json:"dag_id"`
	Allocations []dagStageView `json:"allocations"`
	Name        string         `json:"name"`
}

type dagStageView struct {
	Name      string `json:"name"`
	ID        uint64 `json:"id"`
	DisplayID string `json:"display_id"`
	Tasks     int32  `json:"tasks"`
}

// dagDryRunView is `dag submit --dry-run -o json`: the stages in the order
// they would be submitted, resolved.
type dagDryRunView struct {
	Name   string           `json:"name"`
	Stages []dagDryRunStage `json:"stages"`
}

type dagDryRunStage struct {
	dryRunView
	After []dagDependencyView `json:"after"`
}

type dagDependencyView struct {
	Name      string `json:"name"`
	Condition string `json:"condition"`
}

func (r *runner) dagSubmit(c *cli.Context) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	if err := needArgs(c, 1, 1, "FILE"); err != nil {
		return err
	}
	path := c.Args().First()
	data, err := r.readWorkflow(path)
	if err != nil {
		return err
	}
	label := path
	if path == "-" {
		label = "stdin"
	}
	bad := func(err error) error { return withCode(ExitUsage, fmt.Errorf("%s: %w", label, err)) }
	f, err := dag.Parse(data)
	if err != nil {
		return bad(err)
	}
	cwd, err := r.Getwd()
	if err != nil {
		return fmt.Errorf("cannot read the current directory: %w", err)
	}
	base := strings.TrimSuffix(filepath.Base(label), filepath.Ext(label))
	spec, err := f.Spec(dag.Defaults{Name: base, Tenant: r.tenant(c), WorkDir: cwd, PriorityClass: DefaultPriorityClass})
	if err != nil {
		return bad(err)
	}
	// The cluster's own limits (max_dag_stages, max_array_size) are the
	// server's to check; here, everything else.
	plan, err := spec.Plan(dag.Limits{MaxStages: model.MaxArrayTasks, MaxArraySize: model.MaxArrayTasks})
	if err != nil {
		return bad(err)
	}
	if c.Bool("dry-run") {
		v := dagDryRunView{Name: plan.Name}
		for _, st := range plan.Stages {
			req := st.Request
			ds := dagDryRunStage{dryRunView: dryRunOf(&req, submitInput{command: req.Command}, nil), After: []dagDependencyView{}}
			if len(req.Command) == 0 {
				ds.EntrypointKind, ds.Entrypoint = "script", "(inline script)"
			}
			for _, a := range st.After {
				ds.After = append(ds.After, dagDependencyView{Name: plan.Stages[a.Index].Name, Condition: string(a.Condition)})
			}
			v.Stages = append(v.Stages, ds)
		}
		return r.emitAs(format, v, func(w io.Writer, _ bool) error {
			fmt.Fprintf(r.Stderr, "%s: valid: DAG %s, %d allocations; nothing submitted\n", label, plan.Name, len(plan.Stages))
			for _, sp := range f.Services {
				fmt.Fprintf(r.Stderr, "service %s: %d-%d nodes, created before the stages\n", sp.Name, sp.MinNodes, max(sp.MaxNodes, sp.MinNodes))
			}
			row(w, "ORDER", "NAME", "NODES", "WALLTIME", "ARRAY", "AFTER")
			for i, st := range v.Stages {
				var after []string
				for _, a := range st.After {
					after = append(after, a.Name+":"+a.Condition)
				}
				if plan.Stages[i].Request.HasSingleton() {
					after = append(after, "singleton")
				}
				arr := "-"
				if a := plan.Stages[i].Request.Array; a != nil {
					arr = a.String()
				}
				row(w, i+1, st.Name, nodeRange(st.NodesMin, st.NodesMax), model.FormatWalltime(secondsDur(st.WalltimeSeconds)), arr, orDash(strings.Join(after, ",")))
			}
			return nil
		})
	}

	req := &latticev1.SubmitDAGRequest{Name: spec.Name, ClientRequestId: r.reqID()}
	for _, st := range spec.Stages {
		p := &latticev1.DAGStage{Name: st.Name, Request: requestProto(&st.Request)}
		for _, d := range st.DependsOn {
			p.DependsOn = append(p.DependsOn, &latticev1.DAGDependency{Name: d.Name, Condition: string(d.Condition)})
		}
		req.Stages = append(req.Stages, p)
	}
	cn, err := r.connect(c)
	if err != nil {
		return err
	}
	for _, sp := range f.Services { // created first, so the stages find them (service.go)
		p := serviceSpecProto(sp, r.tenant(c), cwd)
		if err := cn.unary(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
			_, err := latticev1.NewScalingServiceClient(cc).CreateService(ctx, &latticev1.CreateScaledServiceRequest{Spec: p})
			return err
		}); err != nil {
			return fmt.Errorf("%s: service %s: %w", label, sp.Name, err)
		}
		fmt.Fprintf(r.Stderr, "service %s created (latticectl service show %s)\n", sp.Name, sp.Name)
	}
	var resp *latticev1.SubmitDAGResponse
	err = cn.unary(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		var err error
		resp, err = latticev1.NewDAGServiceClient(cc).SubmitDAG(ctx, req)
		return err
	})
	if err != nil {
		return err
	}
	if c.Bool("parsable") {
		fmt.Fprintln(r.Stdout, resp.GetDagId())
		return nil
	}
	v := dagSubmitView{DAGID: resp.GetDagId(), Name: resp.GetName(), Allocations: []dagStageView{}}
	for _, a := range resp.GetAllocations() {
		v.Allocations = append(v.Allocations, dagStageView{Name: a.GetName(), ID: a.GetId(), DisplayID: a.GetDisplayId(), Tasks: a.GetTasks()})
	}
	return r.emitAs(format, v, func(w io.Writer, _ bool) error {
		fmt.Fprintln(w, v.DAGID)
		var stages []string
		for _, a := range v.Allocations {
			s := a.Name + "=" + a.DisplayID
			if a.Tasks > 0 {
				s += fmt.Sprintf(" (%d tasks)", a.Tasks)
			}
			stages = append(stages, s)
		}
		fmt.Fprintf(r.Stderr, "submitted DAG %d %s: %s\n", v.DAGID, v.Name, strings.Join(stages, ", "))
		return nil
	})
}

// readWorkflow reads FILE, or standard input for "-".
func (r *runner) readWorkflow(path string) ([]byte, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(io.LimitReader(r.Stdin, dag.MaxFileBytes+1))
	} else {
		var f *os.File
		if f, err = os.Open(path); err == nil {
			defer f.Close()
			if st, serr := f.Stat(); serr == nil && st.IsDir() {
				err = fmt.Errorf("%s is a directory", path)
			} else {
				b, err = io.ReadAll(io.LimitReader(f, dag.MaxFileBytes+1))
			}
		}
	}
	if err != nil {
		return nil, usageErrorf("FILE %q is not a readable workflow file (%v)", path, unwrapPathError(err))
	}
	return b, nil
}

// dagStatusView is `dag status -o json` (CLI.md: dag_id, state, and the
// allocations' name, id, state, reason, depends_on; the rest are
// extensions).
type dagStatusView struct {
	DAGID       uint64               `json:"dag_id"`
	State       string               `json:"state"`
	Allocations []dagStageStatusView `json:"allocations"`

	Name       string  `json:"name"`
	Tenant     string  `json:"tenant"`
	SubmitTime *string `json:"submit_time"`
	EndTime    *string `json:"end_time"`
}

type dagStageStatusView struct {
	Name      string              `json:"name"`
	ID        uint64              `json:"id"`
	State     string              `json:"state"`
	Reason    string              `json:"reason"`
	DependsOn []dagDependencyView `json:"depends_on"`

	DisplayID      string `json:"display_id"`
	ReasonDetail   string `json:"reason_detail"`
	Tasks          int32  `json:"tasks"`
	TasksActive    int32  `json:"tasks_active"`
	TasksEnded     int32  `json:"tasks_ended"`
	TasksCompleted int32  `json:"tasks_completed"`
}

func dagStatusOf(p *latticev1.DAGStatus) dagStatusView {
	v := dagStatusView{DAGID: p.GetDagId(), State: p.GetState(), Name: p.GetName(), Tenant: p.GetTenant(),
		SubmitTime: rfc3339(p.GetSubmitTimeUnixMs()), EndTime: rfc3339(p.GetEndTimeUnixMs()), Allocations: []dagStageStatusView{}}
	for _, a := range p.GetAllocations() {
		s := dagStageStatusView{Name: a.GetName(), ID: a.GetId(), State: a.GetState(), Reason: a.GetReason(), DependsOn: []dagDependencyView{},
			DisplayID: a.GetDisplayId(), ReasonDetail: a.GetReasonDetail(), Tasks: a.GetTasks(), TasksActive: a.GetTasksActive(),
			TasksEnded: a.GetTasksEnded(), TasksCompleted: a.GetTasksCompleted()}
		for _, d := range a.GetDependsOn() {
			s.DependsOn = append(s.DependsOn, dagDependencyView{Name: d.GetName(), Condition: d.GetCondition()})
		}
		v.Allocations = append(v.Allocations, s)
	}
	return v
}

// dagOf is what the dag package draws.
func dagOf(p *latticev1.DAGStatus) *dag.Status {
	s := &dag.Status{ID: p.GetDagId(), Name: p.GetName(), State: model.DAGState(p.GetState())}
	for _, a := range p.GetAllocations() {
		st := dag.StageStatus{Name: a.GetName(), ID: a.GetId(), DisplayID: a.GetDisplayId(), Tasks: int(a.GetTasks()),
			State: model.AllocState(a.GetState()), Reason: a.GetReason(), Detail: a.GetReasonDetail()}
		for _, d := range a.GetDependsOn() {
			st.DependsOn = append(st.DependsOn, model.DAGDependency{Name: d.GetName(), Condition: model.DependencyCondition(d.GetCondition())})
		}
		s.Stages = append(s.Stages, st)
	}
	return s
}

func (r *runner) getDAG(c *cli.Context, id string) (*latticev1.DAGStatus, error) {
	cn, err := r.connect(c)
	if err != nil {
		return nil, err
	}
	var resp *latticev1.DAGStatus
	err = cn.unary(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		var err error
		resp, err = latticev1.NewDAGServiceClient(cc).GetDAG(ctx, &latticev1.GetDAGRequest{Id: id})
		return err
	})
	return resp, err
}

func (r *runner) dagStatus(c *cli.Context) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	if err := needArgs(c, 1, 1, "ID|NAME [--dot]"); err != nil {
		return err
	}
	p, err := r.getDAG(c, c.Args().First())
	if err != nil {
		return err
	}
	if c.Bool("dot") {
		return dag.WriteDOT(r.Stdout, dagOf(p))
	}
	return r.emitAs(format, dagStatusOf(p), func(w io.Writer, wide bool) error {
		return dag.WriteText(r.Stdout, dagOf(p), wide)
	})
}

// dagCancelView is `dag cancel -o json`.
type dagCancelView struct {
	DAGID     uint64   `json:"dag_id"`
	Cancelled []uint64 `json:"cancelled"`
	Running   int32    `json:"running"`
}

func (r *runner) dagCancel(c *cli.Context) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	if err := needArgs(c, 1, 1, "ID|NAME [--pending-only]"); err != nil {
		return err
	}
	cn, err := r.connect(c)
	if err != nil {
		return err
	}
	var resp *latticev1.CancelDAGResponse
	err = cn.unary(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		var err error
		resp, err = latticev1.NewDAGServiceClient(cc).CancelDAG(ctx, &latticev1.CancelDAGRequest{Id: c.Args().First(),
			PendingOnly: c.Bool("pending-only"), ClientRequestId: r.reqID()})
		return err
	})
	if err != nil {
		return err
	}
	v := dagCancelView{DAGID: resp.GetDagId(), Cancelled: nonNil(resp.GetCancelled()), Running: resp.GetRunning()}
	return r.emitAs(format, v, func(io.Writer, bool) error {
		msg := fmt.Sprintf("cancelled %d allocations of DAG %d", len(v.Cancelled), v.DAGID)
		if v.Running > 0 {
			msg += fmt.Sprintf("; %d running allocations left to finish", v.Running)
		}
		fmt.Fprintln(r.Stderr, msg)
		return nil
	})
}

// dagListView is one line of `dag list -o json`.
type dagListView struct {
	DAGID      uint64  `json:"dag_id"`
	Name       string  `json:"name"`
	State      string  `json:"state"`
	Tenant     string  `json:"tenant"`
	Stages     int32   `json:"stages"`
	Completed  int32   `json:"completed"`
	Running    int32   `json:"running"`
	Pending    int32   `json:"pending"`
	Failed     int32   `json:"failed"`
	Skipped    int32   `json:"skipped"`
	SubmitTime *string `json:"submit_time"`
	EndTime    *string `json:"end_time"`
}

func (r *runner) dagList(c *cli.Context) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	if err := needArgs(c, 0, 0, "[--mine]"); err != nil {
		return err
	}
	cn, err := r.connect(c)
	if err != nil {
		return err
	}
	req := &latticev1.ListDAGsRequest{}
	if c.Bool("mine") {
		req.Tenant, req.Mine = r.tenant(c), true
	}
	var resp *latticev1.ListDAGsResponse
	err = cn.unary(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		var err error
		resp, err = latticev1.NewDAGServiceClient(cc).ListDAGs(ctx, req)
		return err
	})
	if err != nil {
		return err
	}
	views := []dagListView{}
	for _, d := range resp.GetDags() {
		views = append(views, dagListView{DAGID: d.GetDagId(), Name: d.GetName(), State: d.GetState(), Tenant: d.GetTenant(),
			Stages: d.GetStages(), Completed: d.GetStagesCompleted(), Running: d.GetStagesActive(), Pending: d.GetStagesPending(),
			Failed: d.GetStagesFailed(), Skipped: d.GetStagesSkipped(), SubmitTime: rfc3339(d.GetSubmitTimeUnixMs()), EndTime: rfc3339(d.GetEndTimeUnixMs())})
	}
	return r.emitAs(format, views, func(w io.Writer, wide bool) error {
		row(w, "DAG_ID", "NAME", "TENANT", "STATE", "STAGES", "DONE", "RUNNING", "PENDING", "FAILED", "SKIPPED", "SUBMITTED")
		for i, v := range views {
			row(w, v.DAGID, truncate(v.Name, 30), v.Tenant, v.State, v.Stages, v.Completed, v.Running, v.Pending, v.Failed, v.Skipped,
				r.tableTime(resp.GetDags()[i].GetSubmitTimeUnixMs()))
		}
		return nil
	})
}
