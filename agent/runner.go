package agent

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/latticehpc/lattice/model"
)

// Launch is everything needed to start one allocation's entrypoint.
type Launch struct {
	AllocID    uint64
	DisplayID  string
	ArrayJobID uint64
	ArrayIndex int
	Name       string
	Tenant     string
	User       string // who submitted it; a root agent runs it as this user
	VCluster   string
	Command    []string // one string: run through sh -c; several: argv, executed directly
	Script     string   // batch script contents
	Env        []string
	WorkDir    string
	Nodes      []string
	Walltime   time.Duration
	Grace      time.Duration
	Stdout     string // output file pattern; empty = the data dir's log file
	Stderr     string
	Checkpoint model.CheckpointMode
	// RequeueCount is how often the allocation went back to the queue
	// before this run (LATTICE_RESTART_COUNT); with AllocID it names the run.
	RequeueCount int
	// CheckpointSignal, CheckpointHook and CheckpointWebhook are the
	// request's own settings, used when a checkpoint request leaves them
	// out (0 = SIGUSR1).
	CheckpointSignal  syscall.Signal
	CheckpointHook    string
	CheckpointWebhook string
	// CheckpointDir is LATTICE_CHECKPOINT_DIR; the runner sets it to
	// <checkpoint root>/<allocation id> when empty.
	CheckpointDir string
	// StatusFile, when set, runs the entrypoint under a supervisor that
	// records its exit status there (supervise.go), so the run can be
	// adopted by a restarted agent.
	StatusFile string `json:",omitempty"`
	// Placeholder: an interactive allocation's entrypoint, which starts no
	// process and waits until the allocation is ended (its steps run as
	// step tasks).
	Placeholder bool `json:",omitempty"`
	// GPUs of the launch node (CUDA_VISIBLE_DEVICES, SLURM_GPUS_ON_NODE).
	GPUs int `json:",omitempty"`
	// CPUs of the launch node (SLURM_CPUS_ON_NODE; 0: this host's).
	CPUs int `json:",omitempty"`
	// Tasks is the request's task settings (SLURM_NTASKS and friends).
	Tasks TaskSpec `json:",omitzero"`
	// Started is when the run started (walltime of an adopted run).
	Started time.Time `json:",omitzero"`
	// LaunchID names this launch: ALLOC.RUN, the allocation and its run
	// (requeue count + 1) as the quorum numbers them. The agent writes it
	// to its state file (fsynced) before the process starts, and an
	// assignment whose launch id is recorded never starts a process again.
	LaunchID string `json:",omitempty"`
	// MemLimitBytes is the run's memory limit on this node (--mem,
	// --mem-per-cpu; 0 = none); BusyWatts the node's configured busy draw
	// (the energy estimate where RAPL is missing).
	MemLimitBytes int64 `json:",omitempty"`
	BusyWatts     int   `json:",omitempty"`
}

// launchID is the id of the launch of run requeue+1 of allocation id.
func launchID(id uint64, requeue int) string { return fmt.Sprintf("%d.%d", id, requeue+1) }

// CheckpointDoneFile is the file, inside LATTICE_CHECKPOINT_DIR, whose
// appearance acknowledges a checkpoint (LATTICE_CHECKPOINT_DONE).
const CheckpointDoneFile = "checkpoint-done"

// DonePath is LATTICE_CHECKPOINT_DONE of a launch.
func (l *Launch) DonePath() string { return filepath.Join(l.CheckpointDir, CheckpointDoneFile) }

// Exit is how one run of an allocation ended on this agent.
type Exit struct {
	AllocID      uint64
	RequeueCount int              // the run (Launch.RequeueCount)
	State        model.AllocState // COMPLETED, FAILED, CANCELLED, or SUSPENDED after a checkpoint
	Reason       string
	ExitCode     *int
	Message      string
	// End is when the run ended (zero: unknown).
	End time.Time
	// Usage is what it used, from its cgroup (nil without cgroups).
	Usage *Usage
}

