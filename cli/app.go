package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/pki"
)

// Version is printed by `latticectl --version`; cmd/latticectl may set it.
var Version = "dev"

// VerifyBackup checks a backup file written by `quorum backup`. The quorum
// package owns the file format; cmd/latticectl-offline wires it in (when
// nil, `quorum verify` runs in latticectl-offline: offline.go).
var VerifyBackup func(path string) error

// RestoreBackup rebuilds a member's data directory from a backup file. The
// quorum package owns it; cmd/latticectl-offline wires it in (when nil,
// `quorum restore` runs in latticectl-offline).
var RestoreBackup func(path, dataDir string) error

// Env is what latticectl reads from its surroundings. Tests replace it.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
	// Environ lists KEY=VALUE pairs for submit --export ALL.
	Environ  func() []string
	Getwd    func() (string, error)
	Now      func() time.Time
	Location *time.Location // for table times
	// DialOptions are added to every gRPC connection (tests dial in memory).
	DialOptions []grpc.DialOption
}

// OSEnv is the real process environment.
func OSEnv() Env {
	return Env{
		Stdin:    os.Stdin,
		Stdout:   os.Stdout,
		Stderr:   os.Stderr,
		Getenv:   os.Getenv,
		Environ:  os.Environ,
		Getwd:    os.Getwd,
		Now:      time.Now,
		Location: time.Local,
	}
}

// runner is one invocation of latticectl.
type runner struct {
	Env
	// afterDash counts the positional arguments that came after "--" on
	// the command line (submit -- CMD ARGS...); sawDash says whether "--"
	// was there at all.
	afterDash int
	sawDash   bool
	requestID string
	conn      *conn
	// shape is how listings print their table (--no-header, --parsable).
	shape tableShape
	// args are Main's arguments as given, for latticectl-offline.
	args []string
	// ran is the top-level command the arguments name (prepared by
	// reorder), nil when they name none.
	ran *cli.Command
}

// Main runs latticectl with args (without the program name) and returns
// the process exit code. Errors are printed on env.Stderr as one line.
func Main(ctx context.Context, env Env, args []string) (code int) {
	if env.Now == nil {
		env.Now = time.Now
	}
	if env.Location == nil {
		env.Location = time.Local
	}
	r := &runner{Env: env, args: args}
	defer func() {
		// A bug must not greet a user with a Go stack trace: one line, exit
		// 1, and the trace only when LATTICE_DEBUG asks for it.
		if p := recover(); p != nil {
			fmt.Fprintf(r.Stderr, "latticectl: internal error: %v (please report it with the command you ran; LATTICE_DEBUG=1 shows where)\n", p)
			if r.Getenv != nil && r.Getenv("LATTICE_DEBUG") != "" {
				fmt.Fprintf(r.Stderr, "%s", debug.Stack())
			}
			code = ExitError
		}
	}()
	app := r.app()
	if len(args) > 0 && args[0] == "srun" { // the srun shim on a job's PATH
		ptyArgs, rest := srunPtyArgs(args[1:]) // pty.go
		translated, err := srunArgs(rest)
		if err != nil {
			fmt.Fprintf(r.Stderr, "srun: %v\n", err)
			return ExitCode(err)
		}
		args = append(append(translated[:1:1], ptyArgs...), translated[1:]...)
	}
	if len(args) > 0 && args[0] == "run" {
		args = append([]string{"run"}, runArgs(r.runCommand().Flags, args[1:])...)
	}
	if len(args) > 0 && args[0] == "alloc" { // salloc: its command's flags stay its own
		args = append([]string{"alloc"}, runArgs(allocFlags(), args[1:])...)
	}
	args = r.reorder(app.Flags, app.Commands, args)
	if r.ran == nil {
		prepareAll(app)
	}
	err := app.RunContext(ctx, append([]string{app.Name}, args...))
	if r.conn != nil {
		r.conn.close()
	}
	code = ExitCode(err)
	if err != nil && code != ExitInterrupted && !errors.Is(err, errReported) {
		fmt.Fprintf(r.Stderr, "%s: %v\n", app.Name, err)
	}
	return code
}

