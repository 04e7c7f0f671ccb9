package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

func restartConfig(dir string) Config {
	return Config{ID: "a1", Servers: []string{"127.0.0.1:1"}, DataDir: dir, KeepJobs: true, Grace: 2 * time.Second,
		Nodes: []model.Node{{Name: "n1", HomeVCluster: "hpc-batch", IdleWatts: 100, BusyWatts: 400}}}
}

func assignMsg(id uint64, run int32, script string) *latticev1.ServerMessage {
	return &latticev1.ServerMessage{Msg: &latticev1.ServerMessage_Assign{Assign: &latticev1.Assignment{
		Allocation: &latticev1.Allocation{Id: id, RequeueCount: run, Nodes: []string{"n1"},
			Request: &latticev1.AllocationRequest{Script: script, WalltimeSeconds: 300}},
		LaunchNode: "n1"}}}
}

// pendingReports lists the agent's unacknowledged reports of id.
func pendingReports(a *Agent, id uint64) []*latticev1.AllocationReport {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []*latticev1.AllocationReport
	for _, r := range a.pending {
		if r.AllocationId == id {
			out = append(out, r)
		}
	}
	return out
}

func waitReport(t *testing.T, a *Agent, id uint64, state model.AllocState) *latticev1.AllocationReport {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, r := range pendingReports(a, id) {
			if r.State == string(state) {
				return r
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %s report of %d; pending %v", state, id, pendingReports(a, id))
	return nil
}

// The frozen agent / leader change / restart sequence: an agent starts an
// assignment and stops before its RUNNING report is committed (so the
// allocation is still STAGING); a new leader resends the assignment to the
// restarted agent. The job must run once: adopted, not launched again.
func TestResentAssignmentAfterRestartLaunchesOnce(t *testing.T) {
	dir := t.TempDir()
	marks := filepath.Join(dir, "launches")
	script := "#!/bin/sh\necho launched >> " + marks + "\nsleep 2\nexit 0\n"

	a1, err := New(restartConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	a1.handle(assignMsg(5, 0, script))
	waitReport(t, a1, 5, model.StateRunning)
	a1.handle(assignMsg(5, 0, script)) // resent while it runs: nothing new
	a1.detach()                        // the agent stops (frozen, killed) with its report unacknowledged
	if st, _ := os.ReadFile(filepath.Join(dir, stateFileName)); !strings.Contains(string(st), `"LaunchID":"5.1"`) {
		t.Fatalf("the state file does not record launch 5.1:\n%s", st)
	}

	a2, err := New(restartConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a2.runner.Shutdown(time.Second) })
	if !a2.runner.IsRunning(5) {
		t.Fatal("the restarted agent did not adopt the running job")
	}
	a2.handle(assignMsg(5, 0, script)) // the new leader resends the assignment
	waitReport(t, a2, 5, model.StateRunning)
	r := waitReport(t, a2, 5, model.StateCompleted)
	if !r.HasExitCode || r.ExitCode != 0 || r.Run != 1 {
		t.Errorf("end report %v, want COMPLETED exit 0 of run 1", r)
	}
	b, _ := os.ReadFile(marks)
	if n := strings.Count(string(b), "launched"); n != 1 {
		t.Fatalf("the job was launched %d times, want once", n)
	}
	// Acknowledged, the run leaves the state file.
	a2.mu.Lock()
	var seq uint64
	for s, p := range a2.pending {
		if p.AllocationId == 5 && p.State == string(model.StateCompleted) {
			seq = p.Seq
		}
		_ = s
	}
	a2.mu.Unlock()
	a2.handle(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_Ack{Ack: &latticev1.ReportAck{Seq: seq}}})
	// The deferred write (saveSoon) lands within lazySaveDelay.
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := loadState(a2.statePath())
		if err == nil && len(st.Runs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("state 5 s after the acknowledgement: %+v, %v; want no runs", st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Its status file goes right after that write (not atomically with it).
	for deadline := time.Now().Add(2 * time.Second); fileExists(a2.statusPath(5, 0)) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if fileExists(a2.statusPath(5, 0)) {
		t.Error("the acknowledged run's status file is still there")
	}
}

// A run whose launch was recorded but whose processes are gone (the agent
// died between recording and starting, or the node rebooted) is reported
// lost after a restart and never started by a resent assignment.
func TestRecordedRunWithoutProcessIsReportedLost(t *testing.T) {
	dir := t.TempDir()
	a1, err := New(restartConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := a1.recordLaunch(Launch{AllocID: 9, RequeueCount: 2, StatusFile: a1.statusPath(9, 2)}); err != nil {
		t.Fatal(err)
	}
	a1.detach()
	a2, err := New(restartConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a2.runner.Shutdown(time.Second) })
	r := waitReport(t, a2, 9, model.StateFailed)
	if r.Reason != model.ReasonNodeFailure || r.Run != 3 {
		t.Errorf("report %v, want FAILED NodeFailure of run 3", r)
	}
	a2.handle(assignMsg(9, 2, "#!/bin/sh\nexit 0\n"))
	if a2.runner.IsRunning(9) {
		t.Fatal("a resent assignment of a lost run started it again")
	}
}

// Exits while the agent is down are reported with their real exit code;
// processes of the agent it cannot account for are killed before it connects.
func TestRestartReportsExitWhileDownAndKillsStrays(t *testing.T) {
	dir := t.TempDir()
	a1, err := New(restartConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	a1.handle(assignMsg(3, 0, "#!/bin/sh\nsleep 0.3\nexit 5\n"))
	waitReport(t, a1, 3, model.StateRunning)
	// A stray: a process carrying the agent's tag that no run accounts for
	// (a step task, or the rest of a job whose record is gone).
	stray := filepath.Join(dir, "stray.sh")
	if err := os.WriteFile(stray, []byte("#!/bin/sh\nsleep 300\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := execTagged(t, stray, a1.runner.tag)
	a1.detach()
	time.Sleep(time.Second) // the job ends while no agent watches

	a2, err := New(restartConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a2.runner.Shutdown(time.Second) })
	r := waitReport(t, a2, 3, model.StateFailed)
	if !r.HasExitCode || r.ExitCode != 5 || r.Reason != model.ReasonNonZeroExit {
		t.Errorf("report %v, want FAILED NonZeroExit with the real exit code 5", r)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the stray process survived the restart")
	}
}

// The leader's walltime backstop stops a run with reason WalltimeExceeded:
// unlike the quorum's own ends, the agent reports how it ended.
func TestBackstopCancelIsReported(t *testing.T) {
	cfg := restartConfig(t.TempDir())
	cfg.KeepJobs = false
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.runner.Shutdown(time.Second) })
	a.handle(assignMsg(31, 0, "#!/bin/sh\nsleep 300\n"))
	waitReport(t, a, 31, model.StateRunning)
	a.handle(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_Cancel{Cancel: &latticev1.CancelAllocation{
		AllocationId: 31, Reason: model.ReasonWalltimeExceeded, GraceSeconds: 1}}})
	r := waitReport(t, a, 31, model.StateFailed)
	if r.Reason != model.ReasonWalltimeExceeded {
		t.Errorf("report %v, want FAILED WalltimeExceeded", r)
	}
}

// The quorum ended allocation 5 without the agent (its node was lost) and
// gave the node to allocation 6; the agent still runs 5 and stops it when
// told. 6 must not start before 5's processes are gone: never two
// allocations on a node, whatever the order messages arrive in.
func TestLaunchWaitsForAnotherAllocationOnItsNode(t *testing.T) {
	dir := t.TempDir()
	marks := filepath.Join(dir, "marks")
	a, err := New(restartConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.runner.Shutdown(time.Second) })
	a.handle(assignMsg(5, 0, "#!/bin/sh\ntrap 'sleep 1; echo end5 >> "+marks+"; exit 0' TERM\necho start5 >> "+marks+"\nsleep 30 & wait\n"))
	waitReport(t, a, 5, model.StateRunning)
	a.handle(assignMsg(6, 0, "#!/bin/sh\necho start6 >> "+marks+"\n"))
	time.Sleep(300 * time.Millisecond)
	if a.runner.IsRunning(6) || len(pendingReports(a, 6)) > 0 {
		t.Fatal("allocation 6 started while 5 still runs on its node")
	}
	a.handle(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_Cancel{Cancel: &latticev1.CancelAllocation{
		AllocationId: 5, Reason: model.ReasonNodeFailure, GraceSeconds: 5}}})
	waitReport(t, a, 6, model.StateCompleted)
	b, _ := os.ReadFile(marks)
	if got := strings.Fields(string(b)); strings.Join(got, " ") != "start5 end5 start6" {
		t.Errorf("order %v, want start5 end5 start6", got)
	}
}

