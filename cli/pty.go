package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"
	"google.golang.org/grpc"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// Terminal steps (latticectl run --pty, srun --pty) and attach: the
// command runs on a pseudo-terminal on the allocation's first node, held
// by its agent; this side puts the local terminal in raw mode and relays
// bytes both ways over TerminalService.Terminal, so ^C, ^Z and the like
// reach the remote terminal as keystrokes and its line discipline turns
// them into signals, as on a local terminal. Window-size changes
// (SIGWINCH) follow.

// ptyFlags are run's flags for terminal steps, and for the allocation a
// terminal step outside one creates first (as srun does).
func ptyFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "pty", Usage: "run CMD on a pseudo-terminal on the allocation's first node, attached to this terminal (srun --pty)"},
		&cli.StringFlag{Name: "time", Aliases: []string{"t"}, Usage: "outside an allocation: the time limit of the one created"},
		&cli.StringFlag{Name: "partition", Aliases: []string{"p"}, Usage: "outside an allocation: the vCluster (partition) of the one created"},
		&cli.StringFlag{Name: "account", Aliases: []string{"A"}, Usage: "outside an allocation: the tenant (account) of the one created"},
		&cli.StringFlag{Name: "job-name", Aliases: []string{"J"}, Usage: "outside an allocation: the name of the one created"},
		&cli.StringFlag{Name: "reservation", Usage: "outside an allocation: the node reservation of the one created"},
	}
}

// srunPtyArgs takes from srun's arguments the options that matter for a
// terminal step outside an allocation (-p, -t, -A, -J and their long
// forms), which `run` takes, when --pty is among the options; the rest
// goes through srunArgs.
func srunPtyArgs(args []string) (run, rest []string) {
	names := map[string]string{"-p": "--partition", "--partition": "--partition", "-t": "--time", "--time": "--time",
		"-A": "--account", "--account": "--account", "-J": "--job-name", "--job-name": "--job-name", "--reservation": "--reservation"}
	pty := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || len(a) < 2 || a[0] != '-' {
			break
		}
		pty = pty || a == "--pty"
		if names[a] != "" || srunValueOptions[a] {
			i++ // its value
		}
	}
	if !pty {
		return nil, args
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || len(a) < 2 || a[0] != '-' {
			return run, append(rest, args[i:]...)
		}
		if a == "--pty" {
			run = append(run, a)
			continue
		}
		name, value, has := strings.Cut(a, "=")
		if !has && len(a) > 2 && a[1] != '-' {
			name, value, has = a[:2], a[2:], true
		}
		flag := names[name]
		if flag == "" {
			rest = append(rest, a)
			continue
		}
		if !has {
			if i+1 >= len(args) {
				return run, append(rest, a) // srunArgs says what is missing
			}
			i++
			value = args[i]
		}
		run = append(run, flag+"="+value)
	}
	return run, rest
}

// srunValueOptions are srun's options that take a separate value, so
// that looking for --pty among the options skips their values.
var srunValueOptions = map[string]bool{"-N": true, "--nodes": true, "-n": true, "--ntasks": true, "--ntasks-per-node": true,
	"-c": true, "--cpus-per-task": true, "--mem": true, "--mem-per-cpu": true, "--mem-per-gpu": true, "--mpi": true,
	"--cpu-bind": true, "--cpu_bind": true, "--gpus-per-task": true, "--gpus": true, "-G": true, "--gres": true,
	"--distribution": true, "-m": true, "--export": true, "--jobid": true, "-w": true, "--nodelist": true, "-x": true,
	"--exclude": true, "-o": true, "--output": true, "-e": true, "--error": true, "-i": true, "--input": true,
	"-D": true, "--chdir": true, "-C": true, "--constraint": true, "-q": true, "--qos": true}

