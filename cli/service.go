package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"google.golang.org/grpc"
	"gopkg.in/yaml.v3"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// `latticectl service`: services that scale themselves (docs/services.md).

func serviceSpecFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "file", Aliases: []string{"f"}, Usage: "read the service from a YAML `FILE` (- = standard input); flags given as well override it"},
		&cli.IntFlag{Name: "min-nodes", Usage: "the fewest instances (one per node) it keeps running"},
		&cli.IntFlag{Name: "max-nodes", Usage: "the most instances it may scale to (default: --min-nodes)"},
		&cli.StringFlag{Name: "scale-metric", Usage: "the Prometheus `SERIES` its instances serve on http://127.0.0.1:$LATTICE_SERVICE_PORT/metrics"},
		&cli.Float64Flag{Name: "scale-target", Usage: "the per-instance `VALUE` of --scale-metric it scales to: desired = ceil(instances × average / VALUE)"},
		&cli.DurationFlag{Name: "scale-cooldown", Usage: "the least time between two changes of its instance count (default 60s)"},
		&cli.DurationFlag{Name: "scale-stabilization", Usage: "a scale-down takes the highest count asked for over this window (default 5m)"},
		&cli.DurationFlag{Name: "drain-time", Usage: "time between SIGTERM and SIGKILL when an instance is stopped (default 30s)"},
		&cli.StringFlag{Name: "vcluster", Usage: "the vCluster its instances run on (default: service, else the cluster's default)"},
		&cli.StringFlag{Name: "qos", Usage: "a site QOS: its class, and its maximum walltime as the instances' walltime"},
		&cli.IntFlag{Name: "priority-class", Usage: "class 0..10 (what it may preempt, and what may preempt it)"},
		&cli.StringSliceFlag{Name: "env", Usage: "KEY=VALUE for every instance (repeatable)"},
		&cli.StringFlag{Name: "constraint", Usage: "node features every instance's node needs (FEATURE[&FEATURE...])"},
	}
}

func (r *runner) serviceCommand() *cli.Command {
	nameOnly := func(name, usage string, action cli.ActionFunc) *cli.Command {
		return &cli.Command{Name: name, Usage: usage, ArgsUsage: "NAME", Action: action}
	}
	return &cli.Command{
		Name:  "service",
		Usage: "services that scale themselves: instances (one per node) kept between a minimum and a maximum, scaled on a metric",
		Subcommands: []*cli.Command{
			{
				Name:      "create",
				Usage:     "create a service: latticectl service create NAME --min-nodes N --max-nodes M [--scale-metric S --scale-target V] -- CMD ARGS",
				ArgsUsage: "NAME [-- CMD [ARGS...]] | -f FILE",
				Description: "Each instance runs CMD on its own node with LATTICE_SERVICE_PORT (a free port of that node) and\n" +
					"LATTICE_SERVICE_NAME in its environment; it should serve there, and /metrics there when --scale-metric is set.\n" +
					"FILE is YAML with the same keys as the flags (name, min_nodes, max_nodes, scale_metric, scale_target,\n" +
					"scale_cooldown, scale_stabilization, drain_time, vcluster, qos, priority_class, tenant, env, constraint, command).",
				Flags:  serviceSpecFlags(),
				Action: r.serviceCreate,
			},
			{
				Name:      "update",
				Usage:     "change a service's settings (the flags given; running instances keep running)",
				ArgsUsage: "NAME [-- CMD [ARGS...]]",
				Flags:     serviceSpecFlags(),
				Action:    r.serviceUpdate,
			},
			nameOnly("delete", "delete a service: its instances get SIGTERM, then SIGKILL after its drain time", r.serviceDelete),
			nameOnly("show", "a service: replicas, desired, min, max, the metric's average, the last scaling decision, its instances", r.serviceShow),
			nameOnly("endpoints", "host:port of each running instance, one per line (for clients and load balancers)", r.serviceEndpoints),
			nameOnly("explain", "why a service runs fewer instances than it wants, or cannot grow", r.serviceExplain),
			{
				Name:   "list",
				Usage:  "services and their instance counts",
				Action: r.serviceList,
			},
		},
	}
}