// App returns the latticectl command tree bound to the process
// environment, for documentation and completion generators. Main is what
// runs it.
func App() *cli.App {
	r := &runner{Env: OSEnv()}
	app := r.app()
	prepareAll(app)
	return app
}

func (r *runner) app() *cli.App {
	app := &cli.App{
		Name:                 "latticectl",
		Usage:                "submit, inspect and administer work on a Lattice cluster",
		Version:              Version,
		Writer:               r.Stdout,
		ErrWriter:            r.Stderr,
		Reader:               r.Stdin,
		EnableBashCompletion: true,
		HideHelpCommand:      false,
		Flags:                globalFlags(),
		Metadata:             map[string]any{"runner": r},
		ExitErrHandler:       func(*cli.Context, error) {},
		OnUsageError:         onUsageError,
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				word := c.Args().First()
				return usageErrorf("unknown command %q%s; run `latticectl --help` for the list", word, didYouMean(suggest(word, commandNames(c.App.Commands))))
			}
			return cli.ShowAppHelp(c)
		},
		Commands: []*cli.Command{
			r.submitCommand(),
			r.statusCommand(),
			r.showCommand(),
			r.explainCommand(),
			r.cancelCommand(),
			r.checkpointCommand(),
			r.runCommand(),
			r.allocCommand(),  // interactive.go
			r.attachCommand(), // pty.go
			r.dagCommand(),
			r.serviceCommand(), // service.go
			r.logsCommand(),
			r.historyCommand(),
			r.statCommand(),
			r.nodesCommand(),
			r.vclusterCommand(),
			r.quorumCommand(),
			r.powerCommand(),
			r.usageCommand(),
			r.tenantCommand(),
			r.replayCommand(),
			r.completionCommand(),
			r.slurmCommandsCommand(),
			r.dashboardCommand(),
			r.reservationCommand(), // reservation.go
		},
	}
	app.Commands = append(app.Commands, r.jobControlCommands()...) // hold, release, requeue, signal, update, qos, partition
	app.Commands = append(app.Commands, r.suspendCommands()...)    // suspend, resume (usage_job.go)
	app.Commands = append(app.Commands, r.accountCommands()...)    // user, token, whoami
	fastNames(app.Flags)
	return app
}

// prepareAll prepares every command. Main prepares only the command it
// runs, found by reorder (preparing all of them was half the cost of
// building the tree, paid by every latticectl run), and all of them when
// it runs none (help, completion, an unknown word).
func prepareAll(app *cli.App) {
	for _, c := range app.Commands {
		prepare(c)
	}
}

// prepare gives every command the global flags (urfave/cli v2 has no
// persistent flags, and users type `latticectl status -o json`), turns
// usage errors into exit code 2, and makes commands with subcommands
// refuse unknown subcommands.
func prepare(c *cli.Command) {
	have := make(map[string]bool, 2*len(c.Flags))
	for _, f := range c.Flags {
		for _, n := range flagNames(f) {
			have[n] = true
		}
	}
	for _, f := range globalFlags() {
		g := f.(*cli.StringFlag)
		if !have[g.Name] && !slices.ContainsFunc(g.Aliases, func(a string) bool { return have[a] }) {
			// Accepted everywhere, listed once in `latticectl --help`.
			g.Hidden = true
			c.Flags = append(c.Flags, f)
		}
	}
	fastNames(c.Flags)
	if c.OnUsageError == nil {
		c.OnUsageError = onUsageError
	}
	if len(c.Subcommands) > 0 && c.Action == nil {
		c.Action = func(cc *cli.Context) error {
			if cc.Args().Present() {
				word := cc.Args().First()
				return usageErrorf("unknown command %q for %q%s; run `%s --help`", word, cc.Command.HelpName,
					didYouMean(suggest(word, commandNames(cc.Command.Subcommands))), cc.Command.HelpName)
			}
			return cli.ShowSubcommandHelp(cc)
		}
	}
	for _, s := range c.Subcommands {
		prepare(s)
	}
}

