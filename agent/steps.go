package agent

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// Steps run the tasks of steps (latticectl run, srun) on this agent's
// nodes. Each task is a process in its own process group; its output and
// its end go back to the leader as StepEvents on the agent's stream.
type stepKey struct {
	alloc uint64
	step  int32
}

type stepTask struct {
	rank int32
	pgid int
	done chan struct{}
	// hangup, when set, is the first thing stopping the task does (a pty
	// task's terminal hangs up: pty.go).
	hangup func()
}

// stepRun is the tasks of one step on one node of this agent.
type stepRun struct {
	key      stepKey
	node     string
	tasks    []*stepTask
	killOnce sync.Once
	// killed and grace (under stepTable.mu): a task started after the
	// kill is stopped at once.
	killed bool
	grace  time.Duration
}

// stepTable is the steps running on this agent, by (allocation, step, node).
type stepTable struct {
	mu   sync.Mutex
	runs map[stepKey][]*stepRun
}

// stepChunk bounds one output event.
const stepChunk = 32 << 10

// launchStep starts the tasks of a step on one node. A task that cannot
// start is reported as exited with code 127 (not found) or 126.
func (a *Agent) launchStep(m *latticev1.StepLaunch) {
	key := stepKey{m.AllocationId, m.StepId}
	run := &stepRun{key: key, node: m.Node}
	a.steps.mu.Lock()
	if a.steps.runs == nil {
		a.steps.runs = map[stepKey][]*stepRun{}
	}
	for _, r := range a.steps.runs[key] {
		if r.node == m.Node {
			a.steps.mu.Unlock()
			a.log.Info("step launch resent; already running", "alloc", m.AllocationId, "step", m.StepId, "node", m.Node)
			return
		}
	}
	a.steps.runs[key] = append(a.steps.runs[key], run)
	a.steps.mu.Unlock()

	var wg sync.WaitGroup
	for _, t := range m.Tasks {
		task, err := a.startTask(m, t)
		if err != nil {
			code := 126
			if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
				code = 127
			}
			a.sendStepEvent(&latticev1.StepEvent{AllocationId: m.AllocationId, StepId: m.StepId, Rank: t.Rank, Stderr: true,
				Data: []byte(fmt.Sprintf("lattice: task %d on %s: %v\n", t.Rank, m.Node, err))})
			a.sendStepEvent(&latticev1.StepEvent{AllocationId: m.AllocationId, StepId: m.StepId, Rank: t.Rank,
				Exited: true, ExitCode: int32(code), Message: err.Error()})
			continue
		}
		a.steps.mu.Lock()
		run.tasks = append(run.tasks, task)
		killed, grace := run.killed, run.grace
		a.steps.mu.Unlock()
		if killed {
			stopTask(task, grace)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-task.done
		}()
	}
	go func() {
		wg.Wait()
		a.steps.mu.Lock()
		defer a.steps.mu.Unlock()
		rs := a.steps.runs[key]
		for i, r := range rs {
			if r == run {
				rs = append(rs[:i:i], rs[i+1:]...)
				break
			}
		}
		if len(rs) == 0 {
			delete(a.steps.runs, key)
		} else {
			a.steps.runs[key] = rs
		}
	}()
}

// StepEnv is the environment of one task: the step's (the caller's), then
// the task's rank variables, Lattice's and Slurm's spellings.
func StepEnv(m *latticev1.StepLaunch, t *latticev1.StepTask) []string {
	env := append([]string(nil), m.Env...)
	rank, local := strconv.Itoa(int(t.Rank)), strconv.Itoa(int(t.LocalRank))
	ntasks, step := strconv.Itoa(int(m.Ntasks)), strconv.Itoa(int(m.StepId))
	nodeID := strconv.Itoa(int(m.NodeIndex))
	return append(env,
		"LATTICE_RANK="+rank, "SLURM_PROCID="+rank,
		"LATTICE_LOCAL_RANK="+local, "SLURM_LOCALID="+local,
		"LATTICE_NTASKS="+ntasks, "SLURM_NTASKS="+ntasks, "SLURM_NPROCS="+ntasks,
		"LATTICE_NODENAME="+m.Node, "SLURMD_NODENAME="+m.Node,
		"LATTICE_NODE_INDEX="+nodeID, "SLURM_NODEID="+nodeID,
		"LATTICE_STEP_ID="+step, "SLURM_STEP_ID="+step, "SLURM_STEPID="+step,
		"LATTICE_STEP_NODELIST="+strings.Join(m.StepNodes, ","),
		"SLURM_STEP_NODELIST="+model.CompressHostlist(m.StepNodes),
		"SLURM_STEP_NUM_NODES="+strconv.Itoa(len(m.StepNodes)),
		"SLURM_STEP_NUM_TASKS="+ntasks,
	)
}

// lookPathIn finds an executable the way a shell with PATH=path would.
func lookPathIn(name, path string) (string, error) {
	if strings.Contains(name, "/") {
		if _, err := os.Stat(name); err != nil {
			return "", err
		}
		return name, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w in PATH", name, exec.ErrNotFound)
}

func envValue(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val // the last one wins, as exec does
		}
	}
	return v
}