// serviceFile is the YAML form of a service.
type serviceFile struct {
	Name               string   `yaml:"name"`
	Tenant             string   `yaml:"tenant"`
	VCluster           string   `yaml:"vcluster"`
	QOS                string   `yaml:"qos"`
	PriorityClass      int      `yaml:"priority_class"`
	MinNodes           int      `yaml:"min_nodes"`
	MaxNodes           int      `yaml:"max_nodes"`
	ScaleMetric        string   `yaml:"scale_metric"`
	ScaleTarget        float64  `yaml:"scale_target"`
	ScaleCooldown      string   `yaml:"scale_cooldown"`
	ScaleStabilization string   `yaml:"scale_stabilization"`
	DrainTime          string   `yaml:"drain_time"`
	Env                []string `yaml:"env"`
	Constraint         string   `yaml:"constraint"`
	Command            []string `yaml:"command"`
}

// ParseServiceFile reads a service's YAML file (unknown keys are errors).
func ParseServiceFile(data []byte) (*latticev1.ScaledServiceSpec, error) {
	var f serviceFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	p := &latticev1.ScaledServiceSpec{Name: f.Name, Tenant: f.Tenant, Vcluster: f.VCluster, Qos: f.QOS, PriorityClass: int32(f.PriorityClass),
		MinNodes: int32(f.MinNodes), MaxNodes: int32(f.MaxNodes), ScaleMetric: f.ScaleMetric, ScaleTarget: f.ScaleTarget,
		Env: f.Env, Command: f.Command}
	if f.Constraint != "" {
		p.Constraints = strings.Split(f.Constraint, "&")
	}
	for _, d := range []struct {
		key, v string
		to     *int64
	}{{"scale_cooldown", f.ScaleCooldown, &p.CooldownMs}, {"scale_stabilization", f.ScaleStabilization, &p.StabilizationMs}, {"drain_time", f.DrainTime, &p.DrainTimeMs}} {
		if d.v == "" {
			continue
		}
		dur, err := time.ParseDuration(d.v)
		if err != nil {
			return nil, &model.FieldError{Field: d.key, Value: d.v, Allowed: "a duration such as 30s or 5m"}
		}
		*d.to = max(dur.Milliseconds(), -1) // negative: zero
		if dur == 0 {
			*d.to = -1
		}
	}
	return p, nil
}

// serviceSpecProto is a spec from a workflow file on the wire (a negative
// duration: explicitly zero).
func serviceSpecProto(sp model.ServiceSpec, tenant, workDir string) *latticev1.ScaledServiceSpec {
	ms := func(d time.Duration) int64 {
		if d < 0 {
			return -1
		}
		return d.Milliseconds()
	}
	p := &latticev1.ScaledServiceSpec{Name: sp.Name, Tenant: sp.Tenant, Vcluster: sp.VCluster, Qos: sp.QOS, PriorityClass: int32(sp.PriorityClass),
		MinNodes: int32(sp.MinNodes), MaxNodes: int32(sp.MaxNodes), ScaleMetric: sp.Metric, ScaleTarget: sp.Target,
		CooldownMs: ms(sp.Cooldown), StabilizationMs: ms(sp.Stabilization), DrainTimeMs: ms(sp.DrainTime),
		Command: sp.Command, Env: sp.Env, Constraints: sp.Constraints, WorkDir: workDir}
	if p.Tenant == "" {
		p.Tenant = tenant
	}
	return p
}

// serviceSpecFrom builds a spec from -f FILE (if any), then the flags and
// NAME -- CMD ARGS.
func (r *runner) serviceSpecFrom(c *cli.Context, base *latticev1.ScaledServiceSpec) (*latticev1.ScaledServiceSpec, error) {
	spec := base
	if spec == nil {
		spec = &latticev1.ScaledServiceSpec{}
	}
	if path := c.String("file"); path != "" {
		data, err := r.readWorkflow(path)
		if err != nil {
			return nil, err
		}
		f, err := ParseServiceFile(data)
		if err != nil {
			return nil, withCode(ExitUsage, fmt.Errorf("%s: %w", path, err))
		}
		spec = f
	}
	args := c.Args().Slice()
	before, after := args[:len(args)-r.afterDash], args[len(args)-r.afterDash:]
	switch {
	case len(before) > 1:
		return nil, usageErrorf("give NAME, then the command after --: got %q before --", strings.Join(before, " "))
	case len(before) == 1:
		spec.Name = before[0]
	}
	if len(after) > 0 {
		spec.Command = after
	}
	if c.IsSet("min-nodes") {
		spec.MinNodes = int32(c.Int("min-nodes"))
		if !c.IsSet("max-nodes") && spec.MaxNodes < spec.MinNodes {
			spec.MaxNodes = spec.MinNodes
		}
	}
	if c.IsSet("max-nodes") {
		spec.MaxNodes = int32(c.Int("max-nodes"))
	}
	if c.IsSet("scale-metric") {
		spec.ScaleMetric = c.String("scale-metric")
	}
	if c.IsSet("scale-target") {
		spec.ScaleTarget = c.Float64("scale-target")
	}
	durMS := func(name string, to *int64) {
		if c.IsSet(name) {
			*to = c.Duration(name).Milliseconds()
			if *to == 0 {
				*to = -1 // explicitly none (0 would take the default)
			}
		}
	}
	durMS("scale-cooldown", &spec.CooldownMs)
	durMS("scale-stabilization", &spec.StabilizationMs)
	durMS("drain-time", &spec.DrainTimeMs)
	if c.IsSet("vcluster") {
		spec.Vcluster = c.String("vcluster")
	}
	if c.IsSet("qos") {
		spec.Qos = c.String("qos")
	}
	if c.IsSet("priority-class") {
		spec.PriorityClass = int32(c.Int("priority-class"))
	}
	if c.IsSet("env") {
		spec.Env = c.StringSlice("env")
	}
	if c.IsSet("constraint") {
		spec.Constraints = strings.Split(c.String("constraint"), "&")
	}
	if t := r.tenant(c); t != "" && spec.Tenant == "" {
		spec.Tenant = t
	}
	if spec.Name == "" {
		return nil, usageErrorf("usage: latticectl service create NAME --min-nodes N [--max-nodes M] -- CMD [ARGS...] (or -f FILE)")
	}
	if spec.WorkDir == "" {
		if wd, err := r.Getwd(); err == nil {
			spec.WorkDir = wd
		}
	}
	return spec, nil
}

