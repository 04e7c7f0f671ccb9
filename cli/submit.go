package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"google.golang.org/grpc"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// DefaultPriorityClass is the priority class of a submission that names
// neither --priority-class nor --qos: the class of qos "normal".
const DefaultPriorityClass = 5

// qosClasses maps Slurm QOS names to Lattice priority classes (0..10).
var qosClasses = []struct {
	name  string
	class int
}{
	{"scavenger", 0},
	{"low", 2},
	{"normal", DefaultPriorityClass},
	{"high", 8},
	{"urgent", 10},
	{"debug", 8},
}

func qosClass(name string) (int, error) {
	var names []string
	for _, q := range qosClasses {
		if strings.EqualFold(strings.TrimSpace(name), q.name) {
			return q.class, nil
		}
		names = append(names, fmt.Sprintf("%s (%d)", q.name, q.class))
	}
	return 0, &model.FieldError{Field: "qos", Value: name, Allowed: strings.Join(names, ", ")}
}

// submitFlags maps submit's command-line flags to setting keys, in the
// order they are applied: --priority-class comes after --qos so it wins
// when both are given.
var submitFlags = []struct {
	flag, key string
}{
	{"nodes", optNodes},
	{"walltime", optWalltime},
	{"name", optName},
	{"vcluster", optVCluster},
	{"tenant", optTenant},
	{"project", optProject},
	{"array", optArray},
	{"depends-on", optDependsOn},
	{"constraint", optConstraint},
	{"gres", optGres},
	{"gpus-per-node", optGPUsPerNode},
	{"gpu-type", optGPUType},
	{"qos", "qos"},
	{"priority-class", "priority-class"},
	{"checkpoint", optCheckpoint},
	{"checkpoint-hook", optCkptHook},
	{"checkpoint-webhook", optCkptWebhook},
	{"signal", optSignal},
	{"stdout", optStdout},
	{"stderr", optStderr},
	{"workdir", optWorkDir},
	{"export", optExport},
	{"begin", optBegin},
	{"nodelist", optNodeList},
	{"exclude", optExclude},
	{"reservation", optReservation},
	{"gpus", optGPUs},
	{"mail-type", optMailType},
	{"mail-user", optMailUser},
	{"ntasks", optNtasks},
	{"ntasks-per-node", optNtasksPerNode},
	{"cpus-per-task", optCPUsPerTask},
	{"mem", optMem},
	{"mem-per-cpu", optMemPerCPU},
	{"gpus-per-task", optGPUsPerTask},
}

