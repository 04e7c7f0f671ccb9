package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"google.golang.org/grpc"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// Interactive allocations (latticectl alloc, and Slurm's salloc name for
// it): the allocation's nodes are held for a shell or a command that runs
// here, on the submit host, with the allocation's environment, so that
// srun (latticectl run) inside it launches steps on the nodes. Nothing
// runs on the nodes until then; the allocation ends with the shell.

// allocFlags are salloc's options that Lattice acts on.
func allocFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "nodes", Aliases: []string{"N"}, Usage: "nodes: N or MIN-MAX (default 1)"},
		&cli.IntFlag{Name: "ntasks", Aliases: []string{"n"}, Usage: "tasks srun starts by default inside the allocation (SLURM_NTASKS)"},
		&cli.IntFlag{Name: "ntasks-per-node", Usage: "tasks per node srun starts by default (SLURM_NTASKS_PER_NODE)"},
		&cli.StringFlag{Name: "time", Aliases: []string{"t"}, Usage: "time limit, Slurm's forms (30, 1:00:00, 1-0)"},
		&cli.StringFlag{Name: "partition", Aliases: []string{"p", "vcluster"}, Usage: "vCluster (partition)"},
		&cli.StringFlag{Name: "account", Aliases: []string{"A"}, Usage: "tenant (account) to charge"},
		&cli.StringFlag{Name: "job-name", Aliases: []string{"J"}, Usage: "name (default: the command's)"},
		&cli.StringFlag{Name: "nodelist", Aliases: []string{"w"}, Usage: "only these nodes (a Slurm hostlist)"},
		&cli.StringFlag{Name: "constraint", Aliases: []string{"C"}, Usage: "node features"},
		&cli.StringFlag{Name: "qos", Aliases: []string{"q"}, Usage: "the site QOS"},
		&cli.StringFlag{Name: "reservation", Usage: "run in this node reservation (latticectl reservation list)"},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"Q"}, Usage: "no salloc: messages"},
	}
}

func (r *runner) allocCommand() *cli.Command {
	return &cli.Command{
		Name:  "alloc",
		Usage: "get an interactive allocation and run a shell (or CMD) here with it (like salloc)",
		Description: "Submits an interactive allocation, waits until it runs (\"Granted job allocation N\" on stderr), " +
			"then runs CMD, or your $SHELL, on this host with the allocation's environment (SLURM_JOB_ID, SLURM_JOB_NODELIST, " +
			"SLURM_NNODES, LATTICE_ALLOC_ID...): srun or latticectl run inside it launches steps on the nodes, and " +
			"latticectl run --pty gives a terminal on the first one. The allocation ends when CMD exits; the site's idle " +
			"timeout ends one that runs no step for too long. Exits with CMD's exit code.",
		ArgsUsage: "[--] [CMD [ARGS...]]",
		Flags:     allocFlags(),
		Action:    r.alloc,
	}
}

// interactiveRequest builds the submission of an interactive allocation
// from alloc's flags (also run --pty's outside an allocation).
func (r *runner) interactiveRequest(c *cli.Context, name string, opts map[string]string) (*latticev1.AllocationRequest, error) {
	in := submitInput{opts: submitOptions{}, command: []string{name}}
	for flag, key := range map[string]string{"nodes": optNodes, "time": optWalltime, "partition": optVCluster, "account": optTenant,
		"job-name": optName, "nodelist": optNodeList, "constraint": optConstraint, "qos": "qos", "reservation": optReservation} {
		if v, ok := opts[flag]; ok {
			in.opts.set(key, v, "")
		}
	}
	if v, ok := explicit(c, "tenant"); ok {
		in.opts.set(optTenant, v, "")
	}
	if _, ok := in.opts[optTenant]; !ok {
		in.defaultTenant = r.tenant(c)
	}
	in.now = r.Now()
	var err error
	if in.cwd, err = r.Getwd(); err != nil {
		return nil, fmt.Errorf("cannot read the current directory: %w", err)
	}
	if r.Environ != nil {
		in.environ = r.Environ()
	}
	req, err := resolveSubmit(in)
	if err != nil {
		return nil, err
	}
	p := requestProto(req)
	p.Interactive = true
	return p, nil
}