func (r *runner) scaling(c *cli.Context, call func(ctx context.Context, sc latticev1.ScalingServiceClient) error) error {
	cn, err := r.connect(c)
	if err != nil {
		return err
	}
	return cn.unary(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		return call(ctx, latticev1.NewScalingServiceClient(cc))
	})
}

func (r *runner) serviceCreate(c *cli.Context) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	spec, err := r.serviceSpecFrom(c, nil)
	if err != nil {
		return err
	}
	if len(spec.Command) == 0 {
		return usageErrorf("nothing after --: give the command each instance runs, e.g. latticectl service create web --min-nodes 1 -- ./server")
	}
	var st *latticev1.ScaledServiceStatus
	if err := r.scaling(c, func(ctx context.Context, sc latticev1.ScalingServiceClient) error {
		st, err = sc.CreateService(ctx, &latticev1.CreateScaledServiceRequest{Spec: spec})
		return err
	}); err != nil {
		return err
	}
	return r.emitService(format, st)
}

func (r *runner) serviceUpdate(c *cli.Context) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	if err := needArgs(c, 1, -1, "NAME [flags] [-- CMD [ARGS...]]"); err != nil {
		return err
	}
	var cur *latticev1.ScaledServiceStatus
	if err := r.scaling(c, func(ctx context.Context, sc latticev1.ScalingServiceClient) error {
		cur, err = sc.GetService(ctx, &latticev1.GetScaledServiceRequest{Name: c.Args().First()})
		return err
	}); err != nil {
		return err
	}
	spec, err := r.serviceSpecFrom(c, cur.GetSpec())
	if err != nil {
		return err
	}
	var st *latticev1.ScaledServiceStatus
	if err := r.scaling(c, func(ctx context.Context, sc latticev1.ScalingServiceClient) error {
		st, err = sc.UpdateService(ctx, &latticev1.UpdateScaledServiceRequest{Spec: spec})
		return err
	}); err != nil {
		return err
	}
	return r.emitService(format, st)
}

func (r *runner) serviceDelete(c *cli.Context) error {
	if err := needArgs(c, 1, 1, "NAME"); err != nil {
		return err
	}
	var resp *latticev1.DeleteScaledServiceResponse
	if err := r.scaling(c, func(ctx context.Context, sc latticev1.ScalingServiceClient) (err error) {
		resp, err = sc.DeleteService(ctx, &latticev1.DeleteScaledServiceRequest{Name: c.Args().First()})
		return err
	}); err != nil {
		return err
	}
	fmt.Fprintf(r.Stdout, "service %s deleted; %d instance(s) stopping\n", c.Args().First(), len(resp.GetCancelled()))
	return nil
}

func (r *runner) getService(c *cli.Context) (*latticev1.ScaledServiceStatus, error) {
	if err := needArgs(c, 1, 1, "NAME"); err != nil {
		return nil, err
	}
	var st *latticev1.ScaledServiceStatus
	err := r.scaling(c, func(ctx context.Context, sc latticev1.ScalingServiceClient) (err error) {
		st, err = sc.GetService(ctx, &latticev1.GetScaledServiceRequest{Name: c.Args().First()})
		return err
	})
	return st, err
}

