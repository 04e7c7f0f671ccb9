package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// Slurm's own commands. The latticectl binary answers to Slurm's command
// names (sbatch, squeue, scancel, sacct, sinfo, scontrol, sacctmgr, sprio,
// sshare, srun, salloc) when it is invoked under them — a link named
// `squeue` to latticectl — so that workflow tools and scripts that run
// Slurm's commands and parse what they print work unchanged. Each command
// reads Slurm's options with getopt_long's rules and prints Slurm's output
// formats; docs/slurm-commands.md compares them field by field with Slurm
// 22.05. They skip latticectl's command tree entirely (it is not built),
// so a call costs only its own work.

// SlurmCommands are the names latticectl answers to as Slurm.
var SlurmCommands = []string{"sbatch", "squeue", "scancel", "sacct", "sinfo", "scontrol", "sacctmgr", "sprio", "sshare", "srun", "salloc"}

// MainAs runs latticectl as invoked under the program name argv0 (only
// its base name matters): Slurm's commands by their names, latticectl
// otherwise. args are without the program name.
func MainAs(ctx context.Context, env Env, argv0 string, args []string) int {
	name := filepath.Base(argv0)
	if !slices.Contains(SlurmCommands, name) {
		return Main(ctx, env, args)
	}
	switch name {
	case "srun": // the srun translation of `latticectl srun`
		return Main(ctx, env, append([]string{"srun"}, args...))
	case "salloc":
		return salloc(ctx, env, args)
	}
	return SlurmMain(ctx, env, name, args)
}

// SlurmMain runs Slurm command name with args and returns its exit code.
// Errors print as Slurm prints them ("squeue: error: ...") and exit 1, as
// Slurm's commands do for every failure.
func SlurmMain(ctx context.Context, env Env, name string, args []string) (code int) {
	if env.Now == nil {
		env.Now = time.Now
	}
	if env.Location == nil {
		env.Location = time.Local
	}
	r := &runner{Env: env, args: args}
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(r.Stderr, "%s: error: internal error: %v (please report it with the command you ran; LATTICE_DEBUG=1 shows where)\n", name, p)
			if r.Getenv != nil && r.Getenv("LATTICE_DEBUG") != "" {
				fmt.Fprintf(r.Stderr, "%s", debug.Stack())
			}
			code = 1
		}
	}()
	s := &slurmRun{runner: r, name: name, c: slurmContext(ctx)}
	var err error
	switch name {
	case "sbatch":
		err = s.sbatch(args)
	case "squeue":
		err = s.squeue(args)
	case "scancel":
		err = s.scancel(args)
	case "sacct":
		err = s.sacct(args)
	case "sinfo":
		err = s.sinfo(args)
	case "scontrol":
		err = s.scontrol(args)
	case "sacctmgr":
		err = s.sacctmgr(args)
	case "sprio":
		err = s.sprio(args)
	case "sshare":
		err = s.sshare(args)
	default:
		err = fmt.Errorf("unknown Slurm command %q", name)
	}
	if r.conn != nil {
		r.conn.close()
	}
	if err == nil {
		return 0
	}
	if errors.Is(err, errReported) {
		if c := ExitCode(err); c != ExitUsage {
			return c
		}
		return 1
	}
	if ExitCode(err) == ExitInterrupted {
		return ExitInterrupted
	}
	var h *slurmHelp
	if errors.As(err, &h) {
		fmt.Fprint(r.Stdout, h.text)
		return 0
	}
	var pl *slurmPlain
	if errors.As(err, &pl) {
		fmt.Fprintln(r.Stderr, pl.msg)
		return 1
	}
	var u *slurmUsage
	if errors.As(err, &u) {
		fmt.Fprintf(r.Stderr, "%s: %s\nTry \"%s --help\" for more information\n", name, u.msg, name)
		if name == "sbatch" {
			return 255 // sbatch exits with -1 on a bad command line
		}
		return 1
	}
	fmt.Fprintf(r.Stderr, "%s: error: %v\n", name, err)
	return 1
}

