package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// The agent's state file (DataDir/agent-state.json) lists every run it
// launched whose end the leader has not acknowledged yet. A run is written
// there (and fsynced) before its process starts, so after a restart the
// agent knows every run it may have started: it adopts the ones still
// running, reports the ones that ended meanwhile with their recorded exit
// status, and reports the others as lost — it never starts one twice.
const stateFileName = "agent-state.json"

// runState is one run in the state file.
type runState struct {
	Launch Launch       `json:"launch"`
	Final  *finalReport `json:"final,omitempty"` // how it ended, until acknowledged
}

type finalReport struct {
	State       string `json:"state"`
	Reason      string `json:"reason,omitempty"`
	HasExitCode bool   `json:"has_exit_code,omitempty"`
	ExitCode    int32  `json:"exit_code,omitempty"`
	Message     string `json:"message,omitempty"`
	Run         int32  `json:"run"`
	EndUnixMs   int64  `json:"end_unix_ms,omitempty"`
	Usage       *Usage `json:"usage,omitempty"`
}

func finalOf(r *latticev1.AllocationReport) *finalReport {
	return &finalReport{State: r.State, Reason: r.Reason, HasExitCode: r.HasExitCode, ExitCode: r.ExitCode, Message: r.Message, Run: r.Run,
		EndUnixMs: r.EndUnixMs, Usage: usageOfProto(r.Usage)}
}

func (f *finalReport) report(id uint64) *latticev1.AllocationReport {
	return &latticev1.AllocationReport{AllocationId: id, State: f.State, Reason: f.Reason, HasExitCode: f.HasExitCode,
		ExitCode: f.ExitCode, Message: f.Message, Run: f.Run, EndUnixMs: f.EndUnixMs, Usage: f.Usage.proto()}
}

type stateFile struct {
	Runs []runState `json:"runs"`
}

func (a *Agent) statePath() string { return filepath.Join(a.cfg.DataDir, stateFileName) }

// statusPath is where a run's supervisor records its exit status.
func (a *Agent) statusPath(id uint64, run int) string {
	return filepath.Join(a.cfg.DataDir, "runs", strconv.FormatUint(id, 10)+"-"+strconv.Itoa(run)+".status")
}

func loadState(path string) (*stateFile, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &stateFile{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read agent state: %w", err)
	}
	var st stateFile
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("agent state %s is damaged (%v): move it aside to start afresh, knowing that its jobs will be reported lost", path, err)
	}
	return &st, nil
}

// saveState makes every change to the durable runs made before the call
// durable (a.mu not held). Writes are group commits: a caller that finds,
// once it holds the file, that a write begun after its change has already
// landed returns at once; otherwise it writes the runs as they are now,
// covering every change waiting behind it. Concurrent launches so share
// one fsync instead of queueing one each.
//
// With virtual runs nothing is written: there is no process to adopt after
// a restart (the leader fails what the new connection does not bring), and
// thousands of simulated nodes in one process would otherwise rewrite and
// fsync a megabyte-sized file for every start and end — a disk load no
// real site has (each node's agent keeps its own few runs) that would
// skew a scale test of the control plane.
func (a *Agent) saveState() error {
	if a.cfg.VirtualRuns {
		return nil
	}
	a.mu.Lock()
	a.stateVersion++
	v := a.stateVersion
	a.mu.Unlock()
	return a.saveStateAt(v)
}

// saveStateAt makes the changes up to version v durable (a.mu not held):
// nothing to do when a write that began after them has landed.
func (a *Agent) saveStateAt(v uint64) error {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	if v <= a.stateWritten {
		return nil
	}
	a.mu.Lock()
	if a.detached {
		a.mu.Unlock()
		return nil
	}
	cur := a.stateVersion
	st := stateFile{Runs: make([]runState, 0, len(a.durable))}
	for _, rs := range a.durable {
		st.Runs = append(st.Runs, *rs)
	}
	a.mu.Unlock()
	sort.Slice(st.Runs, func(i, j int) bool { return st.Runs[i].Launch.AllocID < st.Runs[j].Launch.AllocID })
	b, err := json.Marshal(&st)
	if err != nil {
		return err
	}
	if err := writeFileSync(a.statePath(), b); err != nil {
		return fmt.Errorf("write agent state: %w", err)
	}
	a.stateWritten = cur
	return nil
}

// recordLaunch makes a run durable before it starts.
func (a *Agent) recordLaunch(l Launch) error {
	stored := l
	stored.Script, stored.Env = "", nil // not needed to adopt or report it
	a.mu.Lock()
	a.durable[l.AllocID] = &runState{Launch: stored}
	a.mu.Unlock()
	return a.saveState()
}