func (r *runner) serviceShow(c *cli.Context) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	st, err := r.getService(c)
	if err != nil {
		return err
	}
	return r.emitService(format, st)
}

func (r *runner) serviceEndpoints(c *cli.Context) error {
	st, err := r.getService(c)
	if err != nil {
		return err
	}
	for _, in := range st.GetInstances() {
		if in.GetEndpoint() != "" && in.GetState() == string(model.StateRunning) && !in.GetStopping() {
			fmt.Fprintln(r.Stdout, in.GetEndpoint())
		}
	}
	return nil
}

func (r *runner) serviceExplain(c *cli.Context) error {
	st, err := r.getService(c)
	if err != nil {
		return err
	}
	fmt.Fprintln(r.Stdout, serviceExplanation(st))
	return nil
}

// isServiceName tells a service's name from an allocation id (12, 12_3)
// for `explain`: a service's name is never a number.
func isServiceName(arg string) bool {
	head, _, _ := strings.Cut(arg, "_")
	_, err := strconv.ParseUint(head, 10, 64)
	return err != nil
}

// serviceExplanation is `explain` of a service.
func serviceExplanation(st *latticev1.ScaledServiceStatus) string {
	sp := st.GetSpec()
	head := fmt.Sprintf("service %s: %d of %d desired instances running (min %d, max %d)", sp.GetName(), st.GetReplicas(), st.GetDesired(), sp.GetMinNodes(), sp.GetMaxNodes())
	var lines []string
	if w := st.GetWaiting(); w != "" {
		lines = append(lines, strings.Split(w, "; ")...)
	}
	if st.GetDesired() >= sp.GetMaxNodes() {
		lines = append(lines, fmt.Sprintf("at its maximum (%d): it grows no further", sp.GetMaxNodes()))
	}
	if d := st.GetLastDecision(); d != nil {
		lines = append(lines, fmt.Sprintf("last decision %s: %d → %d (%s)", time.UnixMilli(d.GetTimeUnixMs()).UTC().Format(time.RFC3339), d.GetFrom(), d.GetTo(), d.GetReason()))
	}
	if len(lines) == 0 {
		return head
	}
	return head + "\n  " + strings.Join(lines, "\n  ")
}

func (r *runner) serviceList(c *cli.Context) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	var resp *latticev1.ListScaledServicesResponse
	if err := r.scaling(c, func(ctx context.Context, sc latticev1.ScalingServiceClient) (err error) {
		resp, err = sc.ListServices(ctx, &latticev1.ListScaledServicesRequest{})
		return err
	}); err != nil {
		return err
	}
	views := make([]serviceView, 0, len(resp.GetServices()))
	for _, s := range resp.GetServices() {
		views = append(views, serviceViewOf(s))
	}
	return r.emitAs(format, views, func(w io.Writer, _ bool) error {
		row(w, "NAME", "TENANT", "VCLUSTER", "REPLICAS", "DESIRED", "MIN", "MAX", "METRIC", "AVERAGE", "REASON")
		for _, v := range views {
			row(w, v.Name, v.Tenant, v.VCluster, v.Replicas, v.Desired, v.Min, v.Max, orDash(v.Metric), avgText(v.MetricAverage), orDash(v.Reason))
		}
		return nil
	})
}

// serviceView is `service show -o json` (and each item of `list`).
type serviceView struct {
	Name          string            `json:"name"`
	Tenant        string            `json:"tenant"`
	User          string            `json:"user,omitempty"`
	VCluster      string            `json:"vcluster"`
	Replicas      int               `json:"replicas"`
	Desired       int               `json:"desired"`
	Min           int               `json:"min"`
	Max           int               `json:"max"`
	Metric        string            `json:"metric,omitempty"`
	Target        float64           `json:"target,omitempty"`
	MetricAverage *float64          `json:"metric_average"`
	LastDecision  *serviceDecision  `json:"last_decision"`
	Reason        string            `json:"reason,omitempty"`
	ReasonDetail  string            `json:"reason_detail,omitempty"`
	Restarts      int               `json:"restarts"`
	Cooldown      string            `json:"cooldown"`
	Stabilization string            `json:"stabilization"`
	DrainTime     string            `json:"drain_time"`
	Command       []string          `json:"command"`
	Instances     []serviceInstance `json:"instances"`
	Waiting       string            `json:"waiting,omitempty"`
}