func (r *runner) submitCommand() *cli.Command {
	return &cli.Command{
		Name:      "submit",
		Usage:     "submit one allocation (or an array) from a batch script or a command",
		ArgsUsage: "SCRIPT [SCRIPT...] | -- CMD [ARGS...]",
		Description: "#SBATCH lines in SCRIPT are honoured; command-line flags win over them.\n" +
			"On the command line -o is the output format; in a script #SBATCH -o/-e set the output files.\n" +
			"--qos names a QOS of the site's table (`latticectl qos list`); built in: scavenger 0, low 2, normal 5 (default), high 8, urgent 10, debug 8.\n" +
			"A batch script's stdout and stderr go to slurm-%j.out (arrays slurm-%A_%a.out) in the submit directory unless --stdout/--stderr (#SBATCH -o/-e) say otherwise.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "nodes", Aliases: []string{"N"}, Usage: "node count N or MIN-MAX", DefaultText: "1"},
			&cli.StringFlag{Name: "walltime", Aliases: []string{"t", "time"}, Usage: "MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or a Go duration (90m)", DefaultText: "1h"},
			&cli.StringFlag{Name: "vcluster", Aliases: []string{"p", "partition"}, Usage: "vCluster (default: the server's default)"},
			&cli.StringFlag{Name: "tenant", Aliases: []string{"A", "account"}, Usage: "tenant (env LATTICE_TENANT; default: your user name)"},
			&cli.StringFlag{Name: "project", Usage: "project, for accounting"},
			&cli.StringFlag{Name: "name", Aliases: []string{"J", "job-name"}, Usage: "name (default: the script's or the command's name)"},
			&cli.StringFlag{Name: "priority-class", Usage: "priority class 0..10", DefaultText: strconv.Itoa(DefaultPriorityClass)},
			&cli.StringFlag{Name: "qos", Aliases: []string{"q"}, Usage: "a QOS of the site's table (latticectl qos list): its priority class and limits"},
			&cli.StringFlag{Name: "checkpoint", Usage: "how the job is asked to checkpoint before its nodes are taken back: signal, hook, webhook or none", DefaultText: "none (signal with --signal)"},
			&cli.StringFlag{Name: "checkpoint-hook", Usage: "hook mode: command run (sh -c, with the job's environment) to checkpoint; exit 0 = done"},
			&cli.StringFlag{Name: "checkpoint-webhook", Usage: "webhook mode: URL POSTed {allocation, deadline, checkpoint_dir}; acknowledge with latticectl checkpoint done ID"},
			&cli.StringFlag{Name: "signal", Usage: "sbatch's [B:]SIG[@SECS]: the checkpoint signal (default USR1), also sent SECS (default 60) before the walltime ends"},
			&cli.StringFlag{Name: "depends-on", Aliases: []string{"d", "dependency"}, Usage: "afterok:ID[:ID][,afterany:ID...]"},
			&cli.StringFlag{Name: "array", Aliases: []string{"a"}, Usage: "job array START-END[:STEP][%MAX]"},
			&cli.StringFlag{Name: "constraint", Aliases: []string{"C"}, Usage: "node features FEATURE[&FEATURE...]"},
			&cli.StringFlag{Name: "gpu-type", Usage: "GPU type, e.g. a100"},
			&cli.StringFlag{Name: "gres", Usage: "Slurm generic resource gpu[:TYPE][:N]"},
			&cli.StringFlag{Name: "gpus-per-node", Usage: "GPUs per node [TYPE:]N"},
			&cli.StringFlag{Name: "stdout", Usage: "output file (%j %A %a %x %u %N expanded; a script's default: slurm-%j.out, stderr with it)"},
			&cli.StringFlag{Name: "stderr", Usage: "error file (%j %A %a %x are expanded by the server)"},
			&cli.StringFlag{Name: "workdir", Aliases: []string{"D", "chdir"}, Usage: "working directory", DefaultText: "the current directory"},
			&cli.StringFlag{Name: "export", Usage: "environment to pass: NONE, ALL, or NAME[=VALUE][,...] (ALL may start the list)", DefaultText: "ALL, as sbatch"},
			&cli.BoolFlag{Name: "requeue", Usage: "put the job back in the queue, rather than failing it, when one of its nodes fails (#SBATCH --requeue)"},
			&cli.BoolFlag{Name: "no-requeue", Usage: "fail the job when one of its nodes fails (the default)"},
			&cli.StringFlag{Name: "begin", Aliases: []string{"b"}, Usage: "not before this time: now+N[seconds|minutes|hours|days|weeks], HH:MM[:SS], YYYY-MM-DD[THH:MM[:SS]], midnight, noon, teatime, tomorrow"},
			&cli.BoolFlag{Name: "hold", Aliases: []string{"H"}, Usage: "submit it held (reason JobHeldUser) until latticectl release ID"},
			&cli.StringFlag{Name: "nodelist", Aliases: []string{"w"}, Usage: "run only on these nodes: a hostlist such as node[003-004]"},
			&cli.StringFlag{Name: "exclude", Aliases: []string{"x"}, Usage: "never run on these nodes: a hostlist such as node[001-002]"},
			&cli.StringFlag{Name: "reservation", Usage: "run in this node reservation (latticectl reservation list): on its nodes, while it is active"},
			&cli.StringFlag{Name: "gpus", Aliases: []string{"G"}, Usage: "GPUs for the whole job [TYPE:]N, spread evenly over its nodes"},
			&cli.StringFlag{Name: "mail-type", Usage: "sbatch's mail events (NONE, BEGIN, END, FAIL, ALL, ...); kept, but mail is sent only by a site mail hook"},
			&cli.StringFlag{Name: "mail-user", Usage: "where mail goes; see --mail-type"},
			&cli.StringFlag{Name: "ntasks", Aliases: []string{"n"}, Usage: "tasks (srun's default in the job: SLURM_NTASKS)"},
			&cli.StringFlag{Name: "ntasks-per-node", Usage: "tasks on each node"},
			&cli.StringFlag{Name: "cpus-per-task", Aliases: []string{"c"}, Usage: "CPUs of each task (SLURM_CPUS_PER_TASK)"},
			&cli.StringFlag{Name: "mem", Usage: "memory per node: MB, or with a suffix K, M, G, T (16G)"},
			&cli.StringFlag{Name: "mem-per-cpu", Usage: "memory per CPU: MB, or with a suffix K, M, G, T"},
			&cli.StringFlag{Name: "gpus-per-task", Usage: "GPUs of each task"},
			&cli.BoolFlag{Name: "exclusive", Usage: "accepted: every allocation has whole nodes"},
			&cli.BoolFlag{Name: "overcommit", Aliases: []string{"O"}, Usage: "allow more tasks × CPUs per task than a node has CPUs"},
			&cli.BoolFlag{Name: "keep-never-fits", Usage: "admins: keep a request no node set of its vCluster could ever satisfy (refused otherwise; --hold keeps it too)"},
			&cli.BoolFlag{Name: "dry-run", Usage: "validate and print the resolved request; submit nothing (needs no server)"},
			&cli.BoolFlag{Name: "parsable", Aliases: []string{"parseable"}, Usage: "print only the id"},
		},
		Action: r.submit,
	}
}

// submitInput is everything a submission is resolved from.
type submitInput struct {
	opts          submitOptions
	command       []string // after --
	script        string   // contents of SCRIPT
	scriptPath    string   // SCRIPT as given; "-" is standard input
	cwd           string
	defaultTenant string
	environ       []string
	now           time.Time // what --begin is relative to
	// resolveTask turns an array task id ("12_3") into its allocation id;
	// nil when no server may be asked (--dry-run).
	resolveTask func(display string) (uint64, error)
}