// grantAllocation submits an interactive allocation and waits until it
// runs, telling the user as salloc does (srun, for a terminal step outside
// an allocation, only says that it waits). Interrupted while it waits, it
// cancels the request.
func (r *runner) grantAllocation(c *cli.Context, cn *conn, req *latticev1.AllocationRequest, prog string, quiet bool) (*latticev1.Allocation, error) {
	waited := false
	say := func(format string, args ...any) {
		if !quiet && (prog == "salloc" || waited) {
			fmt.Fprintf(r.Stderr, prog+": "+format+"\n", args...)
		}
	}
	var resp *latticev1.SubmitResponse
	sr := &latticev1.SubmitRequest{Request: req, ClientRequestId: r.reqID()}
	err := cn.unary(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		var err error
		resp, err = latticev1.NewAllocationServiceClient(cc).Submit(ctx, sr)
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, w := range resp.GetWarnings() {
		fmt.Fprintf(r.Stderr, "warning: %s\n", w)
	}
	if len(resp.GetIds()) == 0 {
		return nil, errors.New("the server created no allocation")
	}
	id := resp.GetIds()[0]
	display := strconv.FormatUint(id, 10)
	say("Pending job allocation %s", display)
	told, planned, asked, submitted := false, false, time.Time{}, time.Now()
	for {
		a, err := getAllocation(c.Context, cn, display)
		if err != nil {
			if c.Context.Err() != nil {
				r.endAllocation(cn, id, "")
				say("Job allocation %s has been revoked.", display)
				return nil, &exitError{code: ExitInterrupted, err: errors.New("interrupted while waiting; the allocation request is cancelled")}
			}
			return nil, err
		}
		st, _ := model.ParseAllocState(a.GetState())
		switch {
		case st == model.StateRunning:
			say("Granted job allocation %s", display)
			return a, nil
		case st.Terminal():
			msg := fmt.Sprintf("job allocation %s ended %s before it started", display, st)
			if a.GetReason() != "" {
				msg += " (" + a.GetReason() + ")"
			}
			return nil, errors.New(msg)
		case !told && time.Since(submitted) > time.Second: // not granted at once
			told, waited = true, true
			say("job %s queued and waiting for resources", display)
		case !planned && time.Since(asked) > 2*time.Second:
			// When the scheduler expects it to start (latticectl explain).
			asked = time.Now()
			var e *latticev1.Explanation
			_ = cn.unary(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
				var err error
				e, err = latticev1.NewAllocationServiceClient(cc).Explain(ctx, &latticev1.ExplainRequest{Id: display})
				return err
			})
			if ms := e.GetExpectedStartUnixMs(); ms != 0 {
				planned = true
				start := time.UnixMilli(ms)
				say("job %s expected to start at %s (in %s)", display, start.In(r.Location).Format("2006-01-02T15:04:05"),
					max(time.Until(start), 0).Round(time.Second))
			}
		}
		select {
		case <-c.Context.Done():
			r.endAllocation(cn, id, "")
			say("Job allocation %s has been revoked.", display)
			return nil, &exitError{code: ExitInterrupted, err: errors.New("interrupted while waiting; the allocation request is cancelled")}
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// endAllocation cancels an allocation this command created (its end, not
// the user's Ctrl-C, so it does not use the command's context).
func (r *runner) endAllocation(cn *conn, id uint64, say string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = cn.unary(ctx, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		_, err := latticev1.NewAllocationServiceClient(cc).Cancel(ctx, &latticev1.CancelRequest{Ids: []string{strconv.FormatUint(id, 10)}})
		return err
	})
	if say != "" {
		fmt.Fprintln(r.Stderr, say)
	}
}

// allocationEnv is the environment of a shell or a step using allocation
// a from outside it: Lattice's and Slurm's job variables, and where the
// servers are.
func (r *runner) allocationEnv(c *cli.Context, a *latticev1.Allocation, tasks, perNode int) []string {
	var env []string
	if r.Environ != nil {
		env = r.Environ()
	}
	id := strconv.FormatUint(a.GetId(), 10)
	nodes := a.GetNodes()
	req := a.GetRequest()
	n := strconv.Itoa(len(nodes))
	hostlist := model.CompressHostlist(nodes)
	env = append(env,
		"LATTICE_ALLOC_ID="+id, "LATTICE_ALLOC_NAME="+req.GetName(), "LATTICE_NODELIST="+strings.Join(nodes, ","),
		"LATTICE_NUM_NODES="+n, "LATTICE_VCLUSTER="+req.GetVcluster(), "LATTICE_TENANT="+req.GetTenant(),
		"SLURM_JOB_ID="+id, "SLURM_JOBID="+id, "SLURM_JOB_NAME="+req.GetName(),
		"SLURM_JOB_NODELIST="+hostlist, "SLURM_NODELIST="+hostlist, "SLURM_NNODES="+n, "SLURM_JOB_NUM_NODES="+n,
		"SLURM_JOB_PARTITION="+req.GetVcluster(), "SLURM_JOB_ACCOUNT="+req.GetTenant(),
	)
	if wd, err := r.Getwd(); err == nil {
		env = append(env, "SLURM_SUBMIT_DIR="+wd, "LATTICE_SUBMIT_DIR="+wd)
	}
	if host, err := os.Hostname(); err == nil {
		env = append(env, "SLURM_SUBMIT_HOST="+host)
	}
	if tasks > 0 {
		env = append(env, "SLURM_NTASKS="+strconv.Itoa(tasks), "SLURM_NPROCS="+strconv.Itoa(tasks))
	}
	if perNode > 0 {
		env = append(env, "SLURM_NTASKS_PER_NODE="+strconv.Itoa(perNode))
	}
	// srun inside talks to the same servers, as the same user.
	env = append(env, "LATTICE_SERVER="+r.global(c, "server", "LATTICE_SERVER", DefaultServer))
	for _, g := range []struct{ flag, env string }{{"token", "LATTICE_TOKEN"}, {"cacert", "LATTICE_CACERT"}, {"cert", "LATTICE_CERT"}, {"key", "LATTICE_KEY"}} {
		if v, ok := explicit(c, g.flag); ok {
			env = append(env, g.env+"="+v)
		}
	}
	return env
}

// alloc is salloc: grant, run the shell here, end the allocation.
func (r *runner) alloc(c *cli.Context) error {
	argv := c.Args().Slice()
	if len(argv) == 0 {
		sh := r.Getenv("SHELL")
		if sh == "" {
			sh = "/bin/sh"
		}
		argv = []string{sh}
	}
	for _, f := range []string{"ntasks", "ntasks-per-node"} {
		if c.Int(f) < 0 {
			return usageErrorf("invalid --%s %d: allowed a count >= 1", f, c.Int(f))
		}
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return &exitError{code: 127, err: fmt.Errorf("salloc: %s: command not found", argv[0])}
	}
	name := argv[0][strings.LastIndexByte(argv[0], '/')+1:]
	opts := map[string]string{}
	for _, f := range []string{"nodes", "time", "partition", "account", "job-name", "nodelist", "constraint", "qos", "reservation"} {
		if c.IsSet(f) {
			opts[f] = c.String(f)
		}
	}
	req, err := r.interactiveRequest(c, name, opts)
	if err != nil {
		return err
	}
	cn, err := r.connect(c)
	if err != nil {
		return err
	}
	quiet := c.Bool("quiet")
	a, err := r.grantAllocation(c, cn, req, "salloc", quiet)
	if err != nil {
		return err
	}
	id, display := a.GetId(), strconv.FormatUint(a.GetId(), 10)
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Env = r.allocationEnv(c, a, c.Int("ntasks"), c.Int("ntasks-per-node"))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = r.Stdin, r.Stdout, r.Stderr
	if err := cmd.Start(); err != nil {
		r.endAllocation(cn, id, "")
		return fmt.Errorf("salloc: start %s: %w", argv[0], err)
	}
	// The shell owns the terminal now: a Ctrl-C typed there is its own
	// (latticectl's context ends with it; only the shell's exit ends us).
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	revoked := r.watchAllocation(cn, id)
	var waitErr error
	select {
	case waitErr = <-exited:
	case why := <-revoked:
		if !quiet {
			fmt.Fprintf(r.Stderr, "salloc: Job allocation %s has been revoked (%s).\n", display, why)
		}
		_ = cmd.Process.Signal(syscall.SIGHUP)
		select {
		case waitErr = <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			waitErr = <-exited
		}
	}
	msg := ""
	if !quiet {
		msg = "salloc: Relinquishing job allocation " + display
	}
	r.endAllocation(cn, id, msg)
	code := 0
	var ee *exec.ExitError
	switch {
	case waitErr == nil:
	case errors.As(waitErr, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		} else {
			code = ee.ExitCode()
		}
	default:
		return waitErr
	}
	if code != 0 {
		return &exitError{code: code, err: errReported} // the shell's own code, as salloc
	}
	return nil
}

// watchAllocation reports (once) why an allocation stopped running: it
// ended (the idle timeout, its time limit, a cancel) while its shell runs.
func (r *runner) watchAllocation(cn *conn, id uint64) <-chan string {
	out := make(chan string, 1)
	go func() {
		display := strconv.FormatUint(id, 10)
		for {
			time.Sleep(time.Second)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			a, err := getAllocation(ctx, cn, display)
			cancel()
			if err != nil {
				continue
			}
			st, _ := model.ParseAllocState(a.GetState())
			if st.Terminal() {
				why := string(st)
				if a.GetReason() != "" {
					why += ", " + a.GetReason()
				}
				out <- why
				return
			}
		}
	}()
	return out
}