// The hello names each allocation the agent runs, or has an unacknowledged
// end of, with its run.
func TestHelloNamesRuns(t *testing.T) {
	dir := t.TempDir()
	a, err := New(restartConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.runner.Shutdown(time.Second) })
	a.handle(assignMsg(8, 0, "#!/bin/sh\nexit 0\n"))
	waitReport(t, a, 8, model.StateCompleted)
	a.handle(assignMsg(7, 2, "#!/bin/sh\nsleep 30\n"))
	waitReport(t, a, 7, model.StateRunning)
	got := map[uint64]int32{}
	for _, k := range a.knownRuns() {
		got[k.AllocationId] = k.Run
	}
	if len(got) != 2 || got[7] != 3 || got[8] != 1 {
		t.Errorf("hello runs %v, want 7 → run 3 (running), 8 → run 1 (ended, unacknowledged)", got)
	}
}

// A run that ended by itself while the agent ran has its end written to the
// state file only later (saveSoon): an agent that stops before that write
// and before the leader acknowledged the end still leaves its successor
// the real exit code, read from the supervisor's status file.
func TestEndNotYetWrittenSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	a1, err := New(restartConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	a1.handle(assignMsg(8, 0, "#!/bin/sh\nexit 3\n"))
	if r := waitReport(t, a1, 8, model.StateFailed); r.ExitCode != 3 {
		t.Fatalf("first agent reported exit %d, want 3", r.ExitCode)
	}
	a1.detach() // stops at once: the deferred write never lands
	st, err := loadState(filepath.Join(dir, stateFileName))
	if err != nil || len(st.Runs) != 1 {
		t.Fatalf("state file after the stop: %+v, %v; want the run, recorded at its launch", st, err)
	}

	a2, err := New(restartConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a2.runner.Shutdown(time.Second) })
	r := waitReport(t, a2, 8, model.StateFailed)
	if !r.HasExitCode || r.ExitCode != 3 || r.Reason != model.ReasonNonZeroExit {
		t.Errorf("restarted agent reported %+v, want FAILED NonZeroExit with exit code 3", r)
	}
}

// An interactive allocation's placeholder (no process) survives an agent
// restart: still running afterwards, and ended by a cancel.
func TestPlaceholderSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	a1, err := New(restartConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	msg := assignMsg(12, 0, "")
	msg.GetAssign().Allocation.Request = &latticev1.AllocationRequest{Interactive: true, WalltimeSeconds: 300}
	a1.handle(msg)
	waitReport(t, a1, 12, model.StateRunning)
	a1.detach()
	a2, err := New(restartConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a2.runner.Shutdown(time.Second) })
	if !a2.runner.IsRunning(12) {
		t.Fatalf("the interactive allocation did not survive the restart; reports %v", pendingReports(a2, 12))
	}
	a2.handle(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_Cancel{Cancel: &latticev1.CancelAllocation{AllocationId: 12, Reason: model.ReasonCancelled}}})
	waitReport(t, a2, 12, model.StateCancelled)
}
