package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"
	"google.golang.org/grpc"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

func (r *runner) runCommand() *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "inside an allocation: launch a step of CMD on its nodes (like srun)",
		Description: "Runs CMD as tasks on the allocation's nodes (the allocation is LATTICE_ALLOC_ID). " +
			"The task count defaults to the job's (SLURM_NTASKS, SLURM_NTASKS_PER_NODE), else one per node. " +
			"Each task gets LATTICE_RANK/SLURM_PROCID, LATTICE_LOCAL_RANK/SLURM_LOCALID, LATTICE_NTASKS/SLURM_NTASKS, " +
			"LATTICE_NODENAME/SLURMD_NODENAME, SLURM_NODEID, SLURM_STEP_ID and the step's SLURM_STEP_* layout, on top of this environment. " +
			"CMD is looked up in the working directory when it has a '/', else in PATH. " +
			"Exits with the worst task's code; one failing task stops the others unless --keep-going. " +
			"Ctrl-C stops every task.",
		ArgsUsage: "-- CMD [ARGS...]",
		Flags:     append(runFlags(), ptyFlags()...), // pty.go
		Action:    r.runStep,
	}
}

// runFlags are `latticectl run`'s flags; srunArgs maps srun's onto them.
func runFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "nodes", Aliases: []string{"N"}, Usage: "nodes to run on (default: all the tasks need, up to the allocation's)"},
		&cli.IntFlag{Name: "ntasks", Aliases: []string{"n"}, Usage: "tasks (default: SLURM_NTASKS, or one per node, or nodes × --ntasks-per-node)"},
		&cli.IntFlag{Name: "ntasks-per-node", Usage: "tasks on each node (default: SLURM_NTASKS_PER_NODE)"},
		&cli.StringFlag{Name: "nodelist", Aliases: []string{"w"}, Usage: "run on these nodes of the allocation (a hostlist, node[1-2])"},
		&cli.IntFlag{Name: "cpus-per-task", Aliases: []string{"c"}, Usage: "CPUs of each task: SLURM_CPUS_PER_TASK (default: the job's)"},
		&cli.StringFlag{Name: "mpi", Usage: "PMI for MPI direct launch: none or pmi2 (PMI-1 and PMI-2 over PMI_FD) (default: SLURM_MPI_TYPE, else none)"},
		&cli.StringFlag{Name: "export", Usage: "environment of the tasks: ALL, NONE, or NAME[=VALUE][,...] (ALL may start the list); SLURM_* always pass", DefaultText: "ALL"},
		&cli.StringFlag{Name: "cpu-bind", Usage: "accepted; tasks are not bound (none)"},
		&cli.BoolFlag{Name: "multi-prog", Usage: "CMD is a configuration file: lines RANKS PROGRAM [ARGS] (%t the rank, %o its offset), as srun --multi-prog"},
		&cli.BoolFlag{Name: "label", Aliases: []string{"l"}, Usage: "prefix every output line with its task's rank"},
		&cli.BoolFlag{Name: "keep-going", Aliases: []string{"K"}, Usage: "a failing task does not stop the others"},
	}
}

func (r *runner) runStep(c *cli.Context) error {
	argv := c.Args().Slice()
	if len(argv) == 0 {
		return usageErrorf("usage: latticectl run [-N NODES] [-n TASKS] [--ntasks-per-node K] [-w NODES] [--mpi=pmi2] [--label] -- CMD [ARGS...]")
	}
	if c.Bool("pty") {
		return r.runPty(c, argv) // pty.go
	}
	idText := r.Getenv("LATTICE_ALLOC_ID")
	if idText == "" {
		return usageErrorf("latticectl run launches a step inside an allocation, and LATTICE_ALLOC_ID is not set: run it from a job's script")
	}
	id, err := strconv.ParseUint(idText, 10, 64)
	if err != nil {
		return usageErrorf("invalid LATTICE_ALLOC_ID %q: allowed an allocation id", idText)
	}
	req, err := r.stepRequest(c, id, argv)
	if err != nil {
		return err
	}
	return r.launchStep(c, req)
}

