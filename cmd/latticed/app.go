package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"

	"github.com/latticehpc/lattice/agent"
	"github.com/latticehpc/lattice/auth"
	"github.com/latticehpc/lattice/conformance"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/pki"
	"github.com/latticehpc/lattice/quorum"
	"github.com/latticehpc/lattice/server"
)

// usageError marks bad flags or values: exit code 2.
type usageError struct{ error }

func exitCode(err error) int {
	var ue usageError
	var fe *model.FieldError
	if errors.As(err, &ue) || errors.As(err, &fe) {
		return 2
	}
	var re *agent.RefusedError
	if errors.As(err, &re) {
		return 77 // EX_NOPERM: the credential is refused; retrying will not help
	}
	return 1
}

func env(name string) []string {
	return []string{"LATTICE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))}
}

func str(name, value, usage string) *cli.StringFlag {
	return &cli.StringFlag{Name: name, Value: value, Usage: usage, EnvVars: env(name)}
}

func dur(name string, value time.Duration, usage string) *cli.DurationFlag {
	return &cli.DurationFlag{Name: name, Value: value, Usage: usage, EnvVars: env(name)}
}

func app() *cli.App {
	return &cli.App{
		Name:  "latticed",
		Usage: "the Lattice scheduler daemon: quorum member, node agent, or both in one process for development",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error", EnvVars: env("log-level")},
			&cli.StringFlag{Name: "log-format", Value: "text", Usage: "text or json (one JSON object per line)", EnvVars: env("log-format")},
		},
		Before: func(c *cli.Context) error {
			if err := setupLogging(c.String("log-level"), c.String("log-format")); err != nil {
				return usageError{err}
			}
			return nil
		},
		Commands:       []*cli.Command{devCommand(), serverCommand(), agentCommand(), probeCommand(), tokenCommand(), caCommand(), benchCommand()},
		OnUsageError:   onUsageError,
		ExitErrHandler: func(*cli.Context, error) {},
	}
}

func onUsageError(_ *cli.Context, err error, _ bool) error { return usageError{err} }

// signalContext ends on SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func vclusterDefs(names []string) []model.VCluster {
	out := make([]model.VCluster, len(names))
	for i, n := range names {
		out[i] = server.DefaultVCluster(n)
	}
	return out
}

// --- dev --------------------------------------------------------------------------

func devCommand() *cli.Command {
	return &cli.Command{
		Name:  "dev",
		Usage: "run everything in one process: a one-member quorum, the schedulers and a simulated cluster running real processes",
		Flags: append([]cli.Flag{
			str("data-dir", ".lattice/dev", "where Raft state, snapshots and job output live (survives restarts)"),
			&cli.IntFlag{Name: "nodes", Value: 64, Usage: "simulated nodes", EnvVars: env("nodes")},
			&cli.IntFlag{Name: "groups", Value: 4, Usage: "dragonfly groups the nodes are spread over", EnvVars: env("groups")},
			str("vclusters", "hpc-batch,ml-training,interactive", "vClusters as NAME[:NODES],... (nodes split in that order; evenly without counts)"),
			str("api", "127.0.0.1:7070", "gRPC API address"),
			str("metrics", "127.0.0.1:9090", "Prometheus /metrics address (empty = off)"),
			str("http", "127.0.0.1:0", "REST API (/api/v1/) and web dashboard (/ui/) address; port 0 picks a free one, printed at start (empty = off)"),
			str("node-watts", "100:400", "IDLE:BUSY watts of each simulated node"),
			&cli.Float64Flag{Name: "power-budget-kw", Usage: "system power budget in kW (0 = none)", EnvVars: env("power-budget-kw")},
			dur("grace", 30*time.Second, "SIGTERM to SIGKILL grace when cancelling or at walltime"),
			str("latticectl", "", "latticectl binary behind the srun shim on jobs' PATH (default: next to latticed, else on PATH)"),
			&cli.BoolFlag{Name: "demo", Usage: "also submit a small sample workload", EnvVars: env("demo")},
			str("tenants", "", "more tenants to create, comma-separated (your user name's, demo and default always exist)"),
			&cli.BoolFlag{Name: "tls", Usage: "serve the API over TLS with a dev CA made in DATA_DIR/pki (latticectl then needs --cacert DATA_DIR/pki/ca.crt)", EnvVars: env("tls")},
			mungeSocketFlag(true),
			maxArraySizeFlag(), maxDAGStagesFlag(), maxStartsFlag(), mailHookFlag(), interactiveIdleFlag(),
		}, append(checkpointFlags(), energyFlags()...)...),
		Action:       runDev,
		OnUsageError: onUsageError,
	}
}