// fastStringFlag is a string flag whose Names() costs nothing. urfave/cli
// calls Names() on every flag of a command for every flag it checks
// (Context.IsSet, once per flag before each action), and each call trims
// every name with a regular expression: thousands of them, ~2.5 ms of CPU
// in every `latticectl submit`. Everything else is the embedded flag's.
// String and boolean flags are wrapped (fastBoolFlag); urfave/cli
// type-asserts *cli.StringFlag only for TakesFile (unused here).
type fastStringFlag struct {
	*cli.StringFlag
	names []string
}

func (f *fastStringFlag) Names() []string { return f.names }

// fastBoolFlag is fastStringFlag for a boolean flag. urfave/cli
// type-asserts *cli.BoolFlag in two places: its help leaves out the
// default of a flag with DisableDefaultText (GetDefaultText below does the
// same), and its completion leaves out hidden ones (hidden boolean flags
// are not wrapped).
type fastBoolFlag struct {
	*cli.BoolFlag
	names []string
}

func (f *fastBoolFlag) Names() []string { return f.names }

func (f *fastBoolFlag) GetDefaultText() string {
	if f.DisableDefaultText {
		return ""
	}
	return f.BoolFlag.GetDefaultText()
}

// fastNames wraps the string and (visible) boolean flags of flags.
func fastNames(flags []cli.Flag) {
	for i, f := range flags {
		switch f := f.(type) {
		case *cli.StringFlag:
			flags[i] = &fastStringFlag{StringFlag: f, names: append([]string{f.Name}, f.Aliases...)}
		case *cli.BoolFlag:
			if !f.Hidden {
				flags[i] = &fastBoolFlag{BoolFlag: f, names: append([]string{f.Name}, f.Aliases...)}
			}
		}
	}
}

// isBoolFlag reports whether f is a boolean flag (takes no value).
func isBoolFlag(f cli.Flag) bool {
	switch f.(type) {
	case *cli.BoolFlag, *fastBoolFlag:
		return true
	}
	return false
}

// flagNames is f.Names() without its cost: urfave/cli trims every name
// with a regular expression, which made building the command tree (every
// latticectl run, before anything else) take milliseconds.
func flagNames(f cli.Flag) []string {
	switch f := f.(type) {
	case *fastStringFlag:
		return f.names
	case *fastBoolFlag:
		return f.names
	case *cli.StringFlag:
		return append([]string{f.Name}, f.Aliases...)
	case *cli.BoolFlag:
		return append([]string{f.Name}, f.Aliases...)
	case *cli.IntFlag:
		return append([]string{f.Name}, f.Aliases...)
	case *cli.StringSliceFlag:
		return append([]string{f.Name}, f.Aliases...)
	case *cli.DurationFlag:
		return append([]string{f.Name}, f.Aliases...)
	case *cli.Float64Flag:
		return append([]string{f.Name}, f.Aliases...)
	case *cli.Int64Flag:
		return append([]string{f.Name}, f.Aliases...)
	case *cli.Uint64Flag:
		return append([]string{f.Name}, f.Aliases...)
	}
	return f.Names()
}

func hasFlag(flags []cli.Flag, names []string) bool {
	for _, f := range flags {
		for _, n := range flagNames(f) {
			if slices.Contains(names, n) {
				return true
			}
		}
	}
	return false
}

func onUsageError(c *cli.Context, err error, _ bool) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		name = strings.TrimLeft(name, "-")
		dashes := "--"
		if len(name) == 1 {
			dashes = "-"
		}
		help := "latticectl"
		var flags []cli.Flag
		if c != nil && c.App != nil {
			flags = c.App.Flags
		}
		if c != nil && c.Command != nil && c.Command.HelpName != "" {
			help, flags = c.Command.HelpName, c.Command.Flags
		}
		return usageErrorf("unknown flag %s%s for %q%s; run `%s --help`", dashes, name, help, didYouMean(flagSuggestion(flags, name)), help)
	}
	return usageErrorf("%s", msg)
}