// stepRequest builds a step's launch from run's flags, with srun's
// defaults from the job's environment.
func (r *runner) stepRequest(c *cli.Context, id uint64, argv []string) (*latticev1.LaunchStepRequest, error) {
	for _, f := range []string{"nodes", "ntasks", "ntasks-per-node", "cpus-per-task"} {
		if c.Int(f) < 0 {
			return nil, usageErrorf("invalid --%s %d: allowed a count >= 1", f, c.Int(f))
		}
	}
	req := &latticev1.LaunchStepRequest{AllocationId: id, Command: argv, Nodes: int32(c.Int("nodes")), Tasks: int32(c.Int("ntasks")),
		TasksPerNode: int32(c.Int("ntasks-per-node")), KeepGoing: c.Bool("keep-going"), CpusPerTask: int32(c.Int("cpus-per-task")),
		Mpi: c.String("mpi")}
	// srun's input variables: the job's tasks are the step's default.
	envCount := func(name string) int32 {
		n, err := strconv.Atoi(r.Getenv(name))
		if err != nil || n < 1 {
			return 0
		}
		return int32(n)
	}
	// As srun: the job's task count applies unless -n says otherwise, even
	// with -N (the step's layout then ignores a --ntasks-per-node that does
	// not match); -N or -w alone without the job having tasks: one task per node.
	if !c.IsSet("ntasks") {
		req.Tasks = envCount("SLURM_NTASKS")
	}
	if !c.IsSet("ntasks-per-node") {
		req.TasksPerNode = envCount("SLURM_NTASKS_PER_NODE")
	}
	if !c.IsSet("cpus-per-task") {
		req.CpusPerTask = envCount("SLURM_CPUS_PER_TASK")
	}
	if !c.IsSet("mpi") {
		req.Mpi = r.Getenv("SLURM_MPI_TYPE")
	}
	if v := c.String("nodelist"); v != "" {
		nodes, err := model.ExpandHostlist(v)
		if err != nil {
			return nil, &exitError{code: ExitUsage, err: &model.FieldError{Field: "nodelist", Value: v, Allowed: "node names or a hostlist such as node[001-004]"}}
		}
		req.NodeList = nodes
	}
	var err error
	if req.Env, err = stepExport(c.String("export"), r.Environ()); err != nil {
		return nil, &exitError{code: ExitUsage, err: err}
	}
	if c.Bool("label") {
		req.Env = append(req.Env, "SLURM_LABELIO=1")
	}
	req.WorkDir, _ = r.Getwd()
	if c.Bool("multi-prog") {
		if len(argv) != 1 {
			return nil, usageErrorf("--multi-prog takes one configuration file, got %q", strings.Join(argv, " "))
		}
		b, err := os.ReadFile(argv[0])
		if err != nil {
			return nil, usageErrorf("--multi-prog: %v", unwrapPathError(err))
		}
		if _, err := model.ParseMultiProg(string(b)); err != nil {
			return nil, &exitError{code: ExitUsage, err: fmt.Errorf("--multi-prog %s: %w", argv[0], err)}
		}
		req.MultiProg = string(b)
	}
	return req, nil
}

// stepExport is srun's --export: ALL (the default), NONE or a list; the
// SLURM_* and LATTICE_* variables pass in every case, as srun keeps them.
func stepExport(spec string, environ []string) ([]string, error) {
	env, err := parseExport(spec, environ)
	if err != nil {
		return nil, err
	}
	if v := strings.TrimSpace(spec); v == "" || strings.HasPrefix(strings.ToUpper(v), "ALL") {
		return env, nil
	}
	have := map[string]bool{}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		have[k] = true
	}
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if !have[k] && (strings.HasPrefix(k, "SLURM_") || strings.HasPrefix(k, "LATTICE_")) {
			env = append(env, kv)
		}
	}
	return env, nil
}