// RunnerConfig configures a Runner.
type RunnerConfig struct {
	// Dir keeps logs and scripts.
	Dir string
	// AllowRootJobs and RunAsSelf: see Config (credential.go).
	AllowRootJobs bool
	RunAsSelf     bool
	// VirtualRuns starts no processes (scale tests of the control plane
	// with thousands of simulated nodes): a run whose command is
	// `sleep SECONDS` lasts that long, any other ends at once with exit 0; a
	// stop ends it at once as the signal would.
	VirtualRuns bool
	// CheckpointDir is the root of the per-allocation checkpoint
	// directories (default Dir/checkpoints).
	CheckpointDir string
	Logger        *slog.Logger
	// OnExit is called once per run when its process has ended.
	OnExit func(Exit)
	// OnCheckpoint is called when a checkpoint that leaves the allocation
	// running ends (acknowledged, failed or timed out), before any exit of
	// the same run.
	OnCheckpoint func(CheckpointResult)
	// HTTPClient posts webhook-mode checkpoint requests (default: a client
	// with the default transport; each request is bounded by its deadline).
	HTTPClient *http.Client
	// ShimDir (holding the srun shim) goes first on a job's PATH; Servers
	// become its LATTICE_SERVER unless the request sets one (shim.go).
	ShimDir string
	Servers []string
	// CAFile becomes a job's LATTICE_CACERT unless the request sets one,
	// so latticectl inside the job (srun) reaches TLS servers.
	CAFile string
	// Supervisor is the job supervisor binary (Config.Supervisor).
	Supervisor string
	// SupervisorMode is SupervisorDaemon (default) or SupervisorPerJob
	// (Config.SupervisorMode).
	SupervisorMode string
	// Cgroups configures the runs' cgroups (cgroup.go); Energy, when set,
	// reads the node's energy counter (µJ, RAPL) for the runs' usage.
	Cgroups CgroupConfig
	Energy  func() (uint64, bool)
}

// Runner starts entrypoints as real processes, each in its own process
// group, and stops them: SIGTERM to the group, a grace period, then SIGKILL.
// Output goes to files; logs can be read back by allocation id.
type Runner struct {
	dir          string // data dir of the agent
	ckptRoot     string
	onExit       func(Exit)
	onCheckpoint func(CheckpointResult)
	http         *http.Client
	log          *slog.Logger
	allowRoot    bool
	runAsSelf    bool
	shimDir      string
	servers      []string
	caFile       string
	tag          string   // AgentTagEnv of the processes it starts
	supervisor   string   // supervisor binary; "" = this executable
	statusDirs   sync.Map // directories of status files made already
	supMode      string   // SupervisorDaemon or SupervisorPerJob
	cwd          string   // the working directory of a run that names none

	daemonMu sync.Mutex // connecting to the daemon
	daemon   *supDaemon // the supervisor daemon (supdaemon.go), once connected

	mu      sync.Mutex
	running map[uint64]*process
	// starting: runs being started (files, fork/exec) outside mu, by allocation.
	starting map[uint64]int
	closed   bool
	wg       sync.WaitGroup
	virtual  bool // RunnerConfig.VirtualRuns

	cg     *cgroupManager // nil: no cgroups (process groups only)
	energy func() (uint64, bool)
}

type process struct {
	cmd      *exec.Cmd
	pgid     int
	launch   Launch
	logs     LogPaths
	stopOnce sync.Once
	// why is set once, before signalling, to the reason the agent stopped
	// it (a cancel may still replace a checkpoint's reason).
	why   string
	done  chan struct{}
	timer *time.Timer
	// ckpt is the checkpoint in progress (under Runner.mu); one with stop
	// stays until the process ends.
	ckpt *checkpointRun
	// reportMu orders a checkpoint's RUNNING outcome before the exit.
	reportMu sync.Mutex
	// stopped ends a virtual run (no process: pgid 0) when it is signalled.
	stopped     chan struct{}
	stoppedOnce sync.Once
	// exited delivers the end of a run started through the supervisor
	// daemon (cmd is nil) or adopted from it.
	exited chan daemonExit
	// cg is the run's cgroup (runner_cgroup.go); nil without one.
	cg *runCgroup
	// frozenAt: suspended since (Runner.Freeze; under Runner.mu).
	frozenAt time.Time
}

// signal sends sig to the process group; a virtual run has none, and ends
// at its first signal. Never signals group 0 (the agent's own).
func (p *process) signal(sig syscall.Signal) error {
	if p.pgid <= 0 {
		if p.stopped != nil {
			p.stoppedOnce.Do(func() { close(p.stopped) })
		}
		return nil
	}
	return syscall.Kill(-p.pgid, sig)
}