// slurmRun is one run of a Slurm command.
type slurmRun struct {
	*runner
	name string
	c    *cli.Context // for the runner's helpers: no flags, the environment decides
	me   *latticev1.AccountUser
}

// slurmContext is a command context without flags: the runner's helpers
// (connect, tenant) then read only the environment (LATTICE_SERVER,
// LATTICE_TOKEN, LATTICE_TENANT, ...), as Slurm's commands read
// SLURM_CONF.
func slurmContext(ctx context.Context) *cli.Context {
	c := cli.NewContext(nil, flag.NewFlagSet("slurm", flag.ContinueOnError), nil)
	c.Context = ctx
	return c
}

// slurmUsage is a usage error printed as getopt prints it, followed by
// Slurm's "Try ... --help" line.
type slurmUsage struct{ msg string }

func (u *slurmUsage) Error() string { return u.msg }

// slurmHelp is --help or --usage: its text goes to stdout, exit 0.
type slurmHelp struct{ text string }

func (h *slurmHelp) Error() string { return "help" }

// ---- getopt_long ----

// Argument kinds of an option.
const (
	noArg = iota
	needArg
	optArg
)

// sopt is one option of a Slurm command: its long name, its one-letter
// name (0 for none), whether it takes an argument, and the key its values
// are stored under (the long name when empty).
type sopt struct {
	long  string
	short byte
	arg   int
	key   string
}

func (o sopt) id() string {
	if o.key != "" {
		return o.key
	}
	return o.long
}

// sargs are the parsed options (by key, every value in order; "" for an
// option without argument) and the operands.
type sargs struct {
	vals  map[string][]string
	order []string // keys in the order given
	pos   []string
}

func (a *sargs) has(key string) bool { _, ok := a.vals[key]; return ok }

// last is whichever of keys was given last, "" for none.
func (a *sargs) last(keys ...string) string {
	for i := len(a.order) - 1; i >= 0; i-- {
		if slices.Contains(keys, a.order[i]) {
			return a.order[i]
		}
	}
	return ""
}

// get is the last value of key (Slurm: the last one wins).
func (a *sargs) get(key string) string {
	v := a.vals[key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// list is every value of key, split at commas (-j 1,2 -j 3).
func (a *sargs) list(key string) []string {
	var out []string
	for _, v := range a.vals[key] {
		out = append(out, splitList(v)...)
	}
	return out
}

// getopt parses args as glibc's getopt_long does: long options by any
// unambiguous prefix, --opt=value or --opt value, bundled short options
// (-hl), a short option's value joined (-o%i) or next; "--" ends the
// options. With inOrder (getopt's "+") the first operand ends them too
// (sbatch: what follows the script are its arguments); otherwise operands
// may come anywhere.
// parse reads a Slurm command's options as getopt does and answers --help
// (with usage) and --version itself, as every Slurm command does. A nil
// *sargs means the command has nothing more to do: err is then the usage
// error, the help, or nil after the version.
func (s *slurmRun) parse(opts []sopt, args []string, inOrder bool, usage string) (*sargs, error) {
	a, err := getopt(opts, args, inOrder)
	switch {
	case err != nil:
		return nil, err
	case a.has("help"):
		return nil, &slurmHelp{usage}
	case a.has("version"):
		fmt.Fprintf(s.Stdout, "slurm 22.05.8 (lattice %s)\n", Version)
		return nil, nil
	}
	return a, nil
}

func getopt(opts []sopt, args []string, inOrder bool) (*sargs, error) {
	out := &sargs{vals: map[string][]string{}}
	add := func(o sopt, v string) {
		out.vals[o.id()] = append(out.vals[o.id()], v)
		out.order = append(out.order, o.id())
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			out.pos = append(out.pos, args[i+1:]...)
			return out, nil
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a[2:], "=")
			o, err := findLong(opts, name)
			if err != nil {
				return nil, err
			}
			switch o.arg {
			case noArg:
				if hasVal {
					return nil, &slurmUsage{fmt.Sprintf("option '--%s' doesn't allow an argument", o.long)}
				}
			case needArg:
				if !hasVal {
					if i+1 >= len(args) {
						return nil, &slurmUsage{fmt.Sprintf("option '--%s' requires an argument", o.long)}
					}
					i++
					val = args[i]
				}
			}
			add(o, val)
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				o, ok := findShort(opts, a[j])
				if !ok {
					return nil, &slurmUsage{fmt.Sprintf("invalid option -- '%c'", a[j])}
				}
				if o.arg == noArg {
					add(o, "")
					continue
				}
				val := a[j+1:]
				if val == "" && o.arg == needArg {
					if i+1 >= len(args) {
						return nil, &slurmUsage{fmt.Sprintf("option requires an argument -- '%c'", a[j])}
					}
					i++
					val = args[i]
				}
				add(o, val)
				break
			}
		default:
			if inOrder {
				out.pos = append(out.pos, args[i:]...)
				return out, nil
			}
			out.pos = append(out.pos, a)
		}
	}
	return out, nil
}