func (r *runner) submit(c *cli.Context) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	in := submitInput{opts: submitOptions{}}
	args := c.Args().Slice()
	before, after := args[:len(args)-r.afterDash], args[len(args)-r.afterDash:]
	var warnings []string
	switch {
	case r.sawDash && len(before) > 0:
		return usageErrorf("give either SCRIPT or -- CMD [ARGS...], not both (got %q before --)", strings.Join(before, " "))
	case r.sawDash && len(after) == 0:
		return usageErrorf("nothing after --: give the command to run, e.g. latticectl submit -- hostname")
	case r.sawDash:
		in.command = after
	case len(before) == 0:
		return usageErrorf("submit needs a batch SCRIPT or a command after --, e.g. latticectl submit job.sh or latticectl submit -- hostname")
	case len(before) > 1:
		return r.submitMany(c, format, before)
	default:
		in.scriptPath = before[0]
		in.script, err = r.readScript(in.scriptPath)
		if err != nil {
			return err
		}
		if warnings, err = parseSbatch(scriptLabel(in.scriptPath), in.script, in.opts); err != nil {
			return err
		}
	}
	if err := r.applySubmitFlags(c, &in); err != nil {
		return err
	}
	dry := c.Bool("dry-run")
	var cn *conn
	if !dry {
		if cn, err = r.connect(c); err != nil {
			return err
		}
		in.resolveTask = func(display string) (uint64, error) { return getAllocationID(c.Context, cn, display) }
	}
	req, err := resolveSubmit(in)
	if err != nil {
		return err
	}
	if dry {
		warnings = append(warnings, r.resolveSiteDry(c, req)...)
	}
	warnings = append(warnings, submitWarnings(req, dry)...)
	for _, w := range warnings {
		fmt.Fprintf(r.Stderr, "warning: %s\n", w)
	}
	if dry {
		v := dryRunOf(req, in, warnings)
		return r.emitAs(format, v, func(w io.Writer, _ bool) error { return dryRunTable(w, v) })
	}
	var resp *latticev1.SubmitResponse
	sr := &latticev1.SubmitRequest{Request: requestProto(req), ClientRequestId: r.reqID()}
	sr.Request.KeepIfNeverFits = c.Bool("keep-never-fits")
	err = cn.unary(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		var err error
		resp, err = latticev1.NewAllocationServiceClient(cc).Submit(ctx, sr)
		return err
	})
	if err != nil {
		return err
	}
	for _, w := range resp.GetWarnings() {
		fmt.Fprintf(r.Stderr, "warning: %s\n", w)
		warnings = append(warnings, w)
	}
	display := resp.GetDisplayId()
	if display == "" && len(resp.GetIds()) > 0 {
		display = strconv.FormatUint(resp.GetIds()[0], 10)
	}
	if c.Bool("parsable") {
		fmt.Fprintln(r.Stdout, display)
		return nil
	}
	out := submitView{DisplayID: display, IDs: nonNil(resp.GetIds()), Warnings: nonNil(warnings)}
	if len(out.IDs) > 0 {
		out.ID = out.IDs[0]
	}
	return r.emitAs(format, out, func(w io.Writer, _ bool) error {
		fmt.Fprintln(w, display)
		what := "allocation " + display
		if req.Array != nil {
			what = fmt.Sprintf("array %s (%d tasks %s_%d…%s_%d)", display, len(resp.GetIds()), display, req.Array.Start, display, req.Array.End)
		}
		nodes := "nodes"
		if req.NodesMax == 1 {
			nodes = "node"
		}
		tenant := req.Tenant
		if t := resp.GetTenant(); t != "" {
			tenant = t
		}
		if tenant == "" {
			tenant = "your default"
		}
		size := nodeRange(req.NodesMin, req.NodesMax) + " " + nodes
		if req.NodesMax == 0 && req.Ntasks > 0 {
			size = fmt.Sprintf("%d tasks", req.Ntasks)
		}
		fmt.Fprintf(r.Stderr, "submitted %s: %s, walltime %s, tenant %s\n", what,
			size, model.FormatWalltime(req.Walltime), tenant)
		return nil
	})
}

// applySubmitFlags lays the command line over what the script said and
// fills the defaults that come from the caller's environment.
func (r *runner) applySubmitFlags(c *cli.Context, in *submitInput) error {
	for _, f := range submitFlags {
		if c.IsSet(f.flag) {
			in.opts.set(f.key, c.String(f.flag), "")
		}
	}
	if c.IsSet("requeue") {
		in.opts.set(optRequeue, fmt.Sprint(c.Bool("requeue")), "")
	}
	if c.IsSet("no-requeue") {
		in.opts.set(optRequeue, fmt.Sprint(!c.Bool("no-requeue")), "")
	}
	if c.IsSet("hold") {
		in.opts.set(optHold, fmt.Sprint(c.Bool("hold")), "")
	}
	for _, f := range []struct{ flag, key string }{{"exclusive", optExclusive}, {"overcommit", optOvercommit}} {
		if c.IsSet(f.flag) {
			in.opts.set(f.key, fmt.Sprint(c.Bool(f.flag)), "")
		}
	}
	in.now = r.Now()
	if v, ok := explicit(c, "tenant"); ok {
		in.opts.set(optTenant, v, "")
	}
	if _, ok := in.opts[optTenant]; !ok {
		in.defaultTenant = r.tenant(c)
	}
	var err error
	if in.cwd, err = r.Getwd(); err != nil {
		return fmt.Errorf("cannot read the current directory: %w", err)
	}
	if r.Environ != nil {
		in.environ = r.Environ()
	}
	return nil
}

// submitMany submits several scripts in one SubmitBatch call (one Raft
// entry): each is resolved as a single script would be, with the same
// flags; ids are printed one a line in the order given. A script that
// cannot be read or is refused is reported on stderr and the others still
// go; the exit code is then 1.
func (r *runner) submitMany(c *cli.Context, format string, paths []string) error {
	if slices.Contains(paths, "-") {
		return usageErrorf("standard input (-) can be the only SCRIPT; got %d scripts", len(paths))
	}
	if n := len(paths); n > maxBatchScripts {
		return usageErrorf("submit takes at most %d scripts at once (got %d)", maxBatchScripts, n)
	}
	dry := c.Bool("dry-run")
	var cn *conn
	var err error
	if !dry {
		if cn, err = r.connect(c); err != nil {
			return err
		}
	}
	type one struct {
		path string
		req  *model.Request
	}
	var ok []one
	failed := 0
	fail := func(path string, err error) {
		failed++
		fmt.Fprintf(r.Stderr, "error: %s: %v\n", path, err)
	}
	var dryViews []any
	for _, path := range paths {
		in := submitInput{opts: submitOptions{}, scriptPath: path}
		if in.script, err = r.readScript(path); err != nil {
			fail(path, err)
			continue
		}
		warnings, err := parseSbatch(path, in.script, in.opts)
		if err != nil {
			fail(path, err)
			continue
		}
		if err := r.applySubmitFlags(c, &in); err != nil {
			return err
		}
		if cn != nil {
			in.resolveTask = func(display string) (uint64, error) { return getAllocationID(c.Context, cn, display) }
		}
		req, err := resolveSubmit(in)
		if err != nil {
			fail(path, err)
			continue
		}
		if dry {
			warnings = append(warnings, r.resolveSiteDry(c, req)...)
		}
		warnings = append(warnings, submitWarnings(req, dry)...)
		for _, w := range warnings {
			fmt.Fprintf(r.Stderr, "warning: %s: %s\n", path, w)
		}
		if dry {
			dryViews = append(dryViews, dryRunOf(req, in, warnings))
			continue
		}
		ok = append(ok, one{path, req})
	}
	if dry {
		if err := r.emitAs(format, dryViews, func(w io.Writer, _ bool) error {
			for _, v := range dryViews {
				if err := dryRunTable(w, v.(dryRunView)); err != nil {
					return err
				}
				fmt.Fprintln(w)
			}
			return nil
		}); err != nil {
			return err
		}
		return batchExit(failed)
	}
	var views []submitView
	if len(ok) > 0 {
		br := &latticev1.SubmitBatchRequest{}
		for _, o := range ok {
			br.Requests = append(br.Requests, &latticev1.SubmitRequest{Request: requestProto(o.req), ClientRequestId: r.reqID()})
		}
		var resp *latticev1.SubmitBatchResponse
		err = cn.unary(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
			var err error
			resp, err = latticev1.NewAllocationServiceClient(cc).SubmitBatch(ctx, br)
			return err
		})
		if err != nil {
			return err
		}
		for i, res := range resp.GetResults() {
			if i >= len(ok) {
				break
			}
			if res.GetError() != "" {
				fail(ok[i].path, errors.New(res.GetError()))
				continue
			}
			v := submitView{DisplayID: res.GetDisplayId(), IDs: nonNil(res.GetIds()), Warnings: []string{}, Script: ok[i].path}
			if len(v.IDs) > 0 {
				v.ID = v.IDs[0]
			}
			views = append(views, v)
		}
	}
	if views == nil {
		views = []submitView{}
	}
	if c.Bool("parsable") {
		for _, v := range views {
			fmt.Fprintln(r.Stdout, v.DisplayID)
		}
		return batchExit(failed)
	}
	if err := r.emitAs(format, views, func(w io.Writer, _ bool) error {
		for _, v := range views {
			fmt.Fprintln(w, v.DisplayID)
		}
		fmt.Fprintf(r.Stderr, "submitted %d of %d scripts\n", len(views), len(paths))
		return nil
	}); err != nil {
		return err
	}
	return batchExit(failed)
}

