package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// counterJob is a job that cannot checkpoint: it appends a line to file
// every 0.1 s, n times, then exits 0. Its processes carry marker.
func counterJob(file string, n int, marker string) *latticev1.AllocationRequest {
	return &latticev1.AllocationRequest{Name: "victim", Vcluster: "hpc-batch", NodesMin: 2, WalltimeSeconds: 600, PriorityClass: 2,
		Env:     []string{"PRE_MARK=" + marker},
		Command: []string{fmt.Sprintf("i=0; while [ $i -lt %d ]; do i=$((i+1)); echo $i >> %s; sleep 0.1; done", n, file)}}
}

func lines(file string) int {
	b, _ := os.ReadFile(file)
	return strings.Count(string(b), "\n")
}

// frozenProof says how the processes carrying marker are stopped: their
// /proc state (T: stopped; the cgroup v1 freezer shows D) or their
// cgroup's freezer (v2 cgroup.events "frozen 1", v1 freezer.state
// FROZEN); "" when some runs.
func frozenProof(marker string) string {
	pids := markedPids(marker)
	if len(pids) == 0 {
		return ""
	}
	var proof []string
	for _, pid := range pids {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return ""
		}
		s := string(stat)
		state := ""
		if i := strings.LastIndex(s, ") "); i >= 0 && i+2 < len(s) {
			state = s[i+2 : i+3]
		}
		if state == "T" || state == "t" || state == "D" {
			proof = append(proof, fmt.Sprintf("%d state %s", pid, state))
			continue
		}
		cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		frozen := false
		for _, line := range strings.Split(string(cg), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) != 3 {
				continue
			}
			switch {
			case parts[0] == "0":
				ev, _ := os.ReadFile(filepath.Join("/sys/fs/cgroup/unified", parts[2], "cgroup.events"))
				frozen = frozen || strings.Contains(string(ev), "frozen 1")
			case parts[1] == "freezer":
				st, _ := os.ReadFile(filepath.Join("/sys/fs/cgroup/freezer", parts[2], "freezer.state"))
				frozen = frozen || strings.TrimSpace(string(st)) == "FROZEN"
			}
		}
		if !frozen {
			return ""
		}
		proof = append(proof, fmt.Sprintf("%d state %s in a frozen cgroup", pid, state))
	}
	return strings.Join(proof, ", ")
}

