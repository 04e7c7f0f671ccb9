package scale

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// ThroughputConfig is the Lattice side of the Slurm comparison
// (../shared/peers/slurm/throughput.sh): trivial one-node jobs on a small
// cluster of real runs, submitted by concurrent CLI loops, or queued first
// and released at once.
type ThroughputConfig struct {
	Bin        string // latticed
	Latticectl string // the CLI the loops run, as users would
	Dir        string
	Nodes      int // simulated nodes (real processes run the jobs)
	Jobs       int
	Loops      int // concurrent `latticectl submit` loops
	// Phased: drain every node, submit the jobs as one array, then undrain
	// them all at once (Slurm: partition DOWN, sbatch, partition UP); the
	// completion rate counts from the release.
	Phased  bool
	MaxWait time.Duration
	Log     io.Writer
}

// ThroughputReport is one throughput run, in throughput.sh's terms.
type ThroughputReport struct {
	Mode           string  `json:"mode"` // concurrent or phased
	Nodes          int     `json:"nodes"`
	Jobs           int     `json:"jobs"`
	Submitted      int     `json:"submitted"`
	Completed      int     `json:"completed"`
	Failed         int     `json:"failed"`
	SubmitSec      float64 `json:"submit_seconds"`
	TotalSec       float64 `json:"complete_seconds"` // from the first submission (concurrent) or the release (phased)
	SubmitPerSec   float64 `json:"submitted_per_second"`
	CompletePerSec float64 `json:"completed_per_second"`
	// Where the time went: the leader's scheduling cycles while the jobs
	// ran, and the CPU the processes used (members, agents without their jobs).
	Cycles      int     `json:"cycles"`
	CycleMeanMs float64 `json:"cycle_mean_ms"`
	MembersCPUs float64 `json:"members_cpu_seconds"`
	AgentsCPUs  float64 `json:"agents_cpu_seconds"`
	// JobsCPUs: the runs that ended (their supervisors and processes, as
	// the agents waited for them); CLICPUs: the latticectl processes;
	// HarnessCPUs: this process; MachineCPUs: every CPU of the machine
	// busy, whoever used it (other work on the machine included).
	JobsCPUs    float64 `json:"jobs_cpu_seconds"`
	CLICPUs     float64 `json:"cli_cpu_seconds"`
	HarnessCPUs float64 `json:"harness_cpu_seconds"`
	MachineCPUs float64 `json:"machine_busy_cpu_seconds"`
	LoadAverage string  `json:"load_average"`
	// Commands: the Raft commands the leader applied during the run, by
	// type (lattice_quorum_commands_applied_total), each one entry with a
	// bolt commit on every member.
	Commands map[string]int `json:"commands_applied"`
}

func (t *ThroughputReport) String() string {
	return t.summary() + t.perJob() + t.entries()
}

// entries is the Raft commands applied per job that ended, by type.
func (t *ThroughputReport) entries() string {
	n := float64(t.Completed + t.Failed)
	if n == 0 || len(t.Commands) == 0 {
		return ""
	}
	types := make([]string, 0, len(t.Commands))
	total := 0
	for k, v := range t.Commands {
		types = append(types, k)
		total += v
	}
	sort.Strings(types)
	var b strings.Builder
	fmt.Fprintf(&b, "\n  Raft commands per job: %.2f (", float64(total)/n)
	for i, k := range types {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %.2f", k, float64(t.Commands[k])/n)
	}
	b.WriteString(")")
	return b.String()
}

// perJob is the CPU breakdown divided by the jobs that ended, in ms.
func (t *ThroughputReport) perJob() string {
	n := float64(t.Completed + t.Failed)
	if n == 0 {
		return ""
	}
	ms := func(s float64) float64 { return 1000 * s / n }
	return fmt.Sprintf("\n  CPU per job: members %.1f ms, agents %.1f ms, job with its supervisor %.1f ms, latticectl %.1f ms, harness %.1f ms; total %.1f ms",
		ms(t.MembersCPUs), ms(t.AgentsCPUs), ms(t.JobsCPUs), ms(t.CLICPUs), ms(t.HarnessCPUs),
		ms(t.MembersCPUs+t.AgentsCPUs+t.JobsCPUs+t.CLICPUs+t.HarnessCPUs))
}

