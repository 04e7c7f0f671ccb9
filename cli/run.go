package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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
			"Each task gets LATTICE_RANK/SLURM_PROCID, LATTICE_LOCAL_RANK/SLURM_LOCALID, LATTICE_NTASKS/SLURM_NTASKS, " +
			"LATTICE_NODENAME/SLURMD_NODENAME, SLURM_NODEID and SLURM_STEP_ID, on top of this environment. " +
			"Exits with the worst task's code; one failing task stops the others unless --keep-going. " +
			"Ctrl-C stops every task.",
		ArgsUsage: "-- CMD [ARGS...]",
		Flags: append([]cli.Flag{
			&cli.IntFlag{Name: "nodes", Aliases: []string{"N"}, Usage: "nodes to run on (default: all the tasks need, up to the allocation's)"},
			&cli.IntFlag{Name: "ntasks", Aliases: []string{"n"}, Usage: "tasks (default: one per node, or nodes × --ntasks-per-node)"},
			&cli.IntFlag{Name: "ntasks-per-node", Usage: "tasks on each node"},
			&cli.BoolFlag{Name: "label", Aliases: []string{"l"}, Usage: "prefix every output line with its task's rank"},
			&cli.BoolFlag{Name: "keep-going", Aliases: []string{"K"}, Usage: "a failing task does not stop the others"},
		}, ptyFlags()...), // pty.go
		Action: r.runStep,
	}
}

func (r *runner) runStep(c *cli.Context) error {
	argv := c.Args().Slice()
	if len(argv) == 0 {
		return usageErrorf("usage: latticectl run [-N NODES] [-n TASKS] [--ntasks-per-node K] [--label] -- CMD [ARGS...]")
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
	for _, f := range []string{"nodes", "ntasks", "ntasks-per-node"} {
		if c.Int(f) < 0 {
			return usageErrorf("invalid --%s %d: allowed a count >= 1", f, c.Int(f))
		}
	}
	wd, _ := r.Getwd()
	req := &latticev1.LaunchStepRequest{AllocationId: id, Command: argv, Nodes: int32(c.Int("nodes")), Tasks: int32(c.Int("ntasks")),
		TasksPerNode: int32(c.Int("ntasks-per-node")), KeepGoing: c.Bool("keep-going"), Env: r.Environ(), WorkDir: wd}
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

// srunArgs translates srun's command line into `run`'s: the common flags
// (-N/--nodes, -n/--ntasks, --ntasks-per-node, -l/--label,
// -K/--kill-on-bad-exit) in every spelling (-n8, -n 8, --ntasks=8); flags
// about resources inside the allocation that Lattice does not split
// (cpus, memory, binding, MPI plugin, job name...) are accepted and
// ignored; the first other argument starts the command.
func srunArgs(args []string) ([]string, error) {
	out := []string{"run"}
	valueFlags := map[string]string{"-N": "--nodes", "--nodes": "--nodes", "-n": "--ntasks", "--ntasks": "--ntasks",
		"--ntasks-per-node": "--ntasks-per-node"}
	ignoredValue := map[string]bool{"-c": true, "--cpus-per-task": true, "--mem": true, "--mem-per-cpu": true, "--mpi": true,
		"--cpu-bind": true, "--cpu_bind": true, "-J": true, "--job-name": true, "-t": true, "--time": true, "--gpus-per-task": true,
		"--gres": true, "--distribution": true, "-m": true, "--export": true, "--jobid": true, "--mem-per-gpu": true, "--gpus": true}
	ignoredBool := map[string]bool{"--exclusive": true, "--overlap": true, "-u": true, "--unbuffered": true, "-Q": true, "--quiet": true, "-v": true}
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
		switch {
		case a == "-l" || a == "--label":
			out = append(out, "--label")
		case a == "-K" || a == "--kill-on-bad-exit" || a == "--kill-on-bad-exit=1":
			// the default
		case a == "--kill-on-bad-exit=0":
			out = append(out, "--keep-going")
		case valueFlags[name] != "" || ignoredValue[name]:
			if !hasValue {
				if i+1 >= len(args) {
					return nil, usageErrorf("srun: %s needs a value", name)
				}
				i++
				value = args[i]
			}
			if flag := valueFlags[name]; flag != "" {
				if name == "-N" || name == "--nodes" {
					value, _, _ = strings.Cut(value, "-") // MIN-MAX: the minimum
				}
				if n, err := strconv.Atoi(value); err != nil || n < 1 {
					return nil, &exitError{code: ExitUsage, err: &model.FieldError{Field: strings.TrimLeft(name, "-"), Value: value, Allowed: "a count >= 1"}}
				}
				out = append(out, flag, value)
			}
		case ignoredBool[name]:
		default:
			return nil, usageErrorf("srun: unsupported option %s (Lattice's srun takes -N, -n, --ntasks-per-node, -l, -K and ignores resource options)", a)
		}
	}
	return nil, usageErrorf("usage: srun [-N NODES] [-n TASKS] [--ntasks-per-node K] [-l] CMD [ARGS...]")
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