// maxBatchScripts bounds one `submit A.sh B.sh ...` (the server's batch limit).
const maxBatchScripts = 10000

func batchExit(failed int) error {
	if failed > 0 {
		return fmt.Errorf("%d scripts not submitted", failed)
	}
	return nil
}

// submitView is `submit -o json` (the dry run prints dryRunView instead).
type submitView struct {
	ID        uint64   `json:"id"`
	DisplayID string   `json:"display_id"`
	IDs       []uint64 `json:"ids"`
	Warnings  []string `json:"warnings"`
	// Script is set when several scripts were submitted at once.
	Script string `json:"script,omitempty"`
}

func scriptLabel(path string) string {
	if path == "-" {
		return "<stdin>"
	}
	return path
}

func (r *runner) readScript(path string) (string, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(io.LimitReader(r.Stdin, model.MaxScriptBytes+1))
	} else {
		b, err = readFile(path)
	}
	if err != nil {
		return "", usageErrorf("SCRIPT %q is not a readable file (%v); to run a command, put it after --: latticectl submit [flags] -- %s",
			path, unwrapPathError(err), path)
	}
	return string(b), nil
}

// readFile reads at most one byte more than a script may hold, so an
// oversized file fails validation without being read whole.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return nil, fmt.Errorf("%s is a directory", path)
	}
	return io.ReadAll(io.LimitReader(f, model.MaxScriptBytes+1))
}

// unwrapPathError drops the "open PATH:" prefix the path is already named in.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func secondsDur(s int64) time.Duration { return time.Duration(s) * time.Second }

func nodeRange(lo, hi int) string {
	if lo == hi {
		return strconv.Itoa(lo)
	}
	return fmt.Sprintf("%d-%d", lo, hi)
}