func (t *ThroughputReport) summary() string {
	return fmt.Sprintf("lattice throughput: submitted %.1f/s, completed %.1f/s over %d jobs on %d nodes\n"+
		"  details: mode=%s; submit phase %.2fs; all complete %.2fs after %s; %d/%d COMPLETED, %d failed\n"+
		"  %d scheduling cycles (mean %.1f ms); CPU: members %.1f s, agents %.1f s, jobs with their supervisors %.1f s, latticectl %.1f s, harness %.1f s; machine busy %.1f of %.1f CPU-s; load average %s",
		t.SubmitPerSec, t.CompletePerSec, t.Jobs, t.Nodes, t.Mode, t.SubmitSec, t.TotalSec,
		map[string]string{"concurrent": "first submit", "phased": "release"}[t.Mode], t.Completed, t.Submitted, t.Failed,
		t.Cycles, t.CycleMeanMs, t.MembersCPUs, t.AgentsCPUs, t.JobsCPUs, t.CLICPUs, t.HarnessCPUs, t.MachineCPUs,
		float64(runtime.NumCPU())*t.TotalSec, t.LoadAverage)
}

type cpuUse struct{ members, agents, jobs, cli, harness, machine float64 }

// Throughput runs one comparison run and stops what it started.
func Throughput(ctx context.Context, cfg ThroughputConfig) (*ThroughputReport, error) {
	if cfg.Nodes < 1 || cfg.Jobs < 1 || cfg.Loops < 1 {
		return nil, errors.New("scale: nodes, jobs and loops must be positive")
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 10 * time.Minute
	}
	logf := func(format string, args ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
		}
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	c := &cluster{bin: cfg.Bin, dir: cfg.Dir, agentPprof: true}
	defer c.stop()
	logf("starting three members and %d simulated nodes (real processes) in %s", cfg.Nodes, cfg.Dir)
	if err := c.startQuorum(ctx, []string{"--vclusters", "hpc-batch", "--tenants", "default", "--max-array-size", "100000", "--raft-heartbeat-timeout", "1s", "--pprof"}); err != nil {
		return nil, err
	}
	agents := max(1, min(4, cfg.Nodes/32))
	if err := c.startAgents(cfg.Nodes, agents, 16, func(k int) string { return "hpc-batch:" + strconv.Itoa(k) }, false); err != nil {
		return nil, err
	}
	if err := c.waitNodes(ctx, cfg.Nodes, 2*time.Minute); err != nil {
		return nil, err
	}
	var servers []string
	for _, m := range c.members {
		servers = append(servers, m.api)
	}
	env := append(os.Environ(), "LATTICE_SERVER="+strings.Join(servers, ","), "LATTICE_TENANT=default")
	leader, err := c.leader(ctx)
	if err != nil {
		return nil, err
	}
	nodeNames := func() ([]string, error) {
		resp, err := leader.nodes.List(ctx, &latticev1.ListNodesRequest{})
		if err != nil {
			return nil, err
		}
		out := make([]string, len(resp.Nodes))
		for i, n := range resp.Nodes {
			out[i] = n.Name
		}
		return out, nil
	}
	common := []string{"-N", "1", "-t", "1", "--stdout", "/dev/null", "--stderr", "/dev/null"}
	cpu := func() (u cpuUse) {
		for _, m := range c.members {
			if ps, err := readProc(m.pid()); err == nil {
				u.members += ps.CPU.Seconds()
			}
		}
		for _, a := range c.agents {
			if a.Process != nil {
				if ps, err := readProc(a.Process.Pid); err == nil {
					u.agents += ps.CPU.Seconds()
					u.jobs += ps.ChildCPU.Seconds()
				}
			}
		}
		// An agent's job supervisor daemon is not its child once started
		// (its own session; it outlives the agent): its CPU and its jobs'
		// count with the jobs. (It starts with the first job, after cpu0,
		// and ends after cpu1.)
		for _, dir := range c.agentDirs {
			if b, err := os.ReadFile(filepath.Join(dir, "supervisor.pid")); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					if ps, err := readProc(pid); err == nil {
						u.jobs += ps.CPU.Seconds() + ps.ChildCPU.Seconds()
					}
				}
			}
		}
		if ps, err := readProc(os.Getpid()); err == nil {
			u.harness, u.cli = ps.CPU.Seconds(), ps.ChildCPU.Seconds()
		}
		if b, err := machineBusy(); err == nil {
			u.machine = b.Seconds()
		}
		return u
	}
	cpu0 := cpu()
	before, _ := scrape(ctx, leader.metrics)
	rep := &ThroughputReport{Mode: "concurrent", Nodes: cfg.Nodes, Jobs: cfg.Jobs}
	var t0, tStart time.Time
	if cfg.Phased {
		rep.Mode = "phased"
		names, err := nodeNames()
		if err != nil {
			return nil, err
		}
		if err := forEachNode(ctx, names, func(ctx context.Context, n string) error {
			_, err := leader.nodes.Drain(ctx, &latticev1.DrainRequest{Name: n, Reason: "throughput: held"})
			return err
		}); err != nil {
			return nil, fmt.Errorf("hold the nodes: %w", err)
		}
		t0 = time.Now()
		args := append([]string{"submit", "--parsable", "--array", fmt.Sprintf("0-%d", cfg.Jobs-1)}, common...)
		out, err := runCLI(ctx, cfg.Latticectl, env, append(args, "--", "true")...)
		if err != nil {
			return nil, fmt.Errorf("submit the array: %w: %s", err, out)
		}
		rep.Submitted = cfg.Jobs
		rep.SubmitSec = time.Since(t0).Seconds()
		logf("queued %d tasks in %.2f s; releasing the nodes", cfg.Jobs, rep.SubmitSec)
		tStart = time.Now()
		if err := forEachNode(ctx, names, func(ctx context.Context, n string) error {
			_, err := leader.nodes.Undrain(ctx, &latticev1.UndrainRequest{Name: n})
			return err
		}); err != nil {
			return nil, fmt.Errorf("release the nodes: %w", err)
		}
	} else {
		t0 = time.Now()
		tStart = t0
		var wg sync.WaitGroup
		var mu sync.Mutex
		var firstErr error
		per, extra := cfg.Jobs/cfg.Loops, cfg.Jobs%cfg.Loops
		for w := range cfg.Loops {
			n := per
			if w < extra {
				n++
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range n {
					args := append([]string{"submit", "--parsable"}, common...)
					out, err := runCLI(ctx, cfg.Latticectl, env, append(args, "--", "true")...)
					mu.Lock()
					if err != nil {
						if firstErr == nil {
							firstErr = fmt.Errorf("%w: %s", err, out)
						}
					} else {
						rep.Submitted++
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		rep.SubmitSec = time.Since(t0).Seconds()
		if firstErr != nil {
			logf("some submissions failed: %v", firstErr)
		}
		logf("%d submitted by %d CLI loops in %.2f s", rep.Submitted, cfg.Loops, rep.SubmitSec)
	}
	deadline := time.Now().Add(cfg.MaxWait)
	for {
		l, err := c.leader(ctx)
		if err == nil {
			if s, err := scrape(ctx, l.metrics); err == nil {
				rep.Completed = int(s.sum("lattice_allocations", `state="COMPLETED"`))
				rep.Failed = int(s.sum("lattice_allocations", `state="FAILED"`) + s.sum("lattice_allocations", `state="CANCELLED"`))
			}
		}
		if rep.Completed+rep.Failed >= rep.Submitted || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	rep.TotalSec = time.Since(tStart).Seconds()
	if after, err := scrape(ctx, leader.metrics); err == nil && before != nil {
		h := histDelta(before, after, "lattice_scheduler_cycle_duration_seconds")
		rep.Cycles, rep.CycleMeanMs = int(h.Count), 1000*h.mean()
		rep.Commands = commandsApplied(before, after)
	}
	cpu1 := cpu()
	rep.MembersCPUs, rep.AgentsCPUs = cpu1.members-cpu0.members, cpu1.agents-cpu0.agents
	rep.JobsCPUs, rep.CLICPUs = cpu1.jobs-cpu0.jobs, cpu1.cli-cpu0.cli
	rep.HarnessCPUs, rep.MachineCPUs = cpu1.harness-cpu0.harness, cpu1.machine-cpu0.machine
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		rep.LoadAverage = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	if rep.SubmitSec > 0 {
		rep.SubmitPerSec = float64(rep.Submitted) / rep.SubmitSec
	}
	rep.CompletePerSec = float64(rep.Completed+rep.Failed) / rep.TotalSec
	return rep, nil
}

// commandsApplied is the growth of lattice_quorum_commands_applied_total
// between two samples, by command type.
func commandsApplied(before, after sample) map[string]int {
	const name = "lattice_quorum_commands_applied_total"
	out := map[string]int{}
	for _, typ := range after.labelValues(name, "command") {
		want := `command="` + typ + `"`
		if d := int(after.sum(name, want) - before.sum(name, want)); d > 0 {
			out[typ] = d
		}
	}
	return out
}

func runCLI(ctx context.Context, bin string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// forEachNode calls fn for every node, 16 at a time.
func forEachNode(ctx context.Context, names []string, fn func(context.Context, string) error) error {
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for _, n := range names {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if err := fn(cctx, n); err != nil {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("node %s: %w", n, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}