// Global flags. Their environment twins are read by the runner (not by
// urfave/cli) so that a flag given anywhere on the command line wins over
// the environment, and tests control the environment.
func globalFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "server", Usage: "API address(es) ADDR[,ADDR...], tried in turn (env LATTICE_SERVER)", DefaultText: DefaultServer},
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "output format: table, json, yaml or wide (env LATTICE_OUTPUT)", DefaultText: "table"},
		&cli.StringFlag{Name: "tenant", Usage: "tenant (account) to act as; one you are associated with (env LATTICE_TENANT; default: your default tenant)"},
		&cli.StringFlag{Name: "token", Usage: "bearer token sent to the server (env LATTICE_TOKEN; default: the token that latticed dev saved in ~/.config/lattice/token, else MUNGE)"},
		&cli.StringFlag{Name: "munge-socket", Usage: "munged's socket: with no token, each call carries a MUNGE credential for your uid (env LATTICE_MUNGE_SOCKET)", DefaultText: DefaultMungeSocket},
		&cli.StringFlag{Name: "retry-budget", Usage: "how long to keep retrying when no server answers (env LATTICE_RETRY_BUDGET)", DefaultText: defaultRetryBudget.String()},
		&cli.StringFlag{Name: "cacert", Usage: "CA certificate (PEM) that signed the servers' certificates; turns TLS on (env LATTICE_CACERT)"},
		&cli.StringFlag{Name: "cert", Usage: "client certificate (PEM) presented to TLS servers, with --key; its common name is your identity (env LATTICE_CERT)"},
		&cli.StringFlag{Name: "key", Usage: "the client certificate's private key (PEM) (env LATTICE_KEY)"},
	}
}

// globalFlagList is globalFlags for reading (takesValue); commands get
// their own copies.
var globalFlagList = globalFlags()

// explicit returns the value of flag name if the user typed it on this
// command or any command above it (the nearest wins).
func explicit(c *cli.Context, name string) (string, bool) {
	for _, cc := range c.Lineage() {
		if cc.App == nil || cc.Command == nil {
			continue
		}
		if slices.Contains(cc.LocalFlagNames(), name) {
			return cc.String(name), true
		}
	}
	return "", false
}

// global resolves a global flag: command line, then the environment
// variable, then def.
func (r *runner) global(c *cli.Context, name, env, def string) string {
	if v, ok := explicit(c, name); ok {
		return v
	}
	if v := r.Getenv(env); v != "" {
		return v
	}
	return def
}

// Output formats.
const (
	formatTable = "table"
	formatWide  = "wide"
	formatJSON  = "json"
	formatYAML  = "yaml"
)

func (r *runner) format(c *cli.Context) (string, error) {
	r.shape = shapeOf(c)
	v := r.global(c, "output", "LATTICE_OUTPUT", formatTable)
	switch f := strings.ToLower(strings.TrimSpace(v)); f {
	case formatTable, formatWide, formatJSON, formatYAML:
		return f, nil
	}
	allowed := "table, json, yaml or wide"
	if strings.ContainsAny(v, "%./") {
		allowed += " (-o/--output is the output format; an output file is --stdout FILE)"
	}
	return "", &model.FieldError{Field: "output", Value: v, Allowed: allowed}
}

// tenant is the tenant to act as: --tenant or LATTICE_TENANT; "" lets
// the server use the caller's default tenant.
func (r *runner) tenant(c *cli.Context) string {
	if v, ok := explicit(c, "tenant"); ok {
		return v
	}
	return r.Getenv("LATTICE_TENANT")
}

// connCredentials is what this invocation authenticates with.
func (r *runner) connCredentials(c *cli.Context) (credSource, error) {
	from := "--token"
	if _, ok := explicit(c, "token"); !ok {
		from = "LATTICE_TOKEN"
	}
	return r.credentials(r.global(c, "token", "LATTICE_TOKEN", ""), from,
		r.global(c, "munge-socket", "LATTICE_MUNGE_SOCKET", DefaultMungeSocket))
}

// reqID is the client request id of this invocation: one per command,
// reused by every retry so the quorum applies the write once.
func (r *runner) reqID() string {
	if r.requestID == "" {
		r.requestID = newRequestID()
	}
	return r.requestID
}