// LogPaths records where an allocation's output went.
type LogPaths struct {
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
}

// NewRunner returns a runner keeping logs and scripts under cfg.Dir and
// checkpoint directories under cfg.CheckpointDir.
func NewRunner(cfg RunnerConfig) (*Runner, error) {
	for _, sub := range []string{"logs", "scripts"} {
		if err := os.MkdirAll(filepath.Join(cfg.Dir, sub), 0o755); err != nil {
			return nil, fmt.Errorf("agent data dir: %w", err)
		}
	}
	if cfg.CheckpointDir == "" {
		cfg.CheckpointDir = filepath.Join(cfg.Dir, "checkpoints")
	}
	if err := os.MkdirAll(cfg.CheckpointDir, 0o755); err != nil {
		return nil, fmt.Errorf("agent checkpoint dir: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	tag, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("agent data dir: %w", err)
	}
	sup, err := findSupervisor(cfg.Supervisor)
	if err != nil {
		return nil, err
	}
	mode, err := ParseSupervisorMode(cfg.SupervisorMode)
	if err != nil {
		return nil, err
	}
	cwd, _ := os.Getwd()
	r := &Runner{dir: cfg.Dir, ckptRoot: cfg.CheckpointDir, onExit: cfg.OnExit, onCheckpoint: cfg.OnCheckpoint,
		http: cfg.HTTPClient, log: cfg.Logger, running: map[uint64]*process{}, allowRoot: cfg.AllowRootJobs, runAsSelf: cfg.RunAsSelf,
		shimDir: cfg.ShimDir, servers: cfg.Servers, caFile: cfg.CAFile, tag: tag, virtual: cfg.VirtualRuns, supervisor: sup,
		supMode: mode, cwd: cwd}
	r.sayWhoRunsJobs()
	if !r.virtual {
		r.cg, r.energy = newCgroupManager(cfg.Cgroups, cfg.Dir, r.log), cfg.Energy
		r.log.Info("job supervisor", "binary", cmp.Or(sup, "this executable"), "mode", mode)
	}
	return r, nil
}

// CheckpointDir is LATTICE_CHECKPOINT_DIR of an allocation: the same for
// every run, so a requeued allocation finds what it saved.
func (r *Runner) CheckpointDir(id uint64) string {
	return filepath.Join(r.ckptRoot, strconv.FormatUint(id, 10))
}

// Env builds the environment of an allocation: base (BaseEnv for jobs,
// never the agent's own), the request's, then Lattice's and Slurm's
// variables.
func Env(l Launch, base []string) []string {
	env := append([]string(nil), base...)
	env = append(env, l.Env...)
	id := strconv.FormatUint(l.AllocID, 10)
	nodelist := strings.Join(l.Nodes, ",")
	env = append(env,
		"LATTICE_ALLOC_ID="+id,
		"LATTICE_ALLOC_NAME="+l.Name,
		"LATTICE_NODELIST="+nodelist,
		"LATTICE_NUM_NODES="+strconv.Itoa(len(l.Nodes)),
		"LATTICE_VCLUSTER="+l.VCluster,
		"LATTICE_TENANT="+l.Tenant,
		"SLURM_JOB_ID="+id,
		"SLURM_JOBID="+id,
		"SLURM_JOB_NAME="+l.Name,
		"SLURM_JOB_NODELIST="+model.CompressHostlist(l.Nodes),
		"SLURM_NODELIST="+model.CompressHostlist(l.Nodes),
		"SLURM_NNODES="+strconv.Itoa(len(l.Nodes)),
		"SLURM_JOB_NUM_NODES="+strconv.Itoa(len(l.Nodes)),
		"SLURM_JOB_PARTITION="+l.VCluster,
		"SLURM_JOB_ACCOUNT="+l.Tenant,
	)
	env = append(env, nodeEnv(l)...)
	if l.ArrayJobID != 0 {
		env = append(env,
			"LATTICE_ARRAY_JOB_ID="+strconv.FormatUint(l.ArrayJobID, 10),
			"LATTICE_ARRAY_TASK_ID="+strconv.Itoa(l.ArrayIndex),
			"SLURM_ARRAY_JOB_ID="+strconv.FormatUint(l.ArrayJobID, 10),
			"SLURM_ARRAY_TASK_ID="+strconv.Itoa(l.ArrayIndex),
		)
	}
	if len(l.Nodes) > 0 {
		env = append(env, "SLURMD_NODENAME="+l.Nodes[0], "LATTICE_NODENAME="+l.Nodes[0])
	}
	restarts := strconv.Itoa(l.RequeueCount)
	env = append(env, "LATTICE_RESTART_COUNT="+restarts, "SLURM_RESTART_COUNT="+restarts)
	if l.CheckpointDir != "" {
		env = append(env, "LATTICE_CHECKPOINT_DIR="+l.CheckpointDir, "LATTICE_CHECKPOINT_DONE="+l.DonePath())
	}
	return env
}

// ExpandPattern expands Slurm's filename patterns: %j job id, %A array job
// id, %a array index, %x job name, %N first node, %u user (the tenant when
// it has no owner), %% a percent sign.
func ExpandPattern(p string, l Launch) string {
	if !strings.Contains(p, "%") {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] != '%' || i+1 == len(p) {
			b.WriteByte(p[i])
			continue
		}
		i++
		switch p[i] {
		case 'j':
			b.WriteString(strconv.FormatUint(l.AllocID, 10))
		case 'A':
			if l.ArrayJobID != 0 {
				b.WriteString(strconv.FormatUint(l.ArrayJobID, 10))
			} else {
				b.WriteString(strconv.FormatUint(l.AllocID, 10))
			}
		case 'a':
			b.WriteString(strconv.Itoa(l.ArrayIndex))
		case 'x':
			b.WriteString(l.Name)
		case 'N':
			if len(l.Nodes) > 0 {
				b.WriteString(l.Nodes[0])
			}
		case 'u':
			if l.User != "" {
				b.WriteString(l.User)
			} else {
				b.WriteString(l.Tenant)
			}
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(p[i])
		}
	}
	return b.String()
}

