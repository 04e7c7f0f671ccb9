package server

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/latticehpc/lattice/admission"
	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/auth"
	"github.com/latticehpc/lattice/checkpoint"
	"github.com/latticehpc/lattice/leader"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/pki"
	"github.com/latticehpc/lattice/quorum"
	"github.com/latticehpc/lattice/rpc"
	"github.com/latticehpc/lattice/rpc/rest"
	"github.com/latticehpc/lattice/solver"
)

// Config configures one quorum member's server.
type Config struct {
	ID          string
	DataDir     string
	RaftAddr    string // Raft traffic; ignored with InMemRaft
	APIAddr     string // gRPC
	MetricsAddr string // Prometheus /metrics; empty = off
	// HTTPAddr serves the REST API (/api/v1/) and the dashboard (/ui/),
	// over TLS when the API has it (http_api.go); empty = off.
	HTTPAddr string
	// Bootstrap forms a new cluster when the data dir has no Raft state.
	Bootstrap bool
	// Join lists API addresses of existing members to ask for membership.
	Join []string
	// InMemRaft uses an in-process Raft transport (single-member dev mode).
	InMemRaft bool
	// VClusters are created when the quorum has none (first start).
	VClusters []model.VCluster
	// Tenants are created (without quotas) where missing when a member
	// gains leadership; with auth on, submissions to other tenants are
	// refused until an admin creates them.
	Tenants []string
	// DefaultVCluster takes submissions that name none.
	DefaultVCluster string
	// PowerBudgetWatts is set at first start when > 0.
	PowerBudgetWatts int64
	// MaxArraySize bounds array indexes, as Slurm's MaxArraySize (0 =
	// model.DefaultMaxArraySize); MaxDAGStages the stages of a workflow (0 =
	// dag.DefaultMaxStages). Both are checked before anything is proposed.
	MaxArraySize int
	MaxDAGStages int

	// Liveness (liveness.go): a node is Degraded after DegradedAfter
	// without a heartbeat, failed (Down) after DownAfter, the node timeout
	// (default DefaultNodeTimeout) — unless more than MassSilenceFraction
	// of the nodes are silent at once (default DefaultMassSilenceFraction;
	// 1 = never held), or its work's old run may still go (fencing): then it
	// is NotResponding and nothing fails. After winning leadership no node
	// is marked for LivenessGrace (default DownAfter).
	DegradedAfter       time.Duration
	DownAfter           time.Duration
	LivenessGrace       time.Duration
	MassSilenceFraction float64
	// KillGrace is the SIGTERM→SIGKILL grace sent with cancellations.
	KillGrace time.Duration
	// MailHook is the site's mail command (sh -c, run by the leader) for
	// allocations submitted with --mail-type (mail.go); empty = none, and
	// submissions that ask for mail are told so.
	MailHook string
	// WalltimeBackstop is how long past walltime + KillGrace a RUNNING
	// allocation with no report may go before the leader stops it through
	// its agent, and then as long again before it ends it (backstop.go;
	// default 1 min).
	WalltimeBackstop time.Duration
	// InteractiveIdleTimeout ends an interactive allocation (latticectl
	// alloc, salloc) that has had no step running for this long
	// (interactive_idle.go); 0 = 30 min, negative = never.
	InteractiveIdleTimeout time.Duration
	// MeasuredPowerMaxAge is how old a node's measured draw may be and
	// still stand for its configured figures in the power check (default
	// 30 s; negative: measurements are shown but never used);
	// MeasuredPowerInterval is how often the leader commits the fresh ones
	// (default 10 s; measured_power.go).
	MeasuredPowerMaxAge   time.Duration
	MeasuredPowerInterval time.Duration
	// Retention keeps ended allocations this long in the live state
	// (default 7 days); then they move to the replicated history of ended
	// jobs, which keeps them HistoryRetention (default 365 days; history.go).
	// PruneInterval is how often the leader looks (default 10 min).
	Retention        time.Duration
	HistoryRetention time.Duration
	PruneInterval    time.Duration
	// Checkpoint holds the checkpoint cost model's parameters (default
	// checkpoint.DefaultParams); BrokerInterval is how often the leader's
	// checkpoint broker looks for --signal lead times and proactive
	// checkpoints (default 15 s); NoProactiveCheckpoints turns the latter off.
	// AuditState, when set, is called after every applied command with the
	// state it left (under the FSM lock; soak tests check invariants).
	AuditState func(quorum.Command, *quorum.State)

	Checkpoint             checkpoint.Params
	BrokerInterval         time.Duration
	NoProactiveCheckpoints bool
	// Energy is the time-of-use price schedule and the rule that holds
	// flexible work for cheap hours (nil = none; f7 stays neutral).
	Energy *solver.Energy

	Logger *slog.Logger
	// Clock mints command times on the leader (default time.Now().UTC()).
	Clock func() time.Time
	// RaftNoSync skips log fsync (tests and benchmarks only).
	RaftNoSync bool
	// RaftLogLevel is hashicorp/raft's own log level (default warn; "off").
	RaftLogLevel string
	// RaftHeartbeatTimeout is how long a follower waits for the leader
	// before an election, and the election timeout; the leader lease is
	// half of it (0 = quorum's default, 500 ms). A loaded machine wants
	// more: a starved leader otherwise steps down under load.
	RaftHeartbeatTimeout time.Duration
	// Pprof serves Go's profiles under /debug/pprof/ on the metrics
	// address (scale runs; the address is loopback unless set otherwise),
	// with mutex and block profiling turned on (1 in 10 contended mutex
	// waits, blocking events of 100 µs or more).
	Pprof bool
	// LoopProcs raises GOMAXPROCS by one for each scheduler loop while
	// this member leads (loop_procs.go), so that cycles never hold every
	// Go processor the Raft, FSM and API goroutines need. latticed sets it;
	// tests that run many members in one process leave it off. Ignored
	// when GOMAXPROCS is set in the environment.
	LoopProcs bool
	// MaxStartsPerCycle is the most allocations one vCluster's cycle
	// starts (vcluster.Loop.MaxStarts; 0 = no limit). latticed's default
	// is DefaultMaxStartsPerCycle.
	MaxStartsPerCycle int
	// ServiceInterval is the services controller's cycle (default 2 s);
	// ServiceBackoffReset how long an instance runs before its service's
	// restart back-off starts over (default 60 s). Tests shorten them.
	ServiceInterval     time.Duration
	ServiceBackoffReset time.Duration
	// FaultInjection lets AdminService.InjectFault cut Raft links (tests).
	FaultInjection bool

	// TokensFile turns authentication on: every call needs a bearer token
	// listed (hashed) in it; it is reloaded when it changes (server/auth.go).
	// Empty = auth off (loopback-only servers and tests).
	TokensFile string
	// MungeSocket turns MUNGE authentication on (and authentication with
	// it): the socket of this member's munged, which decodes the
	// credentials latticectl sends (server/munge.go).
	MungeSocket string
	// AutoUserTenant, when set, makes a MUNGE uid that is no user a user of
	// this tenant on first contact (sites that let everyone in).
	AutoUserTenant string
	// ExtraTokens are accepted besides the file's (latticed dev's own agent).
	ExtraTokens map[string]auth.Identity
	// Token is this member's credential for its calls to other members
	// (join, health, quorum status).
	Token string
	// TLS names the member's CA, certificate and key: the API is served
	// over TLS (client certificates optional, mapped through the tokens
	// file's cn: entries), Raft runs over TLS with member certificates
	// required at both ends, and calls to other members present the
	// member certificate. Empty = plaintext.
	TLS pki.Files
	// NeverStoreEnv names environment variables (or path.Match patterns)
	// dropped from every job environment before it is proposed or sent
	// (secret_env.go); LATTICE_TOKEN always is.
	NeverStoreEnv []string
	// ClusterSecret must be proven by every Raft connection (the same on
	// every member; quorum/secret.go). Without it and without TLS the Raft
	// address must be loopback.
	ClusterSecret string
	// FeatureLevel, when set, pins the feature level this member
	// advertises (quorum.Config.PinLevel): `latticed server
	// --feature-level 0` during a rolling upgrade that may be rolled back.
	FeatureLevel *quorum.Level
	// RaftTrailingLogs is how many entries a snapshot leaves in the log
	// (default 10,240; tests lower it so a new member installs a snapshot).
	RaftTrailingLogs uint64
}