// connect returns the connection to the servers named by --server.
func (r *runner) connect(c *cli.Context) (*conn, error) {
	if r.conn != nil {
		return r.conn, nil
	}
	addrs, err := parseServers(r.global(c, "server", "LATTICE_SERVER", DefaultServer))
	if err != nil {
		return nil, err
	}
	budget := defaultRetryBudget
	if v := r.global(c, "retry-budget", "LATTICE_RETRY_BUDGET", ""); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return nil, &model.FieldError{Field: "retry-budget", Value: v, Allowed: "a duration >= 0 such as 5s"}
		}
		budget = d
	}
	cred, err := r.connCredentials(c)
	if err != nil {
		return nil, err
	}
	files := pki.Files{CA: r.global(c, "cacert", "LATTICE_CACERT", ""), Cert: r.global(c, "cert", "LATTICE_CERT", ""),
		Key: r.global(c, "key", "LATTICE_KEY", "")}
	creds := insecure.NewCredentials()
	if files.Enabled() {
		cfg, err := pki.Client(files)
		if err != nil {
			var fe *pki.FieldError
			if errors.As(err, &fe) {
				field := map[string]string{"ca": "cacert"}[fe.Field]
				if field == "" {
					field = fe.Field
				}
				return nil, &model.FieldError{Field: field, Value: fe.Value, Allowed: "readable PEM files: " + fe.Problem}
			}
			return nil, err
		}
		creds = credentials.NewTLS(cfg)
	}
	r.conn = newConn(addrs, cred, budget, append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, r.DialOptions...)...)
	return r.conn, nil
}

// reorder moves flags in front of positional arguments, command level by
// command level, because urfave/cli v2 stops parsing flags at the first
// positional argument and users type `latticectl nodes drain n01 --reason
// x`. Everything after "--" stays positional; the runner remembers how
// many arguments came after it (submit -- CMD ARGS...).
func (r *runner) reorder(flags []cli.Flag, subs []*cli.Command, args []string) []string {
	if n := len(args); n > 0 && args[n-1] == "--generate-bash-completion" {
		return args
	}
	var flagArgs, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if parts := splitJoined(flags, a); len(parts) > 1 {
			// -N1: the flag and its value as two arguments.
			args = concat(args[:i:i], parts, args[i+1:])
			a = args[i]
		}
		if a == "--" {
			rest := args[i+1:]
			r.sawDash, r.afterDash = true, len(rest)
			return concat(flagArgs, []string{"--"}, pos, rest)
		}
		if len(a) > 1 && a[0] == '-' {
			flagArgs = append(flagArgs, a)
			if !strings.Contains(a, "=") && takesValue(flags, strings.TrimLeft(a, "-")) && i+1 < len(args) {
				flagArgs = append(flagArgs, args[i+1])
				i++
			}
			continue
		}
		if len(pos) == 0 {
			if sub := findCommand(subs, a); sub != nil {
				if r.ran == nil {
					r.ran = sub
					prepare(sub)
				}
				return concat(flagArgs, []string{a}, r.reorder(sub.Flags, sub.Subcommands, args[i+1:]))
			}
		}
		pos = append(pos, a)
	}
	if len(pos) == 0 {
		return flagArgs
	}
	return concat(flagArgs, []string{"--"}, pos)
}

func concat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// takesValue reports whether flag name expects a value in the next
// argument (every flag but the boolean ones). Unknown flags take none;
// urfave/cli reports them.
func takesValue(flags []cli.Flag, name string) bool {
	for _, f := range append(slices.Clone(flags), globalFlagList...) {
		if slices.Contains(flagNames(f), name) {
			return !isBoolFlag(f)
		}
	}
	return false
}

// runnerOf finds the runner of a command's app; replayCommand and other
// commands defined outside this file use it for output formats.
func runnerOf(c *cli.Context) *runner {
	if c != nil && c.App != nil {
		if r, ok := c.App.Metadata["runner"].(*runner); ok {
			return r
		}
	}
	return &runner{Env: OSEnv()}
}

// OutputFormat is the resolved -o format of a command (table, wide, json or
// yaml), for commands defined outside this package's main files.
func OutputFormat(c *cli.Context) (string, error) {
	return runnerOf(c).format(c)
}

// needArgs checks the number of positional arguments.
func needArgs(c *cli.Context, min, max int, what string) error {
	n := c.Args().Len()
	if n < min || (max >= 0 && n > max) {
		return usageErrorf("usage: %s %s", c.Command.HelpName, what)
	}
	return nil
}