func (r *Runner) logPaths(l Launch) LogPaths {
	resolve := func(pattern, suffix string) string {
		if pattern == "" {
			return filepath.Join(r.dir, "logs", strconv.FormatUint(l.AllocID, 10)+suffix)
		}
		p := ExpandPattern(pattern, l)
		if !filepath.IsAbs(p) && l.WorkDir != "" {
			p = filepath.Join(l.WorkDir, p)
		}
		return p
	}
	lp := LogPaths{Stdout: resolve(l.Stdout, ".out")}
	if l.Stderr == "" && l.Stdout != "" {
		lp.Stderr = lp.Stdout // Slurm: without --error, stderr goes with stdout
	} else {
		lp.Stderr = resolve(l.Stderr, ".err")
	}
	return lp
}

// Paths returns where an allocation's output is, if this agent ran it.
func (r *Runner) Paths(id uint64) (LogPaths, bool) {
	b, err := os.ReadFile(filepath.Join(r.dir, "logs", strconv.FormatUint(id, 10)+".json"))
	if err != nil {
		return LogPaths{}, false
	}
	var lp LogPaths
	if json.Unmarshal(b, &lp) != nil {
		return LogPaths{}, false
	}
	return lp, true
}

// Start launches an allocation. An error means nothing was started.
//
// Starts of different allocations run concurrently: the lock is held only
// to claim the allocation and to record the started process, not for the
// files and the fork/exec in between.
func (r *Runner) Start(l Launch) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return errors.New("agent is shutting down")
	}
	if old, dup := r.running[l.AllocID]; dup {
		r.mu.Unlock()
		if old.launch.RequeueCount == l.RequeueCount {
			return nil
		}
		return fmt.Errorf("allocation %d: run %d still runs here; run %d cannot start before it ends", l.AllocID, old.launch.RequeueCount, l.RequeueCount)
	}
	if run, dup := r.starting[l.AllocID]; dup {
		r.mu.Unlock()
		if run == l.RequeueCount {
			return nil
		}
		return fmt.Errorf("allocation %d: run %d is starting here; run %d cannot start before it ends", l.AllocID, run, l.RequeueCount)
	}
	if r.starting == nil {
		r.starting = map[uint64]int{}
	}
	r.starting[l.AllocID] = l.RequeueCount
	r.wg.Add(1) // Shutdown waits for a start in flight; the process's wait takes it over
	r.mu.Unlock()
	var p *process
	var err error
	if l.Started.IsZero() {
		l.Started = time.Now()
	}
	if r.virtual || l.Placeholder {
		p = &process{launch: l, done: make(chan struct{}), stopped: make(chan struct{})}
	} else {
		p, err = r.spawn(l)
	}
	r.mu.Lock()
	delete(r.starting, l.AllocID)
	if err != nil {
		r.mu.Unlock()
		r.wg.Done()
		return err
	}
	r.running[l.AllocID] = p
	if l.Walltime > 0 {
		p.timer = time.AfterFunc(l.Walltime, func() { r.stop(p, model.ReasonWalltimeExceeded, l.Grace) })
	}
	closed := r.closed
	r.mu.Unlock()
	go func() {
		if p.exited != nil {
			e := <-p.exited
			r.finish(p, e.code, e.msg)
			return
		}
		if p.cmd == nil {
			r.finish(p, virtualWait(p), "")
			return
		}
		err := p.cmd.Wait()
		code, msg := exitCodeOf(err), ""
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			msg = err.Error()
		}
		r.finish(p, code, msg)
	}()
	r.log.Info("allocation started", "alloc", l.AllocID, "run", l.RequeueCount, "pid", p.pgid, "nodes", len(l.Nodes))
	if closed {
		// Shut down while it started: stop it like the others.
		r.stop(p, model.ReasonNodeFailure, l.Grace)
	}
	return nil
}