func (c *Config) defaults() error {
	if c.ID == "" {
		return &model.FieldError{Field: "id", Allowed: "a unique member id"}
	}
	if c.DataDir == "" {
		return &model.FieldError{Field: "data-dir", Allowed: "a directory for Raft state"}
	}
	if c.APIAddr == "" {
		c.APIAddr = "127.0.0.1:7070"
	}
	if c.DegradedAfter <= 0 {
		c.DegradedAfter = 30 * time.Second
	}
	if c.DownAfter <= 0 {
		c.DownAfter = DefaultNodeTimeout
	}
	if c.MassSilenceFraction == 0 {
		c.MassSilenceFraction = DefaultMassSilenceFraction
	}
	if c.MassSilenceFraction < 0 || c.MassSilenceFraction > 1 {
		return &model.FieldError{Field: "mass-silence-fraction", Value: fmt.Sprint(c.MassSilenceFraction), Allowed: "a fraction in (0, 1]; 1 never holds failures"}
	}
	if c.DownAfter < c.DegradedAfter {
		return &model.FieldError{Field: "node-timeout", Value: c.DownAfter.String(), Allowed: "a duration >= degraded-after"}
	}
	if c.LivenessGrace <= 0 {
		c.LivenessGrace = c.DownAfter
	}
	if c.Checkpoint == (checkpoint.Params{}) {
		c.Checkpoint = checkpoint.DefaultParams()
	}
	if err := c.Checkpoint.Validate(); err != nil {
		return err
	}
	if c.InteractiveIdleTimeout == 0 {
		c.InteractiveIdleTimeout = DefaultInteractiveIdleTimeout
	}
	if c.WalltimeBackstop <= 0 {
		c.WalltimeBackstop = time.Minute
	}
	if c.KillGrace <= 0 {
		c.KillGrace = 30 * time.Second
	}
	if c.MeasuredPowerMaxAge == 0 {
		c.MeasuredPowerMaxAge = 30 * time.Second
	}
	if c.MeasuredPowerInterval <= 0 {
		c.MeasuredPowerInterval = 10 * time.Second
	}
	if c.Retention <= 0 {
		c.Retention = 7 * 24 * time.Hour
	}
	if c.PruneInterval <= 0 {
		c.PruneInterval = 10 * time.Minute
	}
	if c.HistoryRetention <= 0 {
		c.HistoryRetention = 365 * 24 * time.Hour
	}
	if err := checkNeverStoreEnv(c.NeverStoreEnv); err != nil {
		return err
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = func() time.Time { return time.Now().UTC() }
	}
	if len(c.VClusters) == 0 {
		c.VClusters = []model.VCluster{DefaultVCluster(string(model.TypeHPCBatch))}
	}
	return nil
}

