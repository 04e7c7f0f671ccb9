package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"

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
}

func finalOf(r *latticev1.AllocationReport) *finalReport {
	return &finalReport{State: r.State, Reason: r.Reason, HasExitCode: r.HasExitCode, ExitCode: r.ExitCode, Message: r.Message, Run: r.Run,
		EndUnixMs: r.EndUnixMs}
}

func (f *finalReport) report(id uint64) *latticev1.AllocationReport {
	return &latticev1.AllocationReport{AllocationId: id, State: f.State, Reason: f.Reason, HasExitCode: f.HasExitCode,
		ExitCode: f.ExitCode, Message: f.Message, Run: f.Run, EndUnixMs: f.EndUnixMs}
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

// writeFileSync replaces path with data durably: temp file, fsync, rename,
// fsync of the directory.
func writeFileSync(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
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

// recordEnd keeps how a run ended until the leader acknowledges it.
func (a *Agent) recordEnd(id uint64, r *latticev1.AllocationReport) {
	a.mu.Lock()
	rs := a.durable[id]
	if rs != nil && int32(rs.Launch.RequeueCount)+1 == r.Run {
		rs.Final = finalOf(r)
	}
	a.mu.Unlock()
	if rs != nil {
		if err := a.saveState(); err != nil {
			a.log.Warn("agent state not saved", "alloc", id, "err", err)
		}
	}
}

// forgetRun drops a run from the state file: the leader acknowledged its
// end, or the quorum moved past it.
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
		_ = removeIfExists(rs.Launch.StatusFile)
	}
	if err := a.saveState(); err != nil {
		a.log.Warn("agent state not saved", "alloc", id, "err", err)
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