// resolveSubmit turns the collected settings into a validated request.
// Errors are *model.FieldError (wrapped with the script line when the
// value came from an #SBATCH line).
func resolveSubmit(in submitInput) (*model.Request, error) {
	o := in.opts
	get := func(key, def string) (string, func(error) error) {
		opt, ok := o[key]
		if !ok {
			return def, func(err error) error { return err }
		}
		return opt.value, func(err error) error {
			if err == nil || opt.origin == "" {
				return err
			}
			return fmt.Errorf("%s: %w", opt.origin, err)
		}
	}
	req := &model.Request{WorkDir: in.cwd}
	var err error

	v, wrap := get(optNodes, "1")
	if req.NodesMin, req.NodesMax, err = model.ParseNodeRange(v); err != nil {
		return nil, wrap(err)
	}
	req.Walltime = model.DefaultWalltime
	if v, wrap := get(optWalltime, ""); hasKey(o, optWalltime) {
		if req.Walltime, err = model.ParseWalltime(v); err != nil {
			return nil, wrap(err)
		}
	}
	req.Name, _ = get(optName, "")
	req.VCluster, _ = get(optVCluster, "")
	req.Project, _ = get(optProject, "")
	req.Tenant, _ = get(optTenant, in.defaultTenant) // "" = the caller's default tenant

	req.PriorityClass = DefaultPriorityClass
	if v, wrap := get(optPriority, ""); v != "" {
		kind, val, _ := strings.Cut(v, ":")
		if kind == "qos" {
			// The server's QOS table decides; the built-in names give the
			// class shown by --dry-run, another name is kept as written.
			req.QOS = strings.TrimSpace(val)
			if !model.IsName(req.QOS) {
				return nil, wrap(&model.FieldError{Field: "qos", Value: val, Allowed: "a QOS name of letters, digits, '.', '-' and '_' (latticectl qos list)"})
			}
			if class, err := qosClass(req.QOS); err == nil {
				req.PriorityClass = class
			}
		} else {
			n, err := strconv.Atoi(strings.TrimSpace(val))
			if err != nil || n < 0 || n > model.MaxPriorityClass {
				return nil, wrap(&model.FieldError{Field: "priority-class", Value: val, Allowed: "an integer 0..10"})
			}
			req.PriorityClass = n
		}
	}
	v, wrap = get(optCheckpoint, "")
	if req.Checkpoint, err = model.ParseCheckpointMode(v); err != nil {
		return nil, wrap(err)
	}
	if v, wrap := get(optSignal, ""); hasKey(o, optSignal) {
		spec, err := model.ParseSignalSpec(v)
		if err != nil {
			return nil, wrap(err)
		}
		req.CheckpointSignal, req.CheckpointSignalSecs = spec.Signal, spec.Secs
		if !hasKey(o, optCheckpoint) {
			req.Checkpoint = model.CheckpointSignal // sbatch --signal alone: deliver that signal
		}
	}
	req.CheckpointHook, _ = get(optCkptHook, "")
	req.CheckpointWebhook, _ = get(optCkptWebhook, "")
	if v, _ := get(optRequeue, ""); v == "true" {
		req.Requeue = true
	}
	if v, wrap := get(optDependsOn, ""); v != "" {
		var task model.TaskResolver
		if in.resolveTask != nil {
			task = func(arr uint64, i int) (uint64, error) { return in.resolveTask(fmt.Sprintf("%d_%d", arr, i)) }
		}
		if req.DependsOn, req.DependencyAny, err = model.ParseDependencies(v, task); err != nil {
			return nil, wrap(err)
		}
	}
	if v, wrap := get(optArray, ""); hasKey(o, optArray) {
		if req.Array, err = model.ParseArraySpec(v); err != nil {
			return nil, wrap(err)
		}
	}
	v, wrap = get(optConstraint, "")
	if req.Constraints, err = model.ParseConstraint(v); err != nil {
		return nil, wrap(err)
	}
	if v, wrap := get(optGres, ""); hasKey(o, optGres) {
		if req.GPUType, req.GPUsPerNode, err = parseGres(v); err != nil {
			return nil, wrap(err)
		}
	}
	if v, wrap := get(optGPUsPerNode, ""); hasKey(o, optGPUsPerNode) {
		typ, n, err := parseGPUsPerNode(v)
		if err != nil {
			return nil, wrap(err)
		}
		req.GPUsPerNode = n
		if typ != "" {
			req.GPUType = typ
		}
	}
	if v, _ := get(optGPUType, ""); hasKey(o, optGPUType) {
		req.GPUType = strings.TrimSpace(v)
	}
	req.Stdout, _ = get(optStdout, "")
	req.Stderr, _ = get(optStderr, "")
	if v, _ := get(optHold, ""); v == "true" {
		req.Hold = true
	}
	if v, wrap := get(optBegin, ""); hasKey(o, optBegin) {
		t, err := model.ParseBeginTime(v, in.now)
		if err != nil {
			return nil, wrap(err)
		}
		if t.After(in.now) {
			req.BeginTime = t.UTC()
		}
	}
	if v, wrap := get(optNodeList, ""); hasKey(o, optNodeList) {
		if req.NodeList, err = model.ExpandHostlist(v); err != nil {
			return nil, wrap(err)
		}
		if !hasKey(o, optNodes) {
			// sbatch: -w alone asks for as many nodes as it names.
			req.NodesMin, req.NodesMax = len(req.NodeList), len(req.NodeList)
		}
	}
	if v, wrap := get(optExclude, ""); hasKey(o, optExclude) {
		if req.ExcludeNodes, err = model.ExpandHostlist(v); err != nil {
			return nil, wrap(&model.FieldError{Field: "exclude", Value: v, Allowed: "node names or Slurm hostlists such as node[001-004,007],gpu01"})
		}
	}
	if v, wrap := get(optReservation, ""); hasKey(o, optReservation) {
		req.Reservation = strings.TrimSpace(v)
		if !model.IsName(req.Reservation) {
			return nil, wrap(&model.FieldError{Field: "reservation", Value: v, Allowed: "a reservation name (latticectl reservation list)"})
		}
	}
	if v, wrap := get(optGPUs, ""); hasKey(o, optGPUs) {
		typ, n, err := parseGPUsPerNode(v)
		if err != nil {
			return nil, wrap(&model.FieldError{Field: "gpus", Value: v, Allowed: "[TYPE:]N with N >= 0, e.g. 8 or a100:8 (GPUs for the whole job)"})
		}
		// Spread over the nodes: per node, rounded up.
		req.GPUsPerNode = (n + req.NodesMin - 1) / max(req.NodesMin, 1)
		if typ != "" {
			req.GPUType = typ
		}
	}
	if v, wrap := get(optMailType, ""); hasKey(o, optMailType) {
		if req.MailType, err = model.ParseMailType(v); err != nil {
			return nil, wrap(err)
		}
	}
	req.MailUser, _ = get(optMailUser, "")
	if err := resolveTasks(req, o, get); err != nil {
		return nil, err
	}
	if len(in.command) == 0 && req.Stdout == "" {
		// sbatch's default: slurm-%j.out in the submit directory, stderr
		// with it unless --error says otherwise.
		req.Stdout = "slurm-%j.out"
		if req.Array != nil {
			req.Stdout = "slurm-%A_%a.out"
		}
	}
	if v, _ := get(optWorkDir, ""); v != "" {
		if !filepath.IsAbs(v) {
			v = filepath.Join(in.cwd, v)
		}
		req.WorkDir = filepath.Clean(v)
	}
	v, wrap = get(optExport, "")
	if req.Env, err = parseExport(v, in.environ); err != nil {
		return nil, wrap(err)
	}

	if len(in.command) > 0 {
		req.Command = slices.Clone(in.command)
	} else {
		req.Script = in.script
	}
	if req.Name == "" {
		req.Name = defaultName(in)
	}
	if err := req.CheckLimits(); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	return req, nil
}

func hasKey(o submitOptions, key string) bool {
	_, ok := o[key]
	return ok
}