// Server is one quorum member with its API. The member holding leadership
// also runs the leader-only loops.
type Server struct {
	levels levelCache // members' feature levels (feature_levels.go)
	// completed is the recent completions the loops' predictor learns from.
	completed *leader.Completed
	// mail runs the site's mail hook on the leader (nil: none).
	mail    *leader.Mail
	cfg     Config
	log     *slog.Logger
	fsm     *quorum.FSM
	q       *quorum.Quorum
	grpc    *grpc.Server
	apiLis  net.Listener
	metrics *metrics
	// contract and health: docs/metrics.md's series (metrics_contract.go)
	// and readiness (health.go).
	contract    *contract
	liveMetrics *leader.LivenessMetrics
	lc          *leader.Lifecycle // leadership: barrier, leader-only loops (package leader)
	health      *healthState
	httpSrv     *http.Server
	fwd         *forwarder
	auth        *authenticator // nil = auth off
	// admit is the admission chain every submission and update passes
	// before it is proposed (package admission).
	admit *admission.Chain
	// The REST API and dashboard (http_api.go).
	sessions   *rest.Sessions
	httpLis    net.Listener
	httpTLS    *tls.Config
	restSrv    *http.Server
	inprocConn *grpc.ClientConn
	powerHist  powerHistory
	// clientTLS is used for calls to other members (nil = plaintext).
	clientTLS *tls.Config

	leader *leaderState // nil unless leading; guarded by mu
	// serviceSamples are the heartbeats' scrapes of service instances;
	// serviceMetrics the services' series (services.go).
	serviceSamples *leader.ServiceSamples
	serviceMetrics *leader.ServiceMetrics
	mu             sync.RWMutex

	wg     sync.WaitGroup
	cancel context.CancelFunc
}