type serviceDecision struct {
	Time      string `json:"time"`
	From      int    `json:"from"`
	To        int    `json:"to"`
	Direction string `json:"direction"`
	Reason    string `json:"reason"`
}

type serviceInstance struct {
	ID       uint64   `json:"id"`
	State    string   `json:"state"`
	Node     string   `json:"node,omitempty"`
	Endpoint string   `json:"endpoint,omitempty"`
	Value    *float64 `json:"value"`
	Reason   string   `json:"reason,omitempty"`
	Stopping bool     `json:"stopping,omitempty"`
	Error    string   `json:"scrape_error,omitempty"`
}

func serviceViewOf(s *latticev1.ScaledServiceStatus) serviceView {
	sp := s.GetSpec()
	v := serviceView{Name: sp.GetName(), Tenant: sp.GetTenant(), User: s.GetUser(), VCluster: sp.GetVcluster(),
		Replicas: int(s.GetReplicas()), Desired: int(s.GetDesired()), Min: int(sp.GetMinNodes()), Max: int(sp.GetMaxNodes()),
		Metric: sp.GetScaleMetric(), Target: sp.GetScaleTarget(), Reason: s.GetReason(), ReasonDetail: s.GetReasonDetail(),
		Restarts: int(s.GetRestarts()), Cooldown: msText(sp.GetCooldownMs()), Stabilization: msText(sp.GetStabilizationMs()),
		DrainTime: msText(sp.GetDrainTimeMs()), Command: sp.GetCommand(), Instances: []serviceInstance{}, Waiting: s.GetWaiting()}
	if s.GetHasMetricAverage() {
		a := s.GetMetricAverage()
		v.MetricAverage = &a
	}
	if d := s.GetLastDecision(); d != nil {
		v.LastDecision = &serviceDecision{Time: time.UnixMilli(d.GetTimeUnixMs()).UTC().Format(time.RFC3339Nano), From: int(d.GetFrom()), To: int(d.GetTo()),
			Direction: d.GetDirection(), Reason: d.GetReason()}
	}
	for _, in := range s.GetInstances() {
		si := serviceInstance{ID: in.GetAllocationId(), State: in.GetState(), Node: in.GetNode(), Endpoint: in.GetEndpoint(),
			Reason: in.GetReason(), Stopping: in.GetStopping(), Error: in.GetScrapeError()}
		if in.GetHasValue() {
			x := in.GetValue()
			si.Value = &x
		}
		v.Instances = append(v.Instances, si)
	}
	return v
}

func msText(ms int64) string { return (time.Duration(max(ms, 0)) * time.Millisecond).String() }

func avgText(a *float64) string {
	if a == nil {
		return "-"
	}
	return strconv.FormatFloat(*a, 'g', 4, 64)
}

func (r *runner) emitService(format string, st *latticev1.ScaledServiceStatus) error {
	v := serviceViewOf(st)
	return r.emitAs(format, v, func(w io.Writer, _ bool) error {
		row(w, "Name:", v.Name)
		row(w, "Tenant:", v.Tenant)
		row(w, "VCluster:", v.VCluster)
		row(w, "Replicas:", fmt.Sprintf("%d running, %d desired (min %d, max %d)", v.Replicas, v.Desired, v.Min, v.Max))
		if v.Metric != "" {
			row(w, "Metric:", fmt.Sprintf("%s, target %g per instance, average %s", v.Metric, v.Target, avgText(v.MetricAverage)))
		}
		row(w, "Timing:", fmt.Sprintf("cooldown %s, stabilization %s, drain %s", v.Cooldown, v.Stabilization, v.DrainTime))
		if d := v.LastDecision; d != nil {
			row(w, "Last decision:", fmt.Sprintf("%s %d → %d at %s: %s", d.Direction, d.From, d.To, d.Time, d.Reason))
		}
		if v.Reason != "" {
			row(w, "Reason:", v.Reason+": "+v.ReasonDetail)
		}
		row(w, "Restarts:", v.Restarts)
		row(w, "Command:", strings.Join(v.Command, " "))
		for _, in := range v.Instances {
			val := "-"
			if in.Value != nil {
				val = strconv.FormatFloat(*in.Value, 'g', 4, 64)
			}
			state := in.State
			if in.Stopping {
				state += " (stopping)"
			}
			row(w, "Instance:", fmt.Sprintf("%d %s %s %s %s=%s", in.ID, state, orDash(in.Node), orDash(in.Endpoint), orDash(v.Metric), val))
		}
		if v.Waiting != "" {
			row(w, "Why:", v.Waiting)
		}
		return nil
	})
}