// launchStep runs a step and relays its output; it returns the step's
// exit as an error carrying the worst task's code.
func (r *runner) launchStep(c *cli.Context, req *latticev1.LaunchStepRequest) error {
	cn, err := r.connect(c)
	if err != nil {
		return err
	}
	out := &labelWriter{w: r.Stdout, label: c.Bool("label")}
	errOut := &labelWriter{w: r.Stderr, label: c.Bool("label")}
	var end *latticev1.StepEnd
	err = cn.stream(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		st, err := latticev1.NewStepServiceClient(cc).Launch(ctx, req)
		if err != nil {
			return err
		}
		started := false
		for {
			m, err := st.Recv()
			if err == io.EOF {
				return errors.New("the server ended the step's stream without its end")
			}
			if err != nil {
				if started {
					// Never launch a second copy on another address.
					return &exitError{code: ExitError, err: fmt.Errorf("step stream broken: %w", fromRPC(err))}
				}
				return err
			}
			switch msg := m.Msg.(type) {
			case *latticev1.StepOutput_Started:
				started = true
			case *latticev1.StepOutput_Data:
				w := out
				if msg.Data.Stderr {
					w = errOut
				}
				w.write(msg.Data.Rank, msg.Data.Data)
			case *latticev1.StepOutput_End:
				end = msg.End
				return nil
			}
		}
	})
	out.flush()
	errOut.flush()
	if err != nil {
		if c.Context.Err() != nil {
			return &exitError{code: ExitInterrupted, err: errors.New("interrupted; the step's tasks are stopped")}
		}
		return err
	}
	if end.ExitCode != 0 {
		msg := fmt.Sprintf("step %s, exit code %d", end.State, end.ExitCode)
		if end.Message != "" {
			msg += ": " + end.Message
		}
		return &exitError{code: int(end.ExitCode), err: errors.New(msg)}
	}
	return nil
}

// labelWriter writes tasks' output, each line prefixed with "RANK: " when
// labelling (a line split over chunks is kept until its end).
type labelWriter struct {
	w       io.Writer
	label   bool
	partial map[int32][]byte
}

func (l *labelWriter) write(rank int32, data []byte) {
	if !l.label {
		_, _ = l.w.Write(data)
		return
	}
	if l.partial == nil {
		l.partial = map[int32][]byte{}
	}
	buf := append(l.partial[rank], data...)
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			break
		}
		fmt.Fprintf(l.w, "%d: %s", rank, buf[:i+1])
		buf = buf[i+1:]
	}
	l.partial[rank] = append([]byte(nil), buf...)
}

func (l *labelWriter) flush() {
	for rank, b := range l.partial {
		if len(b) > 0 {
			fmt.Fprintf(l.w, "%d: %s\n", rank, b)
		}
	}
	l.partial = nil
}

// srunOption is how one srun option maps onto `latticectl run`.
type srunOption struct {
	flag  string // run's flag; "" = accepted and ignored
	value bool   // takes a value
	count bool   // the value is a count >= 1
}

// srunOptions are the srun options Lattice's srun takes, in every
// spelling (-n8, -n 8, --ntasks=8). Options about resources inside the
// allocation that Lattice does not divide (memory, GPUs, binding, job
// name...) are accepted and ignored; any other is refused, naming it.
var srunOptions = map[string]srunOption{
	"-N": {flag: "--nodes", value: true, count: true}, "--nodes": {flag: "--nodes", value: true, count: true},
	"-n": {flag: "--ntasks", value: true, count: true}, "--ntasks": {flag: "--ntasks", value: true, count: true},
	"--ntasks-per-node": {flag: "--ntasks-per-node", value: true, count: true},
	"-c":                {flag: "--cpus-per-task", value: true, count: true}, "--cpus-per-task": {flag: "--cpus-per-task", value: true, count: true},
	"-w": {flag: "--nodelist", value: true}, "--nodelist": {flag: "--nodelist", value: true},
	"--mpi":         {flag: "--mpi", value: true},
	"--reservation": {flag: "--reservation", value: true},
	"--export":      {flag: "--export", value: true},
	"--cpu-bind":    {flag: "--cpu-bind", value: true}, "--cpu_bind": {flag: "--cpu-bind", value: true},
	"-l": {flag: "--label"}, "--label": {flag: "--label"},
	"--multi-prog": {flag: "--multi-prog"},
	// accepted, ignored
	"--mem": {value: true}, "--mem-per-cpu": {value: true}, "--mem-per-gpu": {value: true},
	"-J": {value: true}, "--job-name": {value: true}, "-t": {value: true}, "--time": {value: true},
	"--gpus-per-task": {value: true}, "--gres": {value: true}, "--gpus": {value: true}, "-G": {value: true},
	"--distribution": {value: true}, "-m": {value: true}, "--jobid": {value: true},
	"--input": {value: true}, "-i": {value: true}, "--gpu-bind": {value: true}, "--hint": {value: true},
	"--exclusive": {}, "--overlap": {}, "-u": {}, "--unbuffered": {}, "-Q": {}, "--quiet": {}, "-v": {}, "--verbose": {},
	"--whole": {}, "-O": {}, "--overcommit": {},
}