// New opens the member's Raft state and binds its listeners. Call Serve.
func New(cfg Config) (*Server, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("member", cfg.ID)}
	s.metrics = newMetrics(prometheus.NewRegistry())
	s.contract = newContract(s.metrics.reg)
	s.liveMetrics = leader.NewLivenessMetrics(s.metrics.reg)
	s.serviceSamples, s.serviceMetrics = leader.NewServiceSamples(), leader.NewServiceMetrics(s.metrics.reg)
	installRaftMetrics(s.log.Warn)
	s.fsm = quorum.NewFSM()
	s.fsm.OnApply = s.onApply
	s.fsm.Audit = cfg.AuditState
	var serverTLS, peerTLS *tls.Config
	if cfg.TLS.Enabled() {
		var err error
		if serverTLS, err = pki.Server(cfg.TLS); err != nil {
			return nil, err
		}
		if s.clientTLS, err = pki.Client(cfg.TLS); err != nil {
			return nil, err
		}
		if !cfg.InMemRaft {
			if peerTLS, err = pki.Peer(cfg.TLS); err != nil {
				return nil, err
			}
		}
	}
	lis, err := net.Listen("tcp", cfg.APIAddr)
	if err != nil {
		return nil, fmt.Errorf("listen for the API on %s: %w", cfg.APIAddr, err)
	}
	s.apiLis = lis
	s.sessions = rest.NewSessions()
	if err := s.listenHTTP(serverTLS); err != nil {
		lis.Close()
		return nil, err
	}
	q, err := quorum.Open(quorum.Config{
		ID: cfg.ID, DataDir: cfg.DataDir, RaftAddr: cfg.RaftAddr, InMemTransport: cfg.InMemRaft,
		Bootstrap: cfg.Bootstrap || cfg.InMemRaft, Logger: s.log, NoSync: cfg.RaftNoSync, RaftLogLevel: cfg.RaftLogLevel,
		HeartbeatTimeout: cfg.RaftHeartbeatTimeout, ElectionTimeout: cfg.RaftHeartbeatTimeout, LeaderLeaseTimeout: cfg.RaftHeartbeatTimeout / 2,
		FaultInjection: cfg.FaultInjection, TLS: peerTLS, ClusterSecret: cfg.ClusterSecret, PinLevel: cfg.FeatureLevel, Entropy: rand.Reader, TrailingLogs: cfg.RaftTrailingLogs,
	}, s.fsm)
	if err != nil {
		lis.Close()
		s.stopHTTP()
		return nil, err
	}
	s.q = q
	s.completed = leader.NewCompleted(s.view)
	s.mail = leader.NewMail(cfg.MailHook, s.log, s.view)
	q.SetMemberLevels(s.memberLevels)
	s.lc = leader.New(q, s, leader.Config{Logger: s.log})
	s.metrics.registerQuorum(s)
	s.health = newHealthState(s)
	s.registerContractCollector()
	s.fwd = newForwarder(s)
	unary := []grpc.UnaryServerInterceptor{clipErrorsUnary, s.contract.unary, s.metrics.unaryInterceptor}
	stream := []grpc.StreamServerInterceptor{clipErrorsStream, s.contract.stream}
	if cfg.TokensFile != "" || cfg.MungeSocket != "" {
		if s.auth, err = newAuthenticator(s, cfg.TokensFile, cfg.ExtraTokens, s.log); err != nil {
			q.Shutdown()
			lis.Close()
			s.stopHTTP()
			return nil, err
		}
		s.auth.sessions, s.auth.memberToken = s.sessions, cfg.Token
		unary = append(unary, s.auth.unary)
		stream = append(stream, s.auth.stream)
	}
	s.admit = &admission.Chain{View: s.view, Settings: admission.Settings{AuthOn: s.auth != nil, MaxArraySize: cfg.MaxArraySize}}
	unary = append(unary, s.audit, s.fwd.unary)
	stream = append(stream, s.auditStream)
	opts := keepaliveServerOptions()
	if serverTLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(serverTLS)))
	}
	s.grpc = grpc.NewServer(append(opts,
		// A script that is not UTF-8 comes twice (text and bytes).
		grpc.MaxRecvMsgSize(2*model.MaxScriptBytes+(1<<20)),
		grpc.MaxSendMsgSize(64<<20),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
	)...)
	s.health.register(s.grpc)
	latticev1.RegisterAllocationServiceServer(s.grpc, &allocService{s: s})
	latticev1.RegisterNodeServiceServer(s.grpc, &nodeService{s: s})
	latticev1.RegisterAdminServiceServer(s.grpc, &adminService{s: s})
	latticev1.RegisterAgentServiceServer(s.grpc, &agentService{s: s})
	latticev1.RegisterDAGServiceServer(s.grpc, &dagService{s: s})
	latticev1.RegisterStepServiceServer(s.grpc, &stepService{s: s})
	latticev1.RegisterUsageServiceServer(s.grpc, &usageService{s: s})
	latticev1.RegisterAccountServiceServer(s.grpc, &rpc.AccountService{M: rpcMember{s}})
	latticev1.RegisterReservationServiceServer(s.grpc, &reservationService{s: s})
	latticev1.RegisterTerminalServiceServer(s.grpc, &terminalService{s: s})
	latticev1.RegisterDashboardServiceServer(s.grpc, &dashboardService{s: s})
	latticev1.RegisterScalingServiceServer(s.grpc, &scalingService{s: s})
	return s, nil
}