// spawn prepares the files of a run and starts its process (Runner.mu not held).
func (r *Runner) spawn(l Launch) (*process, error) {
	if l.WorkDir != "" {
		if st, err := os.Stat(l.WorkDir); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("work dir %s does not exist on %s", l.WorkDir, strings.Join(l.Nodes[:min(1, len(l.Nodes))], ""))
		}
	}
	cred, err := r.credential(l)
	if err != nil {
		return nil, err
	}
	procCred := cred // the credential of the process started here
	if l.CheckpointDir == "" {
		l.CheckpointDir = r.CheckpointDir(l.AllocID)
	}
	fresh, err := makeDir(l.CheckpointDir, 0o700)
	if err != nil {
		return nil, fmt.Errorf("checkpoint dir: %w", err)
	}
	started := false
	defer func() {
		if !started {
			_ = os.Remove(l.CheckpointDir) // only if empty: a requeued run's checkpoint stays
		}
	}()
	// An acknowledgement left by an earlier run acknowledges nothing now
	// (a directory made just now holds none).
	if !fresh {
		if err := removeIfExists(l.DonePath()); err != nil {
			return nil, fmt.Errorf("checkpoint done file: %w", err)
		}
	}
	lp := r.logPaths(l)
	meta, _ := json.Marshal(lp)
	if err := os.WriteFile(filepath.Join(r.dir, "logs", strconv.FormatUint(l.AllocID, 10)+".json"), meta, 0o644); err != nil {
		return nil, fmt.Errorf("record log paths: %w", err)
	}
	stdout, err := openLog(lp.Stdout)
	if err != nil {
		return nil, err
	}
	stderr := stdout
	if lp.Stderr != lp.Stdout {
		if stderr, err = openLog(lp.Stderr); err != nil {
			stdout.Close()
			return nil, err
		}
	}
	var cmd *exec.Cmd
	switch {
	case l.Script != "":
		path := filepath.Join(r.dir, "scripts", strconv.FormatUint(l.AllocID, 10)+".sh")
		if err := os.WriteFile(path, []byte(l.Script), 0o700); err != nil {
			closeLogs(stdout, stderr)
			return nil, fmt.Errorf("write script: %w", err)
		}
		if strings.HasPrefix(l.Script, "#!") {
			cmd = exec.Command(path)
		} else {
			cmd = exec.Command("/bin/sh", path)
		}
	case len(l.Command) == 1:
		cmd = exec.Command("/bin/sh", "-c", l.Command[0])
	case len(l.Command) > 1:
		// Run argv itself, not under a wrapper shell: a SIGTERM to the group
		// would end the wrapper, and with it the job, before the program's
		// own handler used its grace (`-- sh -c 'trap ... TERM; ...'`).
		path, err := lookPathIn(l.Command[0], envValue(r.stepEnv(Env(l, BaseEnv())), "PATH"), l.WorkDir)
		if err != nil {
			closeLogs(stdout, stderr)
			return nil, fmt.Errorf("command: %w", err)
		}
		cmd = exec.Command(path, l.Command[1:]...)
		cmd.Args[0] = l.Command[0]
	default:
		closeLogs(stdout, stderr)
		return nil, errors.New("allocation has neither a command nor a script")
	}
	cmd.Env = r.stepEnv(Env(l, BaseEnv()))
	rc, place, err := r.cgroupOf(&l)
	if err != nil {
		closeLogs(stdout, stderr)
		return nil, err
	}
	defer func() {
		if !started && rc != nil {
			close(rc.stop)
			_ = r.cg.kill(rc.id)
			r.cg.remove(rc.id)
		}
	}()
	if err := chownForJob(cred, stdout.Name(), stderr.Name(), l.CheckpointDir, scriptPath(cmd, l)); err != nil {
		closeLogs(stdout, stderr)
		return nil, err
	}
	if l.StatusFile != "" {
		if err := removeIfExists(l.StatusFile); err != nil {
			closeLogs(stdout, stderr)
			return nil, fmt.Errorf("status file: %w", err)
		}
		if err := r.statusDir(filepath.Dir(l.StatusFile)); err != nil {
			closeLogs(stdout, stderr)
			return nil, err
		}
		r.writeLimit(l)
		if r.supMode == SupervisorDaemon {
			cmd.Dir = l.WorkDir
			p, ok, err := r.spawnDaemon(cmd, l, cred, stdout, stderr, place)
			if ok {
				closeLogs(stdout, stderr) // the job holds its own descriptors
				if err != nil {
					return nil, err
				}
				started = true
				p.logs, p.cg = lp, rc
				return p, nil
			}
			// The daemon cannot be used: a supervisor of its own.
		}
		sup, err := supervisorCommand(r.supervisor, l.StatusFile, cmd.Path, cmd.Args)
		if err != nil {
			closeLogs(stdout, stderr)
			return nil, err
		}
		sup.Env = append(append(cmd.Env, superviseEnv+"="+l.StatusFile), cgroupEnv(place)...)
		place = nil // the supervisor places its job
		if cred != nil {
			// The supervisor stays the agent's user (it writes the status
			// file in the agent's data dir); it starts the job as its owner.
			sup.Env = append(sup.Env, superviseCredEnv+"="+formatCredential(cred))
			procCred = nil
		}
		cmd = sup
	}
	cmd.Dir = l.WorkDir
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: procCred}
	if err := startInCgroup(place, cmd); err != nil {
		closeLogs(stdout, stderr)
		return nil, fmt.Errorf("start entrypoint: %w", err)
	}
	closeLogs(stdout, stderr) // the child holds its own descriptors
	started = true
	return &process{cmd: cmd, pgid: cmd.Process.Pid, launch: l, logs: lp, done: make(chan struct{}), cg: rc}, nil
}