// srunArgs translates srun's command line into `run`'s (srunOptions);
// the first argument that is not an option starts the command.
func srunArgs(args []string) ([]string, error) {
	out := []string{"run"}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(append(out, "--"), args[i+1:]...), nil
		}
		if len(a) < 2 || a[0] != '-' {
			return append(append(out, "--"), args[i:]...), nil
		}
		name, value, hasValue := strings.Cut(a, "=")
		if !hasValue && len(a) > 2 && a[1] != '-' { // -n8
			name, value, hasValue = a[:2], a[2:], true
		}
		// --kill-on-bad-exit[=0|1], -K[0|1]: a failing task stops the others (the default).
		if name == "-K" || name == "--kill-on-bad-exit" {
			if hasValue && value == "0" {
				out = append(out, "--keep-going")
			} else if hasValue && value != "1" {
				return nil, usageErrorf("srun: invalid %s value %q: allowed 0 or 1", name, value)
			}
			continue
		}
		opt, ok := srunOptions[name]
		if !ok {
			return nil, usageErrorf("srun: unsupported option %s (Lattice's srun takes -N, -n, --ntasks-per-node, -c, -w, --mpi, --export, -l, -K, --multi-prog and ignores resource options)", a)
		}
		if !opt.value {
			if hasValue && len(name) == 2 && name[1] != '-' {
				return nil, usageErrorf("srun: %s takes no value (got %q)", name, a)
			}
			if opt.flag != "" {
				out = append(out, opt.flag)
			}
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return nil, usageErrorf("srun: %s needs a value", name)
			}
			i++
			value = args[i]
		}
		if opt.count {
			if name == "-N" || name == "--nodes" {
				value, _, _ = strings.Cut(value, "-") // MIN-MAX: the minimum
			}
			if n, err := strconv.Atoi(value); err != nil || n < 1 {
				return nil, &exitError{code: ExitUsage, err: &model.FieldError{Field: strings.TrimLeft(name, "-"), Value: value, Allowed: "a count >= 1"}}
			}
		}
		if opt.flag != "" {
			out = append(out, opt.flag+"="+value)
		}
	}
	return nil, usageErrorf("usage: srun [-N NODES] [-n TASKS] [--ntasks-per-node K] [-w NODES] [--mpi=pmi2] [-l] CMD [ARGS...]")
}

// runArgs puts "--" before the command of `latticectl run` when it is
// missing, so the command's own flags (sh -c) stay the command's.
func runArgs(flags []cli.Flag, args []string) []string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if parts := splitJoined(flags, a); len(parts) > 1 {
			args = concat(args[:i:i], parts, args[i+1:])
			a = args[i]
		}
		if a == "--" {
			return args
		}
		if len(a) > 1 && a[0] == '-' {
			if !strings.Contains(a, "=") && takesValue(flags, strings.TrimLeft(a, "-")) {
				i++
			}
			continue
		}
		return append(append(append([]string(nil), args[:i]...), "--"), args[i:]...)
	}
	return args
}