// dialCreds are the transport credentials of this member's calls to other
// members: TLS with the member certificate when configured.
func (s *Server) dialCreds() grpc.DialOption {
	if s.clientTLS != nil {
		return grpc.WithTransportCredentials(credentials.NewTLS(s.clientTLS))
	}
	return grpc.WithTransportCredentials(insecure.NewCredentials())
}

// APIAddr is the address the API listens on.
func (s *Server) APIAddr() string { return s.apiLis.Addr().String() }

// MetricsAddr is where /metrics is served ("" when off).
func (s *Server) MetricsAddr() string {
	if s.httpSrv == nil {
		return ""
	}
	return s.httpSrv.Addr
}

// Quorum exposes the member's quorum (tests and tools).
func (s *Server) Quorum() *quorum.Quorum { return s.q }

// Registry is the Prometheus registry of this member.
func (s *Server) Registry() *prometheus.Registry { return s.metrics.reg }

// Serve starts the API, metrics and the leadership watcher. It returns once
// they run; Stop ends them.
func (s *Server) Serve() error {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if s.cfg.MetricsAddr != "" {
		lis, err := net.Listen("tcp", s.cfg.MetricsAddr)
		if err != nil {
			cancel()
			return fmt.Errorf("listen for metrics on %s: %w", s.cfg.MetricsAddr, err)
		}
		mux := http.NewServeMux()
		gather := prometheus.Gatherers{s.metrics.reg, raftRegistry}
		mux.Handle("/metrics", promhttp.HandlerFor(gather, promhttp.HandlerOpts{Registry: s.metrics.reg}))
		if s.cfg.Pprof {
			// Contention too: a sampled fraction of mutex waits and the
			// blocking events of 100 µs or more (cheap at these rates).
			runtime.SetMutexProfileFraction(10)
			runtime.SetBlockProfileRate(int(100 * time.Microsecond))
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			// Execution traces show where goroutines waited to run (go
			// tool trace -pprof=sched), which profiles do not.
			mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		}
		s.healthHandlers(mux)
		s.httpSrv = &http.Server{Addr: lis.Addr().String(), Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := s.httpSrv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("metrics server", "err", err)
			}
		}()
	}
	if s.auth != nil {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.auth.watch(ctx)
		}()
	}
	s.wg.Add(3)
	go func() {
		defer s.wg.Done()
		s.health.run(ctx)
	}()
	go func() {
		defer s.wg.Done()
		if err := s.grpc.Serve(s.apiLis); err != nil {
			s.log.Error("api server", "err", err)
		}
	}()
	go func() {
		defer s.wg.Done()
		s.lc.Run(ctx)
	}()
	if err := s.serveHTTP(ctx); err != nil {
		s.log.Error("REST API and dashboard not served", "err", err)
	}
	if len(s.cfg.Join) > 0 {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.joinLoop(ctx)
		}()
	}
	return nil
}