// defaultName is the script's file name, or the command's first word
// without its directory.
func defaultName(in submitInput) string {
	switch {
	case len(in.command) > 0:
		return filepath.Base(in.command[0])
	case in.scriptPath == "-":
		return "stdin"
	case in.scriptPath != "":
		return filepath.Base(in.scriptPath)
	}
	return ""
}

const gresAllowed = "gpu[:TYPE][:N], e.g. gpu:4 or gpu:a100:4 (only GPUs are supported)"

// parseGres reads Slurm's --gres=gpu[:TYPE][:N].
func parseGres(s string) (typ string, n int, err error) {
	bad := &model.FieldError{Field: "gres", Value: s, Allowed: gresAllowed}
	found := false
	for _, item := range strings.Split(strings.TrimSpace(s), ",") {
		parts := strings.Split(strings.TrimSpace(item), ":")
		if parts[0] != "gpu" || found || len(parts) > 3 {
			return "", 0, bad
		}
		found = true
		n = 1
		switch len(parts) {
		case 2:
			if k, err := strconv.Atoi(parts[1]); err == nil {
				n = k
			} else {
				typ = parts[1]
			}
		case 3:
			typ = parts[1]
			if n, err = strconv.Atoi(parts[2]); err != nil {
				return "", 0, bad
			}
		}
		if n < 0 || (len(parts) > 1 && parts[len(parts)-1] == "") {
			return "", 0, bad
		}
	}
	return typ, n, nil
}

// parseGPUsPerNode reads Slurm's --gpus-per-node=[TYPE:]N.
func parseGPUsPerNode(s string) (typ string, n int, err error) {
	bad := &model.FieldError{Field: "gpus-per-node", Value: s, Allowed: "[TYPE:]N with N >= 0, e.g. 4 or a100:4"}
	v := strings.TrimSpace(s)
	if t, count, ok := strings.Cut(v, ":"); ok {
		typ, v = t, count
		if typ == "" {
			return "", 0, bad
		}
	}
	n, err = strconv.Atoi(v)
	if err != nil || n < 0 {
		return "", 0, bad
	}
	return typ, n, nil
}

// parseExport reads --export with sbatch's meaning: ALL (the default: the
// submitting environment), NONE, or a list of NAME (taken from the current
// environment) and NAME=VALUE, which passes only those unless ALL starts
// the list. The result is sorted KEY=VALUE with one entry per key, without
// latticectl's own credentials (ownCredentials).
func parseExport(s string, environ []string) ([]string, error) {
	v := strings.TrimSpace(s)
	if v == "" {
		v = "ALL"
	}
	if strings.EqualFold(v, "NONE") {
		return nil, nil
	}
	env := map[string]string{}
	current := map[string]string{}
	for _, e := range environ {
		if k, val, ok := strings.Cut(e, "="); ok {
			current[k] = val
		}
	}
	for i, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		switch {
		case i == 0 && strings.EqualFold(item, "ALL"):
			for k, val := range current {
				env[k] = val
			}
		case item == "" || strings.HasPrefix(item, "="):
			return nil, &model.FieldError{Field: "export", Value: s, Allowed: "NONE, ALL, or NAME[=VALUE][,...] (ALL may start the list)"}
		case strings.Contains(item, "="):
			k, val, _ := strings.Cut(item, "=")
			env[k] = val
		default:
			if val, ok := current[item]; ok {
				env[item] = val
			}
		}
	}
	out := make([]string, 0, len(env))
	for k, val := range env {
		if !ownCredentials[k] { // export_secrets.go
			out = append(out, k+"="+val)
		}
	}
	slices.Sort(out)
	return out, nil
}

// requestProto converts a request for the API. hot_data_fraction is sent
// as -1 (unknown) unless set.
func requestProto(req *model.Request) *latticev1.AllocationRequest {
	// A script that is not UTF-8 travels as its bytes, and as text with
	// those bytes as '?' for servers that predate script_bytes.
	text, raw := model.ScriptWire(req.ScriptContent())
	p := &latticev1.AllocationRequest{
		Name:                 req.Name,
		Tenant:               req.Tenant,
		Project:              req.Project,
		Vcluster:             req.VCluster,
		Command:              req.Command,
		Script:               text,
		ScriptBytes:          raw,
		WorkDir:              req.WorkDir,
		Env:                  req.Env,
		NodesMin:             int32(req.NodesMin),
		NodesMax:             int32(req.NodesMax),
		WalltimeSeconds:      int64(req.Walltime.Seconds()),
		PriorityClass:        int32(req.PriorityClass),
		Checkpoint:           string(req.Checkpoint),
		CheckpointMinutes:    req.CheckpointMinutes,
		HotDataFraction:      -1,
		CheckpointSignal:     req.CheckpointSignal,
		CheckpointSignalSecs: int32(req.CheckpointSignalSecs),
		CheckpointHook:       req.CheckpointHook,
		CheckpointWebhook:    req.CheckpointWebhook,
		Requeue:              req.Requeue,
		Constraints:          req.Constraints,
		GpuType:              req.GPUType,
		GpusPerNode:          int32(req.GPUsPerNode),
		Stdout:               req.Stdout,
		Stderr:               req.Stderr,
		BeginUnixMs:          unixMSOrZero(req.BeginTime),
		Hold:                 req.Hold,
		NodeList:             req.NodeList,
		ExcludeNodes:         req.ExcludeNodes,
		MailType:             req.MailType,
		MailUser:             req.MailUser,
		Qos:                  req.QOS,
		Reservation:          req.Reservation,
		Ntasks:               int32(req.Ntasks),
		NtasksPerNode:        int32(req.NtasksPerNode),
		CpusPerTask:          int32(req.CPUsPerTask),
		MemPerNodeMb:         req.MemPerNodeMB,
		MemPerCpuMb:          req.MemPerCPUMB,
		GpusPerTask:          int32(req.GPUsPerTask),
		Exclusive:            req.Exclusive,
		Overcommit:           req.Overcommit,
	}
	if req.HotDataFraction != nil {
		p.HotDataFraction = *req.HotDataFraction
	}
	for _, d := range req.DependsOn {
		p.DependsOn = append(p.DependsOn, &latticev1.Dependency{Condition: string(d.Condition), Ids: d.IDs, Task: d.Task})
	}
	p.DependencyAny = req.DependencyAny
	if a := req.Array; a != nil {
		p.Array = &latticev1.ArraySpec{Start: int32(a.Start), End: int32(a.End), Step: int32(a.Step), MaxConcurrent: int32(a.MaxConcurrent)}
	}
	return p
}