// recordEnd keeps how a run ended until the leader acknowledges it. The
// change is written at once only when a restarted agent could not tell
// the same from the supervisor's status file (recoverRuns): a run the
// agent stopped (cancelled, walltime, checkpoint) or one whose status file
// is missing. A run that ended by itself is there already, durably, so its
// end joins the next write (saveSoon) instead of costing an fsync of its
// own.
func (a *Agent) recordEnd(id uint64, r *latticev1.AllocationReport) {
	a.mu.Lock()
	rs := a.durable[id]
	if rs != nil && int32(rs.Launch.RequeueCount)+1 == r.Run {
		rs.Final = finalOf(r)
	}
	a.mu.Unlock()
	if rs == nil {
		return
	}
	if statusTells(rs.Launch.StatusFile, r) {
		a.saveSoon()
		return
	}
	if err := a.saveState(); err != nil {
		a.log.Warn("agent state not saved", "alloc", id, "err", err)
	}
}

// statusTells reports whether recoverRuns would report r from the status
// file alone: it exists and r is what its exit code means by itself.
func statusTells(statusFile string, r *latticev1.AllocationReport) bool {
	if statusFile == "" || !r.HasExitCode || r.Message != "" {
		return false
	}
	switch {
	case r.State == string(model.StateCompleted) && r.ExitCode == 0 && r.Reason == "":
	case r.State == string(model.StateFailed) && r.ExitCode != 0 && r.Reason == model.ReasonNonZeroExit:
	default:
		return false
	}
	code, ok := readStatus(statusFile)
	return ok && int32(code) == r.ExitCode
}

// forgetRun drops a run from the state file: the leader acknowledged its
// end, or the quorum moved past it. The write is deferred (saveSoon): if
// the agent stops before it lands, its successor reports the end once
// more, which the leader acknowledges without effect.
func (a *Agent) forgetRun(id uint64, run int32) {
	a.mu.Lock()
	rs := a.durable[id]
	drop := rs != nil && int32(rs.Launch.RequeueCount)+1 == run
	if drop {
		delete(a.durable, id)
	}
	a.mu.Unlock()
	if !drop {
		return
	}
	if rs.Launch.StatusFile != "" {
		// Removed once the state file no longer lists the run: until
		// then a restarted agent may still need it.
		a.mu.Lock()
		a.forgotten = append(a.forgotten, rs.Launch.StatusFile)
		a.mu.Unlock()
	}
	a.saveSoon()
}

// lazySaveDelay is how long a deferred state change waits for a write.
const lazySaveDelay = 500 * time.Millisecond

// saveSoon writes the state within lazySaveDelay (and then removes the
// status files of the runs it no longer lists), unless another write (a
// launch's) covers the change first: changes that need not be durable at
// once share writes instead of costing an fsync each. The runner's
// Shutdown waits for a pending write; once the runner is closed the write
// is made at once.
func (a *Agent) saveSoon() {
	if a.cfg.VirtualRuns {
		return
	}
	a.mu.Lock()
	a.stateVersion++ // a write that begins after this covers the change
	a.lazyVersion = a.stateVersion
	pending := a.lazySave
	a.lazySave = true
	a.mu.Unlock()
	if pending {
		return
	}
	if !a.runner.hold() {
		a.flushLazySave()
		return
	}
	t := time.AfterFunc(lazySaveDelay, func() {
		defer a.runner.wg.Done()
		a.flushLazySave()
	})
	a.mu.Lock()
	if a.lazyTimer == nil {
		a.lazyTimer = t
		t = nil
	}
	a.mu.Unlock()
	if t != nil && t.Stop() { // one is pending already
		a.runner.wg.Done()
	}
}

// flushLazySave writes a deferred change now, if one is pending.
func (a *Agent) flushLazySave() {
	a.flushMu.Lock()
	defer a.flushMu.Unlock()
	a.mu.Lock()
	pending, v, files := a.lazySave, a.lazyVersion, a.forgotten
	a.lazySave, a.forgotten = false, nil
	if t := a.lazyTimer; t != nil {
		a.lazyTimer = nil
		if t.Stop() { // it will not run: release what it held
			a.runner.wg.Done()
		}
	}
	a.mu.Unlock()
	if !pending {
		return
	}
	if err := a.saveStateAt(v); err != nil {
		a.log.Warn("agent state not saved", "err", err)
	}
	a.stateMu.Lock()
	landed := a.stateWritten >= v
	a.stateMu.Unlock()
	if !landed { // not written (detached, or failed): keep them for a successor
		return
	}
	for _, f := range files {
		_ = removeIfExists(f)
	}
}

// acknowledged handles the leader's acknowledgement of report r: an end
// (terminal or SUSPENDED) acknowledged is committed, and the run leaves the
// state file.
func (a *Agent) acknowledged(r *latticev1.AllocationReport) {
	st, err := model.ParseAllocState(r.State)
	if err != nil || !(st.Terminal() || st == model.StateSuspended) {
		return
	}
	a.forgetRun(r.AllocationId, r.Run)
}