// openLog opens an output file for appending, making its directory when
// it is missing (only then: every syscall of a launch counts when jobs are
// short).
func openLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("output dir for %s: %w", path, err)
		}
		f, err = os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	}
	if err != nil {
		return nil, fmt.Errorf("open output %s: %w", path, err)
	}
	return f, nil
}

// makeDir makes dir (and its parents when missing) with perm; fresh
// reports whether dir was made now rather than found.
func makeDir(dir string, perm os.FileMode) (fresh bool, err error) {
	err = os.Mkdir(dir, perm)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrExist):
		if st, serr := os.Stat(dir); serr == nil && st.IsDir() {
			return false, nil
		}
		return false, err
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(filepath.Dir(dir), perm); err != nil {
			return false, err
		}
		if err := os.Mkdir(dir, perm); err != nil {
			if st, serr := os.Stat(dir); serr == nil && st.IsDir() {
				return false, nil
			}
			return false, err
		}
		return true, nil
	}
	return false, err
}

func closeLogs(a, b *os.File) {
	a.Close()
	if b != a {
		b.Close()
	}
}

// shellJoin quotes argv for sh -c.
func shellJoin(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
		}) < 0 {
			parts[i] = a
		} else {
			parts[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(parts, " ")
}

// finish ends a run whose entrypoint (or supervisor) exited with code.
func (r *Runner) finish(p *process, code int, message string) {
	defer r.wg.Done()
	if p.timer != nil {
		p.timer.Stop()
	}
	// Whatever the entrypoint left behind in its group goes with it, and
	// in its cgroup (what left the group).
	_ = p.signal(syscall.SIGKILL)
	usage := r.endCgroup(p)
	close(p.done)
	removeLimit(p.launch.StatusFile)
	r.mu.Lock()
	delete(r.running, p.launch.AllocID)
	why, ck := p.why, p.ckpt
	p.ckpt = nil
	r.mu.Unlock()
	if ck != nil {
		ck.cancel() // ends its hook or webhook
	}

	ex := Exit{AllocID: p.launch.AllocID, RequeueCount: p.launch.RequeueCount, Message: message, End: time.Now()}
	ex.ExitCode = &code
	switch {
	case why == model.ReasonCancelled:
		ex.State, ex.Reason = model.StateCancelled, model.ReasonCancelled
	case suspends(why):
		ex.State, ex.Reason = model.StateSuspended, why
	case why != "":
		ex.State, ex.Reason = model.StateFailed, why
	case ck != nil && ck.order.Stop:
		// It ended by itself while asked to checkpoint and stop.
		acked := fileExists(p.launch.DonePath())
		switch {
		case code == 0 && !acked:
			ex.State = model.StateCompleted // the work was done
		case acked:
			ex.State, ex.Reason = model.StateSuspended, model.ReasonCheckpointed
		default:
			ex.State, ex.Reason = model.StateSuspended, model.ReasonPreempted
			ex.Message = fmt.Sprintf("exited with code %d while asked to checkpoint", code)
		}
	case code == 0:
		ex.State = model.StateCompleted
	default:
		ex.State, ex.Reason = model.StateFailed, model.ReasonNonZeroExit
	}
	cgroupEnd(&ex, why, usage)
	if ex.State.Terminal() && (why == "" || why == model.ReasonCancelled || why == model.ReasonWalltimeExceeded) {
		// No run follows: drop the acknowledgement, and the directory if
		// the application saved nothing in it. (A run the quorum stopped
		// for its own reasons may have a successor elsewhere on shared
		// storage: its directory is left alone.)
		_ = removeIfExists(p.launch.DonePath())
		_ = os.Remove(p.launch.CheckpointDir)
	}
	r.log.Info("allocation ended", "alloc", ex.AllocID, "run", ex.RequeueCount, "state", ex.State, "reason", ex.Reason, "exit_code", code)
	p.reportMu.Lock()
	defer p.reportMu.Unlock()
	if r.onExit != nil {
		r.onExit(ex)
	}
}

// suspends reports whether stopping for why ends the run SUSPENDED: the
// allocation was asked to checkpoint and stop, and will run again.
func suspends(why string) bool {
	switch why {
	case model.ReasonCheckpointed, model.ReasonCheckpointFailed, model.ReasonCheckpointTimeout, model.ReasonPreempted:
		return true
	}
	return false
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// modTime is when path was last written (zero if it cannot be read): for
// a supervisor's status file, when its job ended.
func modTime(path string) time.Time {
	if fi, err := os.Stat(path); err == nil {
		return fi.ModTime()
	}
	return time.Time{}
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Stop stops a running allocation: SIGTERM to its process group, then
// SIGKILL after grace. It returns false when the allocation is not running.
func (r *Runner) Stop(id uint64, reason string, grace time.Duration) bool {
	r.mu.Lock()
	p := r.running[id]
	r.mu.Unlock()
	if p == nil {
		return false
	}
	r.stop(p, reason, grace)
	return true
}

func (r *Runner) stop(p *process, reason string, grace time.Duration) {
	first := false
	p.stopOnce.Do(func() {
		first = true
		r.mu.Lock()
		p.why = reason
		r.mu.Unlock()
		r.log.Info("stopping allocation", "alloc", p.launch.AllocID, "reason", reason, "grace", grace)
		r.thawToStop(p)
		_ = p.signal(syscall.SIGTERM)
		go func() {
			select {
			case <-p.done:
			case <-time.After(grace):
				_ = p.signal(syscall.SIGKILL)
				r.killCgroupOf(p)
			}
		}()
	})
	if !first && reason == model.ReasonCancelled {
		// A cancel while a checkpoint stops it: the user's word wins, the
		// allocation ends CANCELLED rather than SUSPENDED for a requeue.
		r.mu.Lock()
		if suspends(p.why) {
			p.why = reason
		}
		r.mu.Unlock()
	}
}

// Signal sends sig to a running allocation's process group (checkpoint requests).
func (r *Runner) Signal(id uint64, sig syscall.Signal) bool {
	r.mu.Lock()
	p := r.running[id]
	r.mu.Unlock()
	if p == nil {
		return false
	}
	return p.signal(sig) == nil
}

// SetWalltime moves a running allocation's walltime timer to walltime
// after its start (latticectl update --time); false when it does not run
// here or has no timer.
func (r *Runner) SetWalltime(id uint64, walltime time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.running[id]
	if p == nil || p.timer == nil || walltime <= 0 {
		return false
	}
	p.launch.Walltime = walltime
	p.timer.Reset(max(time.Until(p.launch.Started.Add(walltime)), 0))
	r.writeLimit(p.launch)
	return true
}

// Running lists the allocations running now, in id order.
func (r *Runner) Running() []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]uint64, 0, len(r.running))
	for id := range r.running {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// runOf returns the run (requeue count) of id running here now.
func (r *Runner) runOf(id uint64) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.running[id]; p != nil {
		return p.launch.RequeueCount, true
	}
	return 0, false
}

// otherOn returns an allocation other than id whose entrypoint still runs
// here on one of nodes (0 when none). A frozen one does not run: a
// preemption suspended it there for another (its memory stays, its
// processes take no CPU).
func (r *Runner) otherOn(nodes []string, id uint64) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	for other, p := range r.running {
		if other == id || !p.frozenAt.IsZero() {
			continue
		}
		for _, n := range p.launch.Nodes {
			if slices.Contains(nodes, n) {
				return other
			}
		}
	}
	return 0
}