// dryRunView is `submit --dry-run -o json`: the resolved request, in the
// shape of CLI.md; entrypoint is the command line (shell-quoted) or the
// script's path.
type dryRunView struct {
	Name            string             `json:"name"`
	Tenant          string             `json:"tenant"`
	Project         string             `json:"project"`
	VCluster        string             `json:"vcluster"`
	NodesMin        int                `json:"nodes_min"`
	NodesMax        int                `json:"nodes_max"`
	WalltimeSeconds int64              `json:"walltime_seconds"`
	PriorityClass   int                `json:"priority_class"`
	Array           *model.ArraySpec   `json:"array"`
	DependsOn       []model.Dependency `json:"depends_on"`
	DependencyAny   bool               `json:"dependency_any,omitempty"`
	Constraints     []string           `json:"constraints"`
	GPUType         string             `json:"gpu_type"`
	GPUsPerNode     int                `json:"gpus_per_node"`
	Checkpoint      string             `json:"checkpoint"`
	// Checkpoint delivery (extensions): signal name and lead time, hook, webhook.
	CheckpointSignal     string   `json:"checkpoint_signal,omitempty"`
	CheckpointSignalSecs int      `json:"checkpoint_signal_secs,omitempty"`
	CheckpointHook       string   `json:"checkpoint_hook,omitempty"`
	CheckpointWebhook    string   `json:"checkpoint_webhook,omitempty"`
	Requeue              bool     `json:"requeue,omitempty"`
	Entrypoint           string   `json:"entrypoint"`
	Output               string   `json:"output"`
	Error                string   `json:"error"`
	Warnings             []string `json:"warnings"`

	// Extensions.
	EntrypointKind string   `json:"entrypoint_kind"` // command or script
	Command        []string `json:"command"`         // null for a script
	ScriptBytes    int      `json:"script_bytes"`
	WorkDir        string   `json:"work_dir"`
	Env            []string `json:"env"`
	// QOS as written (the server's table resolves it), begin time, hold,
	// node lists, mail.
	QOS          string     `json:"qos,omitempty"`
	Begin        *time.Time `json:"begin,omitempty"`
	Hold         bool       `json:"hold,omitempty"`
	NodeList     []string   `json:"nodelist,omitempty"`
	ExcludeNodes []string   `json:"exclude,omitempty"`
	MailType     string     `json:"mail_type,omitempty"`
	MailUser     string     `json:"mail_user,omitempty"`
	// Tasks (sbatch -n, --ntasks-per-node, -c, --mem, --mem-per-cpu, --gpus-per-task, -O).
	Ntasks        int   `json:"ntasks,omitempty"`
	NtasksPerNode int   `json:"ntasks_per_node,omitempty"`
	CPUsPerTask   int   `json:"cpus_per_task,omitempty"`
	MemPerNodeMB  int64 `json:"mem_per_node_mb,omitempty"`
	MemPerCPUMB   int64 `json:"mem_per_cpu_mb,omitempty"`
	GPUsPerTask   int   `json:"gpus_per_task,omitempty"`
	Overcommit    bool  `json:"overcommit,omitempty"`
}

func dryRunOf(req *model.Request, in submitInput, warnings []string) dryRunView {
	v := dryRunView{
		Name:             req.Name,
		Tenant:           req.Tenant,
		Project:          req.Project,
		VCluster:         req.VCluster,
		NodesMin:         req.NodesMin,
		NodesMax:         req.NodesMax,
		WalltimeSeconds:  int64(req.Walltime.Seconds()),
		PriorityClass:    req.PriorityClass,
		Array:            req.Array,
		DependsOn:        []model.Dependency{},
		Constraints:      nonNil(req.Constraints),
		GPUType:          req.GPUType,
		GPUsPerNode:      req.GPUsPerNode,
		Checkpoint:       string(req.Checkpoint),
		CheckpointSignal: req.CheckpointSignal, CheckpointSignalSecs: req.CheckpointSignalSecs,
		CheckpointHook: req.CheckpointHook, CheckpointWebhook: req.CheckpointWebhook, Requeue: req.Requeue,
		QOS: req.QOS, Hold: req.Hold, NodeList: req.NodeList, ExcludeNodes: req.ExcludeNodes,
		Ntasks: req.Ntasks, NtasksPerNode: req.NtasksPerNode, CPUsPerTask: req.CPUsPerTask, MemPerNodeMB: req.MemPerNodeMB,
		MemPerCPUMB: req.MemPerCPUMB, GPUsPerTask: req.GPUsPerTask, Overcommit: req.Overcommit,
		MailType: req.MailType, MailUser: req.MailUser,
		Output:   req.Stdout,
		Error:    req.Stderr,
		Warnings: nonNil(warnings),
		WorkDir:  req.WorkDir,
		Env:      nonNil(req.Env),
	}
	for _, d := range req.DependsOn {
		d.IDs = nonNil(d.IDs)
		v.DependsOn = append(v.DependsOn, d)
	}
	v.DependencyAny = req.DependencyAny
	if !req.BeginTime.IsZero() {
		b := req.BeginTime
		v.Begin = &b
	}
	if len(req.Command) > 0 {
		v.EntrypointKind, v.Command, v.Entrypoint = "command", req.Command, shellJoin(req.Command)
	} else {
		v.EntrypointKind, v.Entrypoint, v.ScriptBytes = "script", in.scriptPath, len(req.Script)
	}
	return v
}

