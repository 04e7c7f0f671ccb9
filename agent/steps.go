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

	"github.com/latticehpc/lattice/agent/supervise"
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
	// pmi is the step's PMI server on this node (srun --mpi=pmi2), or nil.
	pmi *pmiNode
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
	if usesPMI(m.Mpi) {
		run.pmi = newPMINode(a, m)
	}
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

	cgID, place, cgErr := a.runner.stepCgroupOf(m.AllocationId, m.StepId, m.Node)
	var wg sync.WaitGroup
	for _, t := range m.Tasks {
		task, err := (*stepTask)(nil), cgErr // nothing runs outside its cgroup
		if cgErr == nil {
			task, err = a.startTask(m, t, run.pmi, place)
		}
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
	var groups []int
	for _, t := range run.snapshot(a) {
		groups = append(groups, t.pgid)
	}
	guard := a.guardStep(m.AllocationId, groups)
	go func() {
		wg.Wait()
		guard.stop()
		if run.pmi != nil {
			run.pmi.close()
		}
		u := a.runner.endStepCgroup(cgID, m.StepId, m.Node)
		a.sendStepEvent(&latticev1.StepEvent{AllocationId: m.AllocationId, StepId: m.StepId, NodeDone: true, Usage: u.proto()})
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
// what srun and slurmstepd set, Lattice's and Slurm's spellings: the
// step's size and layout (SLURM_STEP_*, and SLURM_NTASKS, SLURM_NNODES,
// SLURM_TASKS_PER_NODE as the step has them, while SLURM_NODELIST stays
// the job's, as in Slurm 22.05) and the task's place in it.
func StepEnv(m *latticev1.StepLaunch, t *latticev1.StepTask) []string {
	env := append([]string(nil), m.Env...)
	rank, local := strconv.Itoa(int(t.Rank)), strconv.Itoa(int(t.LocalRank))
	ntasks, step := strconv.Itoa(int(m.Ntasks)), strconv.Itoa(int(m.StepId))
	nodeID := strconv.Itoa(int(m.NodeIndex))
	nodelist := model.CompressHostlist(m.StepNodes)
	nnodes := strconv.Itoa(len(m.StepNodes))
	counts := make([]int, len(m.StepTasksPerNode))
	for i, c := range m.StepTasksPerNode {
		counts[i] = int(c)
	}
	if len(counts) == 0 { // from a leader that did not send the layout
		counts = model.TasksPerNode(len(m.StepNodes), int(m.Ntasks), 0)
	}
	perNode := model.CompressCounts(counts)
	// The global ranks on this node (SLURM_GTIDS).
	first := 0
	for i := 0; i < int(m.NodeIndex) && i < len(counts); i++ {
		first += counts[i]
	}
	var gtids []string
	if int(m.NodeIndex) < len(counts) {
		for r := first; r < first+counts[m.NodeIndex]; r++ {
			gtids = append(gtids, strconv.Itoa(r))
		}
	}
	env = append(env,
		"LATTICE_RANK="+rank, "SLURM_PROCID="+rank,
		"LATTICE_LOCAL_RANK="+local, "SLURM_LOCALID="+local,
		"LATTICE_NTASKS="+ntasks, "SLURM_NTASKS="+ntasks, "SLURM_NPROCS="+ntasks,
		"LATTICE_NODENAME="+m.Node, "SLURMD_NODENAME="+m.Node,
		"LATTICE_NODE_INDEX="+nodeID, "SLURM_NODEID="+nodeID,
		"LATTICE_STEP_ID="+step, "SLURM_STEP_ID="+step, "SLURM_STEPID="+step,
		"LATTICE_STEP_NODELIST="+strings.Join(m.StepNodes, ","),
		"SLURM_STEP_NODELIST="+nodelist, // SLURM_NODELIST stays the job's
		"SLURM_STEP_NUM_NODES="+nnodes, "SLURM_NNODES="+nnodes,
		"SLURM_STEP_NUM_TASKS="+ntasks,
		"SLURM_STEP_TASKS_PER_NODE="+perNode, "SLURM_TASKS_PER_NODE="+perNode,
		"SLURM_GTIDS="+strings.Join(gtids, ","),
		"SLURM_DISTRIBUTION=block",
		"SLURM_TOPOLOGY_ADDR="+m.Node, "SLURM_TOPOLOGY_ADDR_PATTERN=node",
	)
	if m.CpusPerTask > 0 {
		env = append(env, "SLURM_CPUS_PER_TASK="+strconv.Itoa(int(m.CpusPerTask)))
	}
	return env
}

// lookPathIn finds an executable the way a shell with PATH=path started
// in directory wd would: a name with a '/' relative to wd, otherwise the
// first match in PATH (whose relative entries are relative to wd too).
func lookPathIn(name, path, wd string) (string, error) {
	abs := func(p string) string {
		if filepath.IsAbs(p) || wd == "" {
			return p
		}
		return filepath.Join(wd, p)
	}
	if strings.Contains(name, "/") {
		p := abs(name)
		if _, err := os.Stat(p); err != nil {
			return "", err
		}
		return p, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := abs(filepath.Join(dir, name))
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

// usesPMI says whether srun --mpi=TYPE asks for the step's PMI server.
func usesPMI(mpi string) bool { return mpi == "pmi2" || mpi == "pmi1" || mpi == "pmi" }

func (a *Agent) startTask(m *latticev1.StepLaunch, t *latticev1.StepTask, pmi *pmiNode, place *supervise.Cgroups) (*stepTask, error) {
	if m.Pty {
		return a.startPtyTask(m, t, place)
	}
	argv := m.Command
	if m.MultiProg != "" {
		lines, err := model.ParseMultiProg(m.MultiProg)
		if err != nil {
			return nil, fmt.Errorf("multi-prog: %w", err)
		}
		if argv = model.ArgvFor(lines, int(t.Rank)); argv == nil {
			return nil, fmt.Errorf("multi-prog: no line for task %d", t.Rank)
		}
	}
	if len(argv) == 0 {
		return nil, errors.New("empty command")
	}
	// Tagged as this agent's, whoever's job launched it: a restart kills it.
	env := append(StepEnv(m, t), AgentTagEnv+"="+a.runner.tag)
	if envValue(env, "PATH") == "" {
		env = append(env, "PATH="+DefaultJobPath)
	}
	path, err := lookPathIn(argv[0], envValue(env, "PATH"), m.WorkDir)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = argv[0]
	uts := a.ownHostname(m.Node)
	if uts {
		// sh sets the node's name as the host name of its new UTS
		// namespace, then becomes the task.
		cmd = exec.Command("/bin/sh", append([]string{"-c", `printf %s "$0" > /proc/sys/kernel/hostname && exec "$@"`, m.Node, path}, argv[1:]...)...)
	}
	var pmiConn, pmiTask *os.File
	if pmi != nil {
		var pmiEnv []string
		if pmiConn, pmiTask, pmiEnv, err = pmi.taskEnd(t.Rank); err != nil {
			return nil, err
		}
		defer pmiTask.Close() // the task has its copy once started
		defer func() {
			if pmiConn != nil {
				pmiConn.Close() // not started
			}
		}()
		env = append(env, pmiEnv...)
		cmd.ExtraFiles = []*os.File{pmiTask}
	}
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
	if uts {
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWUTS
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := startInCgroup(place, cmd); err != nil {
		return nil, err
	}
	if pmiConn != nil {
		go pmi.serve(pmiConn, t.Rank)
		pmiConn = nil
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
		code := supervise.ExitCode(err) // 128+N when signal N ended it
		if code < 0 {
			code = 255 // it could not be waited for
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