func findLong(opts []sopt, name string) (sopt, error) {
	var matches []sopt
	for _, o := range opts {
		if o.long == name {
			return o, nil
		}
		if strings.HasPrefix(o.long, name) && name != "" {
			matches = append(matches, o)
		}
	}
	switch {
	case len(matches) == 1:
		return matches[0], nil
	case len(matches) > 1:
		// Prefixes of options stored under one key are the same option.
		if !slices.ContainsFunc(matches, func(o sopt) bool { return o.id() != matches[0].id() || o.arg != matches[0].arg }) {
			return matches[0], nil
		}
		return sopt{}, &slurmUsage{fmt.Sprintf("option '--%s' is ambiguous", name)}
	}
	return sopt{}, &slurmUsage{fmt.Sprintf("unrecognized option '--%s'", name)}
}

func findShort(opts []sopt, c byte) (sopt, bool) {
	for _, o := range opts {
		if o.short == c && c != 0 {
			return o, true
		}
	}
	return sopt{}, false
}

// ---- links ----

// slurmCommandsCommand is `latticectl slurm-commands install DIR`: the
// links under Slurm's names.
func (r *runner) slurmCommandsCommand() *cli.Command {
	return &cli.Command{
		Name:  "slurm-commands",
		Usage: "Slurm's command names (sbatch, squeue, sacct, ...) as links to latticectl",
		Subcommands: []*cli.Command{{
			Name:      "install",
			Usage:     "make links named sbatch, squeue, scancel, sacct, sinfo, scontrol, sacctmgr, sprio, sshare, srun and salloc in DIR; put DIR first on PATH",
			ArgsUsage: "DIR",
			Flags:     []cli.Flag{&cli.BoolFlag{Name: "force", Usage: "replace files of those names already in DIR"}},
			Action: func(c *cli.Context) error {
				if err := needArgs(c, 1, 1, "DIR"); err != nil {
					return err
				}
				self, err := os.Executable()
				if err != nil {
					return fmt.Errorf("cannot find the latticectl binary: %w", err)
				}
				if p, err := filepath.EvalSymlinks(self); err == nil {
					self = p
				}
				return InstallSlurmCommands(c.Args().First(), self, c.Bool("force"), r.Stderr)
			},
		}},
	}
}

// InstallSlurmCommands makes DIR/NAME a symbolic link to target for every
// Slurm command name. An existing link to target is kept; anything else
// of that name is refused unless force.
func InstallSlurmCommands(dir, target string, force bool, log interface{ Write([]byte) (int, error) }) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot create %s: %w", dir, err)
	}
	for _, name := range SlurmCommands {
		p := filepath.Join(dir, name)
		if cur, err := os.Readlink(p); err == nil && cur == target {
			continue
		}
		if _, err := os.Lstat(p); err == nil {
			if !force {
				return fmt.Errorf("%s already exists and is not a link to %s (use --force to replace it)", p, target)
			}
			if err := os.Remove(p); err != nil {
				return err
			}
		}
		if err := os.Symlink(target, p); err != nil {
			return fmt.Errorf("cannot link %s: %w", p, err)
		}
	}
	fmt.Fprintf(log, "linked %s in %s to %s; put %s first on PATH\n", strings.Join(SlurmCommands, ", "), dir, target, dir)
	return nil
}