// TestPreemptModesEndToEnd: a dev stack (real processes) with two nodes; a
// class-2 job that cannot checkpoint holds both, a class-7 job of one node
// arrives. By default the victim is not touched and explain says why; with
// preempt-mode suspend it is frozen (its processes stopped, /proc), the
// preemptor runs, and it resumes and finishes correctly; with requeue it is
// requeued and runs again.
func TestPreemptModesEndToEnd(t *testing.T) {
	dir := t.TempDir()
	d := startDevWith(t, dir, 2, []string{"hpc-batch"}, nil)
	d.setVCluster(t, &latticev1.SetVClusterRequest{Name: "hpc-batch", CycleMs: 1000, ReclaimGraceMs: 5000})
	urgentReq := func() *latticev1.AllocationRequest {
		return &latticev1.AllocationRequest{Name: "urgent", Vcluster: "hpc-batch", NodesMin: 1, WalltimeSeconds: 120, PriorityClass: 7, Command: []string{"sleep 2"}}
	}

	// 1. The default: never killed, and explain says why.
	out := filepath.Join(dir, "default.out")
	mark := "pre-default-" + strconv.Itoa(os.Getpid())
	victim := d.submit(t, counterJob(out, 400, mark))
	d.waitState(t, victim, model.StateRunning)
	urgent := d.submit(t, urgentReq())
	waitFor(t, 30*time.Second, "explain to say preemption does not apply", func() bool {
		e, err := d.allocs.Explain(context.Background(), &latticev1.ExplainRequest{Id: urgent})
		return err == nil && strings.Contains(e.GetMessage(), "cannot checkpoint") && strings.Contains(e.GetMessage(), victim)
	})
	time.Sleep(3 * time.Second) // several cycles
	if v := d.get(t, victim); v.State != string(model.StateRunning) || v.Preemption != nil || len(markedPids(mark)) == 0 {
		t.Fatalf("default policy: the victim is %s (preemption %+v, processes %v)", v.State, v.Preemption, markedPids(mark))
	}
	if u := d.get(t, urgent); u.State != string(model.StatePending) {
		t.Fatalf("urgent %s without a victim", u.State)
	}
	if _, err := d.allocs.Cancel(context.Background(), &latticev1.CancelRequest{Ids: []string{victim, urgent}}); err != nil {
		t.Fatal(err)
	}
	d.waitState(t, victim, model.StateCancelled)
	noneLeft(t, mark)

	// 2. suspend: frozen while the preemptor runs, resumed, finishes.
	d.setVCluster(t, &latticev1.SetVClusterRequest{Name: "hpc-batch", PreemptMode: "suspend"})
	out = filepath.Join(dir, "suspend.out")
	mark = "pre-suspend-" + strconv.Itoa(os.Getpid())
	victim = d.submit(t, counterJob(out, 60, mark))
	d.waitState(t, victim, model.StateRunning)
	waitFor(t, 10*time.Second, "the victim's first lines", func() bool { return lines(out) >= 3 })
	urgent = d.submit(t, urgentReq())
	v := d.waitState(t, victim, model.StateSuspended)
	if v.Preemption == nil || v.Preemption.Action != string(model.ActionSuspend) || v.Preemption.ForDisplayId != urgent || len(v.SuspendedOn) != 2 || len(v.Nodes) != 0 {
		t.Fatalf("suspended victim: preemption %+v suspended_on %v nodes %v", v.Preemption, v.SuspendedOn, v.Nodes)
	}
	var proof string
	waitFor(t, 10*time.Second, "the victim's processes frozen", func() bool {
		proof = frozenProof(mark)
		return proof != ""
	})
	t.Logf("frozen: %s", proof)
	n := lines(out)
	waitFor(t, 30*time.Second, "the preemptor to start", func() bool {
		u := d.get(t, urgent)
		return u.State == string(model.StateRunning) || u.State == string(model.StateCompleted)
	})
	time.Sleep(time.Second)
	if got := lines(out); got != n && got != n+1 { // one line may be in flight as it freezes
		t.Fatalf("the suspended victim kept running: %d lines, then %d", n, got)
	}
	if len(markedPids(mark)) == 0 {
		t.Fatal("the suspended victim's processes are gone: its memory was not kept")
	}
	d.waitState(t, urgent, model.StateCompleted)
	d.waitState(t, victim, model.StateRunning)
	v = d.waitState(t, victim, model.StateCompleted)
	if v.RequeueCount != 0 || v.SuspendedSeconds < 1 || !v.HasExitCode || v.ExitCode != 0 {
		t.Fatalf("resumed victim: requeues %d suspended %d s exit %d", v.RequeueCount, v.SuspendedSeconds, v.ExitCode)
	}
	if got := lines(out); got != 60 {
		t.Fatalf("the resumed victim wrote %d lines, want 60 (one run, not restarted)", got)
	}
	if !containsRun(historyStates(v), "RUNNING", "SUSPENDED", "RUNNING", "COMPLETED") {
		t.Fatalf("victim history %v", historyStates(v))
	}

	// 3. requeue: stopped and requeued, runs again.
	d.setVCluster(t, &latticev1.SetVClusterRequest{Name: "hpc-batch", PreemptMode: "requeue"})
	out = filepath.Join(dir, "requeue.out")
	mark = "pre-requeue-" + strconv.Itoa(os.Getpid())
	victim = d.submit(t, counterJob(out, 30, mark))
	d.waitState(t, victim, model.StateRunning)
	urgent = d.submit(t, urgentReq())
	d.waitState(t, urgent, model.StateCompleted)
	v = d.waitState(t, victim, model.StateCompleted)
	if v.RequeueCount != 1 || v.Preemption == nil || v.Preemption.Action != string(model.ActionRequeue) {
		t.Fatalf("requeued victim: requeues %d preemption %+v", v.RequeueCount, v.Preemption)
	}
	if !containsRun(historyStates(v), "CHECKPOINTING", "SUSPENDED", "PENDING") {
		t.Fatalf("victim history %v", historyStates(v))
	}
	noneLeft(t, mark)
}