func dryRunTable(w io.Writer, v dryRunView) error {
	kv(w, "Name", v.Name)
	kv(w, "Tenant", v.Tenant)
	kv(w, "Project", orDash(v.Project))
	kv(w, "vCluster", orDash(v.VCluster))
	kv(w, "Nodes", nodeRange(v.NodesMin, v.NodesMax))
	kv(w, "Walltime", fmt.Sprintf("%s (%ds)", model.FormatWalltime(secondsDur(v.WalltimeSeconds)), v.WalltimeSeconds))
	if v.QOS != "" {
		kv(w, "Priority class", fmt.Sprintf("%d (qos %s)", v.PriorityClass, v.QOS))
	} else {
		kv(w, "Priority class", v.PriorityClass)
	}
	if v.Begin != nil {
		kv(w, "Begin", v.Begin.Format(time.RFC3339))
	}
	if v.Hold {
		kv(w, "Hold", "yes (latticectl release ID lets it run)")
	}
	if len(v.NodeList) > 0 {
		kv(w, "Node list", model.CompressHostlist(v.NodeList))
	}
	if len(v.ExcludeNodes) > 0 {
		kv(w, "Exclude", model.CompressHostlist(v.ExcludeNodes))
	}
	if a := v.Array; a != nil {
		s := fmt.Sprintf("%d-%d:%d", a.Start, a.End, a.Step)
		if a.MaxConcurrent > 0 {
			s += fmt.Sprintf("%%%d", a.MaxConcurrent)
		}
		kv(w, "Array", s)
	}
	kv(w, "Depends on", orDash(model.FormatDependencies(v.DependsOn, v.DependencyAny)))
	kv(w, "Constraints", orDash(strings.Join(v.Constraints, "&")))
	if v.GPUsPerNode > 0 || v.GPUType != "" {
		kv(w, "GPUs per node", fmt.Sprintf("%d %s", v.GPUsPerNode, v.GPUType))
	}
	kv(w, "Checkpoint", checkpointSummary(v.Checkpoint, v.CheckpointSignal, v.CheckpointSignalSecs, v.CheckpointHook, v.CheckpointWebhook))
	kv(w, "Entrypoint", fmt.Sprintf("%s (%s)", v.Entrypoint, v.EntrypointKind))
	kv(w, "Work dir", v.WorkDir)
	kv(w, "Output", orDash(v.Output))
	kv(w, "Error", orDash(v.Error))
	if len(v.Env) > 0 {
		kv(w, "Env", strings.Join(v.Env, " "))
	}
	return nil
}

var shellSafe = lazyRegexp(`^[A-Za-z0-9_@%+=:,./-]+$`)

// shellJoin joins words into one shell-quoted command line.
func shellJoin(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		if shellSafe().MatchString(w) {
			out[i] = w
		} else {
			out[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}

// checkpointSummary says how a job is asked to checkpoint, in one line.
func checkpointSummary(mode, signal string, secs int, hook, webhook string) string {
	switch model.CheckpointMode(mode) {
	case model.CheckpointSignal:
		if signal == "" {
			signal = "USR1"
		}
		s := "signal " + signal
		if secs > 0 {
			s += fmt.Sprintf(", also %ds before the walltime ends", secs)
		}
		return s
	case model.CheckpointHook:
		return "hook: " + hook
	case model.CheckpointWebhook:
		return "webhook: " + webhook
	}
	return orDash(mode)
}

func unixMSOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// submitWarnings are the things a request keeps but that will not act as a
// Slurm user may expect.
func submitWarnings(req *model.Request, dry bool) []string {
	var out []string
	if dry && ((req.MailType != "" && req.MailType != "NONE") || req.MailUser != "") { // a submission hears it from the server
		out = append(out, "--mail-type/--mail-user are kept with the job; mail is sent only where the site configured a mail hook (latticed --mail-hook)")
	}
	return out
}

// resolveSiteDry resolves a dry run's QOS and partition names through the
// server's site configuration when one answers within a second; without a
// server it keeps them as written and says so. Built-in QOS names and no
// partition need no server.
func (r *runner) resolveSiteDry(c *cli.Context, req *model.Request) []string {
	_, builtin := qosClass(req.QOS)
	if (req.QOS == "" || builtin == nil) && req.VCluster == "" {
		return nil
	}
	addrs, err := parseServers(r.global(c, "server", "LATTICE_SERVER", DefaultServer))
	var site *latticev1.ListQOSResponse
	if err == nil {
		cred, _ := r.connCredentials(c)
		cn := newConn(addrs, cred, 0, r.DialOptions...)
		defer cn.close()
		ctx, cancel := context.WithTimeout(c.Context, time.Second)
		defer cancel()
		err = cn.unary(ctx, func(ctx context.Context, cc grpc.ClientConnInterface) error {
			var err error
			site, err = latticev1.NewAllocationServiceClient(cc).ListQOS(ctx, &latticev1.ListQOSRequest{})
			return err
		})
	}
	var out []string
	if err != nil || site == nil {
		if req.QOS != "" && builtin != nil {
			out = append(out, fmt.Sprintf("qos %q is not a built-in name and no server answered: kept as written; the server's QOS table (latticectl qos list) decides its priority class and limits at submit", req.QOS))
		}
		return out // a vCluster or partition name is kept as written, as ever
	}
	if req.QOS != "" {
		found := false
		for _, q := range site.GetQos() {
			if strings.EqualFold(q.GetName(), req.QOS) {
				found = true
				req.QOS, req.PriorityClass = q.GetName(), int(q.GetPriorityClass())
				if req.VCluster == "" {
					req.VCluster = q.GetVcluster()
				}
			}
		}
		if !found {
			out = append(out, fmt.Sprintf("qos %q is not in the server's QOS table (latticectl qos list): a submission would be refused", req.QOS))
		}
	}
	for _, p := range site.GetPartitions() {
		if p.GetName() == req.VCluster {
			out = append(out, fmt.Sprintf("partition %q is vCluster %s", req.VCluster, p.GetVcluster()))
			req.VCluster = p.GetVcluster()
			break
		}
	}
	return out
}