// runPty runs argv as a terminal step: in the allocation LATTICE_ALLOC_ID,
// or else in a new interactive allocation that ends with it.
func (r *runner) runPty(c *cli.Context, argv []string) error {
	for _, f := range []string{"ntasks", "ntasks-per-node"} {
		if c.Int(f) > 1 {
			return usageErrorf("invalid --%s %d with --pty: a terminal step runs one task (allowed 1)", f, c.Int(f))
		}
	}
	cn, err := r.connect(c)
	if err != nil {
		return err
	}
	env := []string(nil)
	if r.Environ != nil {
		env = r.Environ()
	}
	var id uint64
	if idText := r.Getenv("LATTICE_ALLOC_ID"); idText != "" {
		if id, err = strconv.ParseUint(idText, 10, 64); err != nil {
			return usageErrorf("invalid LATTICE_ALLOC_ID %q: allowed an allocation id", idText)
		}
	} else {
		// Like srun outside an allocation: one first, for as long as the
		// command runs.
		opts := map[string]string{}
		if c.IsSet("nodes") {
			opts["nodes"] = strconv.Itoa(c.Int("nodes"))
		}
		for _, f := range []string{"time", "partition", "account", "job-name", "reservation"} {
			if c.IsSet(f) {
				opts[f] = c.String(f)
			}
		}
		req, err := r.interactiveRequest(c, filepath.Base(argv[0]), opts)
		if err != nil {
			return err
		}
		a, err := r.grantAllocation(c, cn, req, "srun", false)
		if err != nil {
			return err
		}
		id = a.GetId()
		defer r.endAllocation(cn, id, "")
		env = r.allocationEnv(c, a, 0, 0)
	}
	wd, _ := r.Getwd()
	open := &latticev1.TerminalOpen{Launch: &latticev1.LaunchStepRequest{AllocationId: id, Command: argv, Nodes: 1, Tasks: 1,
		Env: env, WorkDir: wd}}
	end, err := r.terminalSession(c, cn, open)
	if err != nil {
		return err
	}
	return stepEndError(end)
}

// stepEndError is latticectl's exit for a terminal step's end: the
// task's own exit code, silently (the terminal showed what happened),
// with a line when the step was stopped rather than ended by itself.
func stepEndError(end *latticev1.StepEnd) error {
	if end.ExitCode == 0 {
		return nil
	}
	if end.Message != "" {
		return &exitError{code: int(end.ExitCode), err: fmt.Errorf("step %s, exit code %d: %s", end.State, end.ExitCode, end.Message)}
	}
	return &exitError{code: int(end.ExitCode), err: errReported}
}

func (r *runner) attachCommand() *cli.Command {
	return &cli.Command{
		Name:  "attach",
		Usage: "join a running step's output, and its terminal's input (like sattach)",
		Description: "Shows the output of step STEP of allocation ID (default: its newest running step) from now on; " +
			"for a terminal step (run --pty) what you type goes to it too. Leaving (end of input, or Ctrl-] ) " +
			"does not stop the step. Exits with the step's exit code when it ends.",
		ArgsUsage: "ID[.STEP]",
		Action:    r.attach,
	}
}

func (r *runner) attach(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageErrorf("usage: latticectl attach ID[.STEP]")
	}
	arg := c.Args().First()
	idText, stepText, hasStep := strings.Cut(arg, ".")
	id, err := strconv.ParseUint(idText, 10, 64)
	if err != nil || id == 0 {
		return usageErrorf("invalid id %q: allowed ID or ID.STEP, e.g. 12 or 12.0", arg)
	}
	step := int64(-1)
	if hasStep {
		if step, err = strconv.ParseInt(stepText, 10, 32); err != nil || step < 0 {
			return usageErrorf("invalid step %q: allowed ID.STEP with STEP >= 0, e.g. 12.0", arg)
		}
	}
	cn, err := r.connect(c)
	if err != nil {
		return err
	}
	end, err := r.terminalSession(c, cn, &latticev1.TerminalOpen{AttachAllocationId: id, AttachStepId: int32(step)})
	if err != nil {
		return err
	}
	if end == nil {
		return nil // left before the step ended
	}
	return stepEndError(end)
}

// detachKey (Ctrl-]) leaves an attached terminal without stopping its step.
const detachKey = 0x1d