// Stop ends everything: leader loops, API, metrics, Raft.
func (s *Server) Stop() {
	if s.cancel != nil {
		s.cancel()
	}
	s.lc.Stop()
	s.stopHTTP()
	stopped := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(2 * time.Second):
		s.grpc.Stop()
	}
	if s.httpSrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = s.httpSrv.Shutdown(ctx)
		cancel()
	}
	s.wg.Wait()
	s.fwd.close()
	if err := s.q.Shutdown(); err != nil {
		s.log.Warn("raft shutdown", "err", err)
	}
}

func (s *Server) currentLeader() *leaderState {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.leader
}

// propose stamps the command's time and proposes it; only on the leader.
func (s *Server) propose(ctx context.Context, c quorum.Command) (*quorum.Result, error) {
	h := c.CommandHeader()
	if h.Time.IsZero() {
		h.Time = s.cfg.Clock()
	}
	start := time.Now()
	r, err := s.q.Propose(ctx, c)
	s.metrics.proposeSeconds.WithLabelValues(c.Type().String()).Observe(time.Since(start).Seconds())
	return r, err
}

// view gives read access to committed state.
func (s *Server) view(fn func(*quorum.State)) { s.q.View(fn) }

func (s *Server) onApply(c quorum.Command, r *quorum.Result) {
	s.metrics.applied.WithLabelValues(c.Type().String()).Inc()
	s.observeApplied(c, r)
	if l := s.currentLeader(); l != nil {
		l.OnApply(c, r)
	}
}

// DefaultVCluster returns a vCluster definition with the defaults of its
// type, named name.
func DefaultVCluster(name string) model.VCluster {
	t := model.TypeForName(name)
	return newVCluster(name, t)
}

// dataPath joins a path under the data dir.
func (s *Server) dataPath(parts ...string) string {
	return filepath.Join(append([]string{s.cfg.DataDir}, parts...)...)
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// VerifyBackup checks a backup file (checksum, structure, invariants).
func VerifyBackup(path string) error {
	_, err := quorum.VerifyBackupFile(path)
	return err
}

// StageRestore verifies a backup and stages it in a member's empty data dir;
// the member installs it when it next bootstraps and leads.
func StageRestore(path, dataDir string) error {
	_, err := quorum.PrepareRestore(path, dataDir)
	return err
}