// IsRunning reports whether id runs here now.
func (r *Runner) IsRunning(id uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running[id] != nil
}

// statusDir makes the directory of status files once per runner.
func (r *Runner) statusDir(dir string) error {
	if _, ok := r.statusDirs.Load(dir); ok {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("status dir: %w", err)
	}
	r.statusDirs.Store(dir, true)
	return nil
}

// hold makes Shutdown wait for one more piece of work (released with
// r.wg.Done), unless the runner is closed already (false).
func (r *Runner) hold() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.wg.Add(1)
	return true
}

// Detach stops managing the running allocations without stopping them (an
// agent that leaves its jobs to its successor): no walltime timer fires and
// nothing new starts.
func (r *Runner) Detach() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for _, p := range r.running {
		if p.timer != nil {
			p.timer.Stop()
		}
	}
	r.closeDaemon()
	if r.cg != nil {
		r.cg.close() // only when no job's cgroup is left in it
	}
}

// closeDaemon disconnects from the supervisor daemon, which ends once it
// has neither an agent nor a job.
func (r *Runner) closeDaemon() {
	r.daemonMu.Lock()
	defer r.daemonMu.Unlock()
	if r.daemon != nil {
		r.daemon.close()
		r.daemon = nil
	}
}

// Shutdown stops everything (SIGTERM, grace, SIGKILL) and waits for it.
func (r *Runner) Shutdown(grace time.Duration) {
	r.mu.Lock()
	r.closed = true
	procs := make([]*process, 0, len(r.running))
	for _, p := range r.running {
		procs = append(procs, p)
	}
	r.mu.Unlock()
	for _, p := range procs {
		r.stop(p, model.ReasonNodeFailure, grace)
	}
	r.wg.Wait()
	r.closeDaemon()
	if r.cg != nil {
		r.cg.close()
	}
}

// virtualWait is the life of a virtual run: `sleep SECONDS` lasts that
// long, anything else ends at once; a stop ends it with 143 (SIGTERM).
func virtualWait(p *process) int {
	if p.launch.Placeholder {
		<-p.stopped // an interactive allocation waits until it is ended
		return 0
	}
	var d time.Duration
	if c := p.launch.Command; len(c) == 2 && c[0] == "sleep" {
		if secs, err := strconv.ParseFloat(c[1], 64); err == nil && secs > 0 {
			d = time.Duration(secs * float64(time.Second))
		}
	} else if len(c) == 1 {
		if f := strings.Fields(c[0]); len(f) == 2 && f[0] == "sleep" {
			if secs, err := strconv.ParseFloat(f[1], 64); err == nil && secs > 0 {
				d = time.Duration(secs * float64(time.Second))
			}
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return 0
	case <-p.stopped:
		return 143
	}
}