// terminalSession relays a terminal stream until the step ends; nil end
// when an attach is left first.
func (r *runner) terminalSession(c *cli.Context, cn *conn, open *latticev1.TerminalOpen) (*latticev1.StepEnd, error) {
	attach := open.Launch == nil
	in, _ := r.Stdin.(*os.File)
	tty := in != nil && term.IsTerminal(int(in.Fd()))
	if tty {
		if w, h, err := term.GetSize(int(in.Fd())); err == nil {
			open.Size = &latticev1.TerminalSize{Rows: uint32(h), Cols: uint32(w)}
		}
		old, err := term.MakeRaw(int(in.Fd()))
		if err != nil {
			return nil, fmt.Errorf("put the terminal in raw mode: %w", err)
		}
		defer term.Restore(int(in.Fd()), old)
	}
	var end *latticev1.StepEnd
	var left atomic.Bool
	// Without a terminal here, Ctrl-C reaches latticectl as SIGINT: like
	// srun, it is passed to the step's foreground job, and a second one
	// within a second stops the step. (In raw mode ^C is a keystroke.)
	streamCtx := c.Context
	var interrupts chan os.Signal
	if !tty && !attach {
		streamCtx = context.WithoutCancel(c.Context)
		interrupts = make(chan os.Signal, 2)
		signal.Notify(interrupts, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(interrupts)
	}
	err := cn.stream(streamCtx, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		st, err := latticev1.NewTerminalServiceClient(cc).Terminal(ctx)
		if err != nil {
			return err
		}
		if err := st.Send(&latticev1.TerminalInput{Msg: &latticev1.TerminalInput_Open{Open: open}}); err != nil {
			return err
		}
		first, err := st.Recv()
		if err != nil {
			return err // nothing started: another address may be tried
		}
		if first.GetStarted() == nil {
			return errors.New("the server answered a terminal without starting it")
		}
		// One sender: gRPC streams take one Send at a time.
		sends := make(chan *latticev1.TerminalInput, 64)
		go func() {
			for {
				select {
				case m := <-sends:
					if st.Send(m) != nil {
						return
					}
				case <-ctx.Done():
					return
				}
			}
		}()
		send := func(m *latticev1.TerminalInput) {
			select {
			case sends <- m:
			case <-ctx.Done():
			}
		}
		if r.Stdin != nil {
			go func() {
				buf := make([]byte, 4096)
				for {
					n, err := r.Stdin.Read(buf)
					if n > 0 {
						data := append([]byte(nil), buf[:n]...)
						if attach && tty {
							if i := indexByte(data, detachKey); i >= 0 {
								if i > 0 {
									send(&latticev1.TerminalInput{Msg: &latticev1.TerminalInput_Data{Data: data[:i]}})
								}
								left.Store(true)
								cancel()
								return
							}
						}
						send(&latticev1.TerminalInput{Msg: &latticev1.TerminalInput_Data{Data: data}})
					}
					if err != nil {
						if attach && !tty {
							return // an attach without a terminal only watches
						}
						send(&latticev1.TerminalInput{Msg: &latticev1.TerminalInput_CloseStdin{CloseStdin: true}})
						return
					}
				}
			}()
		}
		if interrupts != nil {
			go func() {
				var last time.Time
				for {
					select {
					case sig := <-interrupts:
						if time.Since(last) < time.Second || sig == syscall.SIGTERM {
							cancel() // the server stops the step
							return
						}
						last = time.Now()
						send(&latticev1.TerminalInput{Msg: &latticev1.TerminalInput_Signal{Signal: int32(syscall.SIGINT)}})
					case <-ctx.Done():
						return
					}
				}
			}()
		}
		if tty {
			winch := make(chan os.Signal, 1)
			signal.Notify(winch, syscall.SIGWINCH)
			defer signal.Stop(winch)
			go func() {
				for {
					select {
					case <-winch:
						if w, h, err := term.GetSize(int(in.Fd())); err == nil {
							send(&latticev1.TerminalInput{Msg: &latticev1.TerminalInput_Resize{Resize: &latticev1.TerminalSize{Rows: uint32(h), Cols: uint32(w)}}})
						}
					case <-ctx.Done():
						return
					}
				}
			}()
		}
		for {
			m, err := st.Recv()
			if err == io.EOF {
				if attach {
					return nil
				}
				return errors.New("the server ended the terminal's stream without the step's end")
			}
			if err != nil {
				if left.Load() {
					return nil
				}
				// Never start a second copy on another address.
				return &exitError{code: ExitError, err: fmt.Errorf("terminal stream broken: %w", fromRPC(err))}
			}
			switch msg := m.Msg.(type) {
			case *latticev1.StepOutput_Data:
				w := r.Stdout
				if msg.Data.Stderr {
					w = r.Stderr
				}
				_, _ = w.Write(msg.Data.Data)
			case *latticev1.StepOutput_End:
				end = msg.End
				return nil
			}
		}
	})
	if err != nil && c.Context.Err() != nil && !left.Load() && end == nil {
		return nil, &exitError{code: ExitInterrupted, err: errors.New("interrupted; the terminal step is stopped")}
	}
	return end, err
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}