func (a *Agent) startTask(m *latticev1.StepLaunch, t *latticev1.StepTask) (*stepTask, error) {
	if m.Pty {
		return a.startPtyTask(m, t)
	}
	if len(m.Command) == 0 {
		return nil, errors.New("empty command")
	}
	// Tagged as this agent's, whoever's job launched it: a restart kills it.
	env := append(StepEnv(m, t), AgentTagEnv+"="+a.runner.tag)
	path, err := lookPathIn(m.Command[0], envValue(env, "PATH"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, m.Command[1:]...)
	cmd.Args[0] = m.Command[0]
	cmd.Env = env
	if m.WorkDir != "" {
		if st, err := os.Stat(m.WorkDir); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("work dir %s does not exist on %s", m.WorkDir, m.Node)
		}
		cmd.Dir = m.WorkDir
	}
	// The tasks run as the allocation's owner, exactly like the job.
	cred, err := a.runner.credential(Launch{AllocID: m.AllocationId, User: m.User})
	if err != nil {
		return nil, err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	task := &stepTask{rank: t.Rank, pgid: cmd.Process.Pid, done: make(chan struct{})}
	var readers sync.WaitGroup
	forward := func(r io.Reader, isErr bool) {
		defer readers.Done()
		buf := make([]byte, stepChunk)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				a.sendStepEvent(&latticev1.StepEvent{AllocationId: m.AllocationId, StepId: m.StepId, Rank: t.Rank,
					Stderr: isErr, Data: append([]byte(nil), buf[:n]...)})
			}
			if err != nil {
				return
			}
		}
	}
	readers.Add(2)
	go forward(stdout, false)
	go forward(stderr, true)
	go func() {
		readers.Wait() // all output is sent before the end
		err := cmd.Wait()
		// What the task left behind in its group goes with it.
		_ = syscall.Kill(-task.pgid, syscall.SIGKILL)
		code := 0
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal())
			} else {
				code = ee.ExitCode()
			}
		default:
			code = 255
		}
		close(task.done)
		a.sendStepEvent(&latticev1.StepEvent{AllocationId: m.AllocationId, StepId: m.StepId, Rank: t.Rank, Exited: true, ExitCode: int32(code)})
	}()
	return task, nil
}

// sendStepEvent queues a step event, waiting for room rather than dropping
// output; an agent with no stream drops it (the leader fails the step).
func (a *Agent) sendStepEvent(ev *latticev1.StepEvent) {
	a.mu.Lock()
	out := a.outbox
	a.mu.Unlock()
	if out == nil {
		return
	}
	select {
	case out <- &latticev1.AgentMessage{Msg: &latticev1.AgentMessage_StepEvent{StepEvent: ev}}:
	case <-time.After(30 * time.Second):
		a.log.Warn("step event dropped: the stream is not draining", "alloc", ev.AllocationId, "step", ev.StepId)
	}
}

// killSteps stops the tasks of a step (step < 0: every step of the
// allocation): SIGTERM to each task's process group, SIGKILL after grace.
func (a *Agent) killSteps(alloc uint64, step int32, grace time.Duration) {
	a.steps.mu.Lock()
	var runs []*stepRun
	for k, rs := range a.steps.runs {
		if k.alloc == alloc && (step < 0 || k.step == step) {
			runs = append(runs, rs...)
		}
	}
	a.steps.mu.Unlock()
	for _, r := range runs {
		r.kill(a, grace)
	}
}

// killAllSteps stops every step task (agent shutdown).
func (a *Agent) killAllSteps(grace time.Duration) {
	a.steps.mu.Lock()
	var runs []*stepRun
	for _, rs := range a.steps.runs {
		runs = append(runs, rs...)
	}
	a.steps.mu.Unlock()
	for _, r := range runs {
		r.kill(a, grace)
	}
	for _, r := range runs {
		for _, t := range r.snapshot(a) {
			<-t.done
		}
	}
}

func (r *stepRun) snapshot(a *Agent) []*stepTask {
	a.steps.mu.Lock()
	defer a.steps.mu.Unlock()
	return append([]*stepTask(nil), r.tasks...)
}

func (r *stepRun) kill(a *Agent, grace time.Duration) {
	r.killOnce.Do(func() {
		a.steps.mu.Lock()
		r.killed, r.grace = true, grace
		tasks := append([]*stepTask(nil), r.tasks...)
		a.steps.mu.Unlock()
		a.log.Info("stopping step", "alloc", r.key.alloc, "step", r.key.step, "node", r.node, "tasks", len(tasks))
		for _, t := range tasks {
			stopTask(t, grace)
		}
	})
}

// stopTask sends SIGTERM to a task's process group, SIGKILL after grace.
func stopTask(t *stepTask, grace time.Duration) {
	if t.hangup != nil {
		t.hangup()
	}
	_ = syscall.Kill(-t.pgid, syscall.SIGTERM)
	go func() {
		select {
		case <-t.done:
		case <-time.After(grace):
			_ = syscall.Kill(-t.pgid, syscall.SIGKILL)
		}
	}()
}

// StepPIDs lists the process group ids of the step tasks running here (tests).
func (a *Agent) StepPIDs() []int {
	a.steps.mu.Lock()
	defer a.steps.mu.Unlock()
	var out []int
	for _, rs := range a.steps.runs {
		for _, r := range rs {
			for _, t := range r.tasks {
				select {
				case <-t.done:
				default:
					out = append(out, t.pgid)
				}
			}
		}
	}
	return out
}