func runDev(c *cli.Context) error {
	n, groups := c.Int("nodes"), c.Int("groups")
	if n < 1 || n > 100000 {
		return usageError{&model.FieldError{Field: "nodes", Value: fmt.Sprint(n), Allowed: "1..100000"}}
	}
	if groups < 1 || groups > n {
		return usageError{&model.FieldError{Field: "groups", Value: fmt.Sprint(groups), Allowed: fmt.Sprintf("1..%d (at most one group per node)", n)}}
	}
	names, counts, err := agent.ParseVClusterSplit(c.String("vclusters"))
	if err != nil {
		return usageError{err}
	}
	for _, name := range names {
		if v := server.DefaultVCluster(name); v.Validate() != nil {
			return usageError{v.Validate()}
		}
	}
	idle, busy, err := model.ParseWatts(c.String("node-watts"))
	if err != nil {
		return usageError{err}
	}
	budget, err := model.ParseKilowatts("power-budget-kw", fmt.Sprint(c.Float64("power-budget-kw")))
	if err != nil {
		return usageError{err}
	}
	energy, err := energyConfig(c)
	if err != nil {
		return usageError{err}
	}
	groupSize := (n + groups - 1) / groups
	fp := conformance.Fingerprint("sim-driver-1", "sim-nic-1", "sim-bios-1", "")
	nodes, err := agent.SimulatedNodes("node", n, groupSize, names, counts, idle, busy, fp)
	if err != nil {
		return usageError{err}
	}
	dataDir, err := filepath.Abs(c.String("data-dir"))
	if err != nil {
		return err
	}
	grace := c.Duration("grace")
	maxArray, maxStages, err := limitFlags(c)
	if err != nil {
		return err
	}
	starts, err := maxStarts(c)
	if err != nil {
		return err
	}
	adminToken, err := devCredentials(dataDir)
	if err != nil {
		return err
	}
	munge, err := mungeSocket(c)
	if err != nil {
		return err
	}
	agentToken := mintToken()
	var devFiles pki.Files
	if c.Bool("tls") {
		if devFiles, err = devTLS(dataDir); err != nil {
			return err
		}
	}
	var agentTLS *tls.Config
	if devFiles.Enabled() {
		if agentTLS, err = pki.Client(pki.Files{CA: devFiles.CA}); err != nil {
			return err
		}
	}
	srv, err := server.New(server.Config{
		TLS:        devFiles,
		TokensFile: filepath.Join(dataDir, tokensFileName), MungeSocket: munge,
		Tenants:     append([]string{localUser(), "demo", model.DefaultTenant}, splitList(c.String("tenants"))...),
		ExtraTokens: map[string]auth.Identity{agentToken: {User: "dev-agent", Role: auth.RoleAgent, Nodes: agentNodeNames(nodes), MaxPriority: -1}},
		ID:          "dev", DataDir: filepath.Join(dataDir, "quorum"), APIAddr: c.String("api"), MetricsAddr: c.String("metrics"), HTTPAddr: c.String("http"),
		InMemRaft: true, RaftLogLevel: "error", LoopProcs: true, VClusters: vclusterDefs(names), DefaultVCluster: names[0], PowerBudgetWatts: budget,
		KillGrace: grace, DegradedAfter: 15 * time.Second, DownAfter: 30 * time.Second, LivenessGrace: 5 * time.Second,
		MaxArraySize: maxArray, MaxDAGStages: maxStages, MaxStartsPerCycle: starts,
		Checkpoint: checkpointParams(c), BrokerInterval: c.Duration("checkpoint-broker-interval"),
		NoProactiveCheckpoints: !c.Bool("proactive-checkpoints"), Energy: energy,
		MailHook: c.String("mail-hook"), InteractiveIdleTimeout: interactiveIdle(c),
	})
	if err != nil {
		return err
	}
	if err := srv.Serve(); err != nil {
		srv.Stop()
		return err
	}
	ag, err := agent.New(agent.Config{
		ID: "dev-agent", Servers: []string{srv.APIAddr()}, DataDir: filepath.Join(dataDir, "agent"),
		Nodes: nodes, HeartbeatInterval: 5 * time.Second, Grace: grace, Token: agentToken, RunAsSelf: true,
		Latticectl: c.String("latticectl"), TLS: agentTLS, CAFile: devFiles.CA,
	})
	if err != nil {
		srv.Stop()
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	agentCtx, stopAgent := context.WithCancel(context.Background())
	agentDone := make(chan struct{})
	go func() {
		defer close(agentDone)
		_ = ag.Run(agentCtx)
	}()
	shutdown := func() {
		// Stop the work while the agent can still report it: the records
		// end when the work did, not when dev next starts.
		sctx, cancel := context.WithTimeout(context.Background(), min(grace, 5*time.Second)+5*time.Second)
		ag.StopAll(sctx, min(grace, 5*time.Second))
		cancel()
		stopAgent()
		<-agentDone
		srv.Stop()
	}
	creds, err := dialCreds(pki.Files{CA: devFiles.CA})
	if err != nil {
		shutdown()
		return err
	}
	if err := waitReady(ctx, srv.APIAddr(), adminToken, len(nodes), creds, ag.Connected, 60*time.Second); err != nil {
		shutdown()
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	fmt.Fprintf(os.Stderr, "lattice dev ready: api=%s metrics=%s data=%s\n", srv.APIAddr(), orOff(srv.MetricsAddr()), dataDir)
	fmt.Fprintf(os.Stderr, "lattice dev: in another shell try: %s\n", devHint(srv.APIAddr())) // dev.go
	if devFiles.Enabled() {
		fmt.Fprintf(os.Stderr, "lattice dev: the API speaks TLS only; export LATTICE_CACERT=%s for latticectl\n", devFiles.CA)
	}
	if u := srv.DashboardLogin(&auth.Identity{User: localUser(), Role: auth.RoleAdmin, MaxPriority: -1}); u != "" {
		fmt.Fprintf(os.Stderr, "lattice dev: dashboard (one-time login link, as admin %s): %s\n", localUser(), u)
	}
	if c.Bool("demo") {
		if err := submitDemo(ctx, srv.APIAddr(), adminToken, creds, dataDir); err != nil {
			slog.Warn("demo workload", "err", err)
		}
	}
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "lattice dev: shutting down")
	shutdown()
	return nil
}

func absOrEmpty(p string) string {
	if p == "" {
		return ""
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

func orOff(s string) string {
	if s == "" {
		return "off"
	}
	return s
}

// --- server -------------------------------------------------------------------------

func serverCommand() *cli.Command {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "config", Usage: "YAML file; its keys are these flags' names", EnvVars: env("config")},
		altsrc.NewStringFlag(str("id", "", "unique member id (required)")),
		altsrc.NewStringFlag(str("data-dir", "", "Raft log, stable store and snapshots (required)")),
		altsrc.NewStringFlag(str("raft-addr", "127.0.0.1:7000", "address for Raft traffic between members")),
		altsrc.NewStringFlag(str("api-addr", "127.0.0.1:7070", "gRPC API address")),
		altsrc.NewStringFlag(str("metrics-addr", "127.0.0.1:9090", "Prometheus /metrics address (empty = off)")),
		altsrc.NewStringFlag(&cli.StringFlag{Name: "http", Aliases: []string{"http-addr"}, Value: "127.0.0.1:0", EnvVars: env("http"),
			Usage: "REST API (/api/v1/) and web dashboard (/ui/) address, over TLS when the API has it; port 0 picks a free one (latticectl dashboard finds it; empty = off)"}),
		altsrc.NewBoolFlag(&cli.BoolFlag{Name: "bootstrap", Usage: "form a new cluster with this member (first member, first start only)", EnvVars: env("bootstrap")}),
		altsrc.NewStringFlag(str("join", "", "API addresses of existing members to join through, comma-separated")),
		altsrc.NewStringFlag(str("vclusters", "hpc-batch", "vClusters created when the cluster is new, comma-separated")),
		altsrc.NewStringFlag(str("tenants", "", "tenants created (without quotas) where missing, comma-separated; with auth on submissions to unknown tenants are refused")),
		altsrc.NewStringFlag(str("default-vcluster", "", "vCluster for submissions that name none (default: the first)")),
		altsrc.NewFloat64Flag(&cli.Float64Flag{Name: "power-budget-kw", Usage: "system power budget set when the cluster is new (0 = none)", EnvVars: env("power-budget-kw")}),
		altsrc.NewDurationFlag(dur("degraded-after", 30*time.Second, "heartbeat silence before a node is Degraded")),
		altsrc.NewDurationFlag(&cli.DurationFlag{Name: "node-timeout", Aliases: []string{"down-after"}, Value: server.DefaultNodeTimeout, EnvVars: append(env("node-timeout"), env("down-after")...),
			Usage: "heartbeat silence before a node is failed (Down; its work fails or is requeued once its agent has certainly stopped it: the agent's --fence-timeout), as Slurm's SlurmdTimeout"}),
		altsrc.NewFloat64Flag(&cli.Float64Flag{Name: "mass-silence-fraction", Value: server.DefaultMassSilenceFraction, EnvVars: env("mass-silence-fraction"),
			Usage: "when more than this share of the nodes is silent at once, fail none of them (they show NotResponding): the control plane's problem, not theirs; 1 = never hold"}),
		altsrc.NewDurationFlag(dur("liveness-grace", 0, "after winning leadership, wait this long before marking nodes (default: down-after)")),
		altsrc.NewDurationFlag(dur("kill-grace", 30*time.Second, "SIGTERM to SIGKILL grace sent with cancellations")),
		altsrc.NewDurationFlag(dur("retention", 7*24*time.Hour, "keep ended allocations whole this long in the live state, then as compact records in the replicated history of ended jobs")),
		altsrc.NewDurationFlag(dur("history-retention", 365*24*time.Hour, "keep the history of ended jobs (latticectl history) this long")),
		altsrc.NewDurationFlag(dur("raft-heartbeat-timeout", 500*time.Millisecond, "leader silence before an election (also the election timeout; the leader lease is half): raise it on loaded machines")),
		altsrc.NewDurationFlag(dur("prune-interval", 10*time.Minute, "how often the leader moves allocations past --retention to the history")),
		altsrc.NewDurationFlag(dur("measured-power-max-age", 30*time.Second, "a node's measured draw stands for its configured figures in the power check while younger than this (negative = never)")),
		altsrc.NewStringFlag(str("raft-log-level", "warn", "hashicorp/raft's own log level: trace, debug, info, warn, error or off")),
		altsrc.NewIntFlag(maxArraySizeFlag()),
		altsrc.NewIntFlag(maxDAGStagesFlag()),
		altsrc.NewIntFlag(maxStartsFlag()),
		altsrc.NewStringFlag(mailHookFlag()),
		altsrc.NewDurationFlag(interactiveIdleFlag()),
		altsrc.NewStringFlag(str("tokens-file", "", "tokens file that turns authentication on (default DATA_DIR/tokens when it exists; the same file on every member)")),
		altsrc.NewStringFlag(&cli.StringFlag{Name: "token", EnvVars: []string{"LATTICE_TOKEN"}, Usage: "this member's own credential for joining and for calls to other members (an admin token)"}),
		altsrc.NewStringFlag(mungeSocketFlag(false)),
		altsrc.NewStringFlag(str("auto-user-tenant", "", "let every MUNGE uid in: one that is no user becomes a user of this tenant on first contact (default: refused)")),
		tlsFlags("the member")[0], tlsFlags("the member")[1], tlsFlags("the member")[2],
		secretFlags()[0], secretFlags()[1], secretFlags()[2],
		&cli.BoolFlag{Name: "pprof", Hidden: true, Usage: "serve Go profiles under /debug/pprof/ on the metrics address", EnvVars: env("pprof")},
		&cli.BoolFlag{Name: "fault-injection", Hidden: true, Usage: "let AdminService.InjectFault cut Raft links (partition tests only)", EnvVars: env("fault-injection")},
	}
	flags = append(flags, checkpointFlags()...)
	flags = append(flags, energyFlags()...)
	return &cli.Command{
		Name:         "server",
		Usage:        "run one quorum member",
		Flags:        flags,
		Before:       loadConfig(flags),
		Action:       runServer,
		OnUsageError: onUsageError,
	}
}

// loadConfig fills flags from the --config YAML file (keys are flag names).
// A missing or malformed file is bad input: exit code 2.
func loadConfig(flags []cli.Flag) cli.BeforeFunc {
	return func(c *cli.Context) error {
		path := c.String("config")
		if path == "" {
			return nil
		}
		if _, err := os.Stat(path); err != nil {
			return usageError{&model.FieldError{Field: "config", Value: path, Allowed: "a readable YAML file whose keys are flag names"}}
		}
		err := altsrc.InitInputSourceWithContext(flags, altsrc.NewYamlSourceFromFlagFunc("config"))(c)
		if err != nil {
			return usageError{fmt.Errorf("config %s: %w", path, err)}
		}
		return nil
	}
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func runServer(c *cli.Context) error {
	if c.String("id") == "" {
		return usageError{&model.FieldError{Field: "id", Allowed: "a unique member id (--id or LATTICE_ID)"}}
	}
	if c.String("data-dir") == "" {
		return usageError{&model.FieldError{Field: "data-dir", Allowed: "a directory (--data-dir or LATTICE_DATA_DIR)"}}
	}
	if c.Bool("bootstrap") && c.String("join") != "" {
		return usageError{&model.FieldError{Field: "bootstrap", Value: "with --join", Allowed: "--bootstrap for the first member or --join for later ones, not both"}}
	}
	budget, err := model.ParseKilowatts("power-budget-kw", fmt.Sprint(c.Float64("power-budget-kw")))
	if err != nil {
		return usageError{err}
	}
	vcs := splitList(c.String("vclusters"))
	if len(vcs) == 0 {
		return usageError{&model.FieldError{Field: "vclusters", Allowed: "one or more vCluster names"}}
	}
	for _, name := range vcs {
		if v := server.DefaultVCluster(name); v.Validate() != nil {
			return usageError{v.Validate()}
		}
	}
	maxArray, maxStages, err := limitFlags(c)
	if err != nil {
		return err
	}
	starts, err := maxStarts(c)
	if err != nil {
		return err
	}
	energy, err := energyConfig(c)
	if err != nil {
		return usageError{err}
	}
	pin, err := featureLevel(c.String("feature-level"))
	if err != nil {
		return usageError{err}
	}
	munge, err := mungeSocket(c)
	if err != nil {
		return err
	}
	tokensFile, err := serverTokensFile(c, munge != "")
	if err != nil {
		return err
	}
	if !tlsFiles(c).Enabled() {
		for _, flag := range []string{"api-addr", "raft-addr", "http"} {
			if loopbackOnly(flag, c.String(flag)) != nil {
				slog.Warn("TLS is off: tokens and job environments cross the network in clear text (latticed ca init, then --tls-ca, --tls-cert, --tls-key); Raft beyond loopback needs --cluster-secret", "flag", flag, "addr", c.String(flag))
			}
		}
	}
	srv, err := server.New(server.Config{
		TokensFile: tokensFile, Token: c.String("token"), Tenants: splitList(c.String("tenants")),
		MungeSocket: munge, AutoUserTenant: c.String("auto-user-tenant"),
		ID: c.String("id"), DataDir: c.String("data-dir"), RaftAddr: c.String("raft-addr"), APIAddr: c.String("api-addr"),
		MetricsAddr: c.String("metrics-addr"), HTTPAddr: c.String("http"), Bootstrap: c.Bool("bootstrap"), Join: splitList(c.String("join")),
		VClusters: vclusterDefs(vcs), DefaultVCluster: c.String("default-vcluster"), PowerBudgetWatts: budget,
		DegradedAfter: c.Duration("degraded-after"), DownAfter: c.Duration("node-timeout"), MassSilenceFraction: c.Float64("mass-silence-fraction"), LivenessGrace: c.Duration("liveness-grace"),
		KillGrace: c.Duration("kill-grace"), Retention: c.Duration("retention"), HistoryRetention: c.Duration("history-retention"), MeasuredPowerMaxAge: c.Duration("measured-power-max-age"), PruneInterval: c.Duration("prune-interval"),
		RaftLogLevel: c.String("raft-log-level"), FaultInjection: c.Bool("fault-injection"), RaftHeartbeatTimeout: c.Duration("raft-heartbeat-timeout"), Pprof: c.Bool("pprof"), LoopProcs: true,
		MaxArraySize: maxArray, MaxDAGStages: maxStages, MaxStartsPerCycle: starts,
		Checkpoint: checkpointParams(c), BrokerInterval: c.Duration("checkpoint-broker-interval"),
		NoProactiveCheckpoints: !c.Bool("proactive-checkpoints"), Energy: energy, TLS: tlsFiles(c),
		MailHook: c.String("mail-hook"), InteractiveIdleTimeout: interactiveIdle(c),
		ClusterSecret: c.String("cluster-secret"), NeverStoreEnv: splitList(c.String("never-store-env")),
		FeatureLevel: pin,
	})
	if err != nil {
		return tlsUsage(err)
	}
	// Signals are caught before READY=1: a stop right after it must still
	// shut down cleanly (and say STOPPING=1).
	ctx, stop := signalContext()
	defer stop()
	if err := srv.Serve(); err != nil {
		srv.Stop()
		return err
	}
	sdNotify("READY=1\nSTATUS=serving api " + srv.APIAddr())
	slog.Info("lattice server ready", "id", c.String("id"), "api", srv.APIAddr(), "raft", srv.Quorum().RaftAddr(), "metrics", orOff(srv.MetricsAddr()), "http", orOff(srv.HTTPAddr()))
	<-ctx.Done()
	slog.Info("lattice server shutting down")
	sdNotify("STOPPING=1")
	srv.Stop()
	return nil
}

// --- agent --------------------------------------------------------------------------

func agentCommand() *cli.Command {
	host, _ := os.Hostname()
	flags := []cli.Flag{
		&cli.StringFlag{Name: "config", Usage: "YAML file; its keys are these flags' names", EnvVars: env("config")},
		altsrc.NewStringFlag(&cli.StringFlag{Name: "server", Usage: "API addresses of quorum members, comma-separated (required)", EnvVars: []string{"LATTICE_SERVER"}}),
		altsrc.NewStringFlag(str("id", host, "agent id")),
		altsrc.NewStringFlag(str("data-dir", "", "where job output and scripts live (default: a temp dir per agent id)")),
		// Its environment twin is LATTICE_AGENT_CHECKPOINT_DIR: LATTICE_CHECKPOINT_DIR is the job's own variable.
		altsrc.NewStringFlag(&cli.StringFlag{Name: "checkpoint-dir", EnvVars: []string{"LATTICE_AGENT_CHECKPOINT_DIR"},
			Usage: "root of the jobs' LATTICE_CHECKPOINT_DIR (one directory per allocation; shared storage in production; default DATA_DIR/checkpoints)"}),
		altsrc.NewStringFlag(str("latticectl", "", "latticectl binary behind the srun shim on jobs' PATH (default: next to latticed, else on PATH)")),
		&cli.StringFlag{Name: "pprof-addr", Hidden: true, Usage: "serve Go profiles under /debug/pprof/ on this loopback address (profiling)", EnvVars: env("agent-pprof-addr")},
		altsrc.NewStringFlag(str("job-supervisor", "", "the small binary started for every job to record its exit status (default: lattice-job-supervisor next to latticed, else latticed itself)")),
		altsrc.NewStringFlag(str("job-supervisor-mode", agent.SupervisorDaemon, "how jobs are supervised: daemon (one long-lived supervisor per agent starts every job) or per-job (a supervisor process per job)")),
		altsrc.NewBoolFlag(&cli.BoolFlag{Name: "stop-jobs-on-exit", EnvVars: env("stop-jobs-on-exit"),
			Usage: "stop running jobs when the agent stops (default: leave them running; the restarted agent adopts them)"}),
		altsrc.NewIntFlag(&cli.IntFlag{Name: "simulate", Usage: "run N simulated nodes from this process (0 = this host is one node)", EnvVars: env("simulate")}),
		altsrc.NewIntFlag(&cli.IntFlag{Name: "group-size", Value: 16, Usage: "simulated nodes per dragonfly group", EnvVars: env("group-size")}),
		altsrc.NewIntFlag(&cli.IntFlag{Name: "first-group", Usage: "dragonfly group of the first simulated node (or of this host)", EnvVars: env("first-group")}),
		altsrc.NewStringFlag(str("vcluster", "hpc-batch", "home vCluster of the nodes; NAME[:N],... splits simulated nodes")),
		altsrc.NewStringFlag(str("name", host, "node name (real mode) or name prefix (simulated: PREFIX0001...)")),
		altsrc.NewStringFlag(str("node-watts", "100:400", "IDLE:BUSY watts per node")),
		altsrc.NewStringFlag(str("gpu-type", "", "GPU model of the node(s)")),
		altsrc.NewIntFlag(&cli.IntFlag{Name: "gpus", Usage: "GPUs per node", EnvVars: env("gpus")}),
		altsrc.NewStringFlag(str("features", "", "node features, comma-separated")),
		altsrc.NewStringFlag(str("driver-version", "", "GPU driver version (conformance fingerprint)")),
		altsrc.NewStringFlag(str("nic-firmware", "", "NIC firmware version (conformance fingerprint)")),
		altsrc.NewStringFlag(str("bios-firmware", "", "BIOS/BMC firmware version (conformance fingerprint)")),
		altsrc.NewStringFlag(str("kernel-params", "", "kernel parameters (conformance fingerprint)")),
		altsrc.NewDurationFlag(dur("fingerprint-check", 5*time.Minute, "how often a real node's fingerprint is recomputed from the machine and drift reported (0 = never)")),
		altsrc.NewStringFlag(str("machine-root", "/", "where the machine's /proc and /sys are read (the fingerprint and hardware inputs; tests point it elsewhere)")),
		altsrc.NewDurationFlag(dur("heartbeat", 10*time.Second, "heartbeat interval")),
		altsrc.NewDurationFlag(dur("fence-timeout", agent.DefaultFenceTimeout, "stop this agent's jobs (and, when the agent is gone, its job supervisor does) once no leader has heard it for this long; the leader requeues a lost node's work only after it and --grace: longer rides out longer outages of the whole quorum, and delays the requeue after a real node loss as much (negative = never)")),
		altsrc.NewStringFlag(str("cluster-id", "", "serve only the cluster with this id (`latticectl quorum status` shows it); by default the agent learns it from the first leader that presents one and refuses servers of other clusters from then on")),
		altsrc.NewDurationFlag(dur("grace", 30*time.Second, "default SIGTERM to SIGKILL grace")),
		altsrc.NewStringFlag(&cli.StringFlag{Name: "token", EnvVars: []string{"LATTICE_TOKEN"}, Usage: "the agent's credential (latticed token create --role agent --nodes PATTERN)"}),
		altsrc.NewBoolFlag(&cli.BoolFlag{Name: "allow-root-jobs", EnvVars: env("allow-root-jobs"), Usage: "as root, also run jobs whose owner is root"}),
		altsrc.NewBoolFlag(&cli.BoolFlag{Name: "virtual-runs", EnvVars: env("virtual-runs"), Usage: "with --simulate: start no processes; a job sleep S lasts S seconds, any other ends at once with exit 0 (scale tests of the control plane)"}),
		altsrc.NewBoolFlag(&cli.BoolFlag{Name: "run-as-self", EnvVars: env("run-as-self"), Usage: "run every job as this agent's user, whoever submitted it (always with --simulate)"}),
	}
	flags = append(flags, tlsFlags("the agent")...)
	flags = append(flags, cgroupFlags()...)
	return &cli.Command{
		Name:         "agent",
		Usage:        "run a node agent (one node, or --simulate N nodes)",
		Flags:        flags,
		Before:       loadConfig(flags),
		Action:       runAgent,
		OnUsageError: onUsageError,
	}
}

func runAgent(c *cli.Context) error {
	servers := splitList(c.String("server"))
	if len(servers) == 0 {
		return usageError{&model.FieldError{Field: "server", Allowed: "one or more API addresses (--server or LATTICE_SERVER)"}}
	}
	idle, busy, err := model.ParseWatts(c.String("node-watts"))
	if err != nil {
		return usageError{err}
	}
	if d := c.Duration("fingerprint-check"); d < 0 {
		return usageError{&model.FieldError{Field: "fingerprint-check", Value: d.String(), Allowed: "a duration >= 0 (0 = never)"}}
	}
	fp := conformance.Fingerprint(c.String("driver-version"), c.String("nic-firmware"), c.String("bios-firmware"), c.String("kernel-params"))
	var meter *agent.PowerMeter
	var machine func() agent.MachineFacts
	inputs := agent.FingerprintInputs{DriverVersion: c.String("driver-version"),
		NICFirmware: c.String("nic-firmware"), BIOSFirmware: c.String("bios-firmware"), KernelParams: c.String("kernel-params")}
	if id := c.String("cluster-id"); id != "" {
		if err := quorum.CheckClusterID(id); err != nil {
			return usageError{&model.FieldError{Field: "cluster-id", Value: id, Allowed: fmt.Sprintf("%d lower-case hex digits, as `latticectl quorum status` shows", quorum.ClusterIDLength)}}
		}
	}
	root := c.String("machine-root")
	var hw agent.Hardware
	if c.Int("simulate") == 0 {
		// A real node: its fingerprint comes from the machine, the flags
		// override single inputs, and it is re-checked periodically; its
		// CPUs, memory and GPUs are detected; its draw is measured where
		// RAPL exists.
		if st, err := os.Stat(root); err != nil || !st.IsDir() {
			return usageError{&model.FieldError{Field: "machine-root", Value: root, Allowed: "an existing directory holding proc/ and sys/"}}
		}
		machine = func() agent.MachineFacts { return agent.ReadMachine(root) }
		fp = machine().Fingerprint(inputs)
		hw = agent.ReadHardware(root)
		if !c.IsSet("gpus") && !c.IsSet("gpu-type") {
			var why string
			if hw.GPUType, hw.GPUs, why = agent.DetectGPUs(c.Context); why != "" {
				slog.Info("no GPUs detected", "why", why)
			}
		}
		var err error
		if meter, err = agent.NewPowerMeter(root); err != nil {
			slog.Info("power draw not measured; the configured figures are used", "why", err)
		}
	}
	names, counts, err := agent.ParseVClusterSplit(c.String("vcluster"))
	if err != nil {
		return usageError{err}
	}
	var nodes []model.Node
	if n := c.Int("simulate"); n > 0 {
		nodes, err = agent.SimulatedNodes(c.String("name"), n, c.Int("group-size"), names, counts, idle, busy, fp)
		if err != nil {
			return usageError{err}
		}
	} else if c.Int("simulate") < 0 {
		return usageError{&model.FieldError{Field: "simulate", Value: fmt.Sprint(c.Int("simulate")), Allowed: "a node count >= 0"}}
	} else if c.Bool("virtual-runs") {
		return usageError{&model.FieldError{Field: "virtual-runs", Value: "true", Allowed: "only with --simulate N (a real node runs its jobs)"}}
	} else {
		nodes = []model.Node{{Name: c.String("name"), HomeVCluster: names[0], IdleWatts: idle, BusyWatts: busy, Fingerprint: fp,
			CPUs: hw.CPUs, MemoryMB: hw.MemoryMB}}
	}
	for i := range nodes {
		nodes[i].Group += c.Int("first-group")
		nodes[i].GPUType, nodes[i].GPUs = c.String("gpu-type"), c.Int("gpus")
		if hw.GPUs > 0 {
			nodes[i].GPUType, nodes[i].GPUs = hw.GPUType, hw.GPUs // detected (real node, no --gpus)
		}
		if f := splitList(c.String("features")); len(f) > 0 {
			nodes[i].Features = model.NormalizeFeatures(append(nodes[i].Features, f...))
		}
		if err := model.ValidateNode(&nodes[i]); err != nil {
			return usageError{err}
		}
	}
	dataDir := c.String("data-dir")
	if dataDir == "" {
		dataDir = filepath.Join(os.TempDir(), "lattice-agent-"+c.String("id"))
	}
	var tlsCfg *tls.Config
	if f := tlsFiles(c); f.Enabled() {
		if f.CA == "" {
			return usageError{&model.FieldError{Field: "tls-ca", Allowed: "the cluster CA's certificate when --tls-cert or --tls-key is given"}}
		}
		if tlsCfg, err = pki.Client(f); err != nil {
			return tlsUsage(err)
		}
	}
	supMode, err := agent.ParseSupervisorMode(c.String("job-supervisor-mode"))
	if err != nil {
		return usageError{&model.FieldError{Field: "job-supervisor-mode", Value: c.String("job-supervisor-mode"), Allowed: agent.SupervisorDaemon + ", " + agent.SupervisorPerJob}}
	}
	cgroups, err := cgroupConfig(c)
	if err != nil {
		return err
	}
	ag, err := agent.New(agent.Config{ID: c.String("id"), Servers: servers, DataDir: dataDir, Nodes: nodes, Cgroups: cgroups,
		HeartbeatInterval: c.Duration("heartbeat"), FenceTimeout: c.Duration("fence-timeout"), ClusterID: c.String("cluster-id"), Grace: c.Duration("grace"), CheckpointDir: c.String("checkpoint-dir"), Token: c.String("token"),
		// Simulated nodes are not real hosts with the submitters' accounts.
		AllowRootJobs: c.Bool("allow-root-jobs"), RunAsSelf: c.Bool("run-as-self") || c.Int("simulate") > 0,
		Latticectl: c.String("latticectl"), Supervisor: c.String("job-supervisor"), SupervisorMode: supMode, KeepJobs: !c.Bool("stop-jobs-on-exit"), PowerMeter: meter,
		TLS: tlsCfg, CAFile: absOrEmpty(c.String("tls-ca")),
		Machine: machine, FingerprintInputs: inputs, FingerprintCheck: c.Duration("fingerprint-check"), VirtualRuns: c.Bool("virtual-runs")})
	if err != nil {
		return err
	}
	if addr := c.String("pprof-addr"); addr != "" {
		if err := servePprof(addr); err != nil {
			return err
		}
	}
	ctx, stop := signalContext()
	defer stop()
	slog.Info("lattice agent starting", "id", c.String("id"), "nodes", len(nodes), "servers", servers)
	return ag.Run(ctx)
}
