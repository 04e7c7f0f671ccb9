package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/checkpoint"
	"github.com/latticehpc/lattice/model"
)

// These tests run the whole loop of elastic sharing on the dev stack: real
// processes on simulated nodes, the vCluster loops planning reclaims and
// preemptions, the quorum committing them, the dispatcher delivering the
// checkpoint request and the agent stopping and requeueing the work.

func (d *devStack) setVCluster(t *testing.T, req *latticev1.SetVClusterRequest) {
	t.Helper()
	if _, err := latticev1.NewAdminServiceClient(d.conn).SetVCluster(context.Background(), req); err != nil {
		t.Fatalf("set vcluster %s: %v", req.Name, err)
	}
}

func (d *devStack) get(t *testing.T, id string) *latticev1.Allocation {
	t.Helper()
	a, err := d.allocs.Get(context.Background(), &latticev1.GetAllocationRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (d *devStack) homeOf(t *testing.T) map[string]string {
	t.Helper()
	r, err := d.nodes.List(context.Background(), &latticev1.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	home := map[string]string{}
	for _, n := range r.Nodes {
		home[n.Name] = n.HomeVcluster
	}
	return home
}

func historyStates(a *latticev1.Allocation) []string {
	var out []string
	for _, h := range a.History {
		out = append(out, h.State)
	}
	return out
}

func containsRun(h []string, run ...string) bool {
	for i := 0; i+len(run) <= len(h); i++ {
		if slices.Equal(h[i:i+len(run)], run) {
			return true
		}
	}
	return false
}

// checkpointingApp is a job that checkpoints on its signal: it records the
// signal and its restart count in marker, acknowledges by creating
// $LATTICE_CHECKPOINT_DONE and exits. On a restart it finishes at once.
func checkpointingApp(marker string) string {
	return `m=` + marker + `
echo "start restart=$LATTICE_RESTART_COUNT dir=$LATTICE_CHECKPOINT_DIR" >> "$m"
if [ "${LATTICE_RESTART_COUNT:-0}" -ge 1 ]; then test -f "$LATTICE_CHECKPOINT_DIR/state" && echo resumed >> "$m"; exit 0; fi
trap 'echo "got USR1" >> "$m"; echo step > "$LATTICE_CHECKPOINT_DIR/state"; touch "$LATTICE_CHECKPOINT_DONE"; exit 0' USR1
i=0; while [ $i -lt 600 ]; do sleep 0.2; i=$((i+1)); done
`
}

func TestReclaimEndToEnd(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir, 8) // hpc-batch: 4 nodes, ml-training: 4 nodes, 2 groups
	d.setVCluster(t, &latticev1.SetVClusterRequest{Name: "hpc-batch", ReclaimGraceMs: 20000, ReclaimBackoffMs: 2000})
	home := d.homeOf(t)
	marker := filepath.Join(dir, "borrower.log")

	borrower := d.submit(t, &latticev1.AllocationRequest{Name: "borrower", Vcluster: "ml-training", NodesMin: 6, WalltimeSeconds: 600,
		Checkpoint: "signal", Command: []string{checkpointingApp(marker)}})
	a := d.waitState(t, borrower, model.StateRunning)
	var lent []string
	for _, n := range a.Nodes {
		if home[n] == "hpc-batch" {
			lent = append(lent, n)
		}
	}
	if len(lent) != 2 {
		t.Fatalf("borrower runs on %v: want 2 hpc-batch nodes among them", a.Nodes)
	}
	nodes, err := d.nodes.List(context.Background(), &latticev1.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Nodes {
		if slices.Contains(lent, n.Name) && (n.HomeVcluster != "hpc-batch" || n.CurrentVcluster != "ml-training" || !n.Borrowed) {
			t.Fatalf("lent node %s: home %s current %s borrowed %v", n.Name, n.HomeVcluster, n.CurrentVcluster, n.Borrowed)
		}
	}
	waitFor(t, 10*time.Second, "the borrower's start marker", func() bool {
		b, _ := os.ReadFile(marker)
		return strings.Contains(string(b), "start restart=0")
	})

	homeJob := d.submit(t, &latticev1.AllocationRequest{Name: "home", Vcluster: "hpc-batch", NodesMin: 4, WalltimeSeconds: 120,
		Command: []string{"sleep 1"}})
	h := d.waitState(t, homeJob, model.StateCompleted)
	for _, n := range h.Nodes {
		if home[n] != "hpc-batch" {
			t.Fatalf("home job ran on %v, not only on hpc-batch nodes", h.Nodes)
		}
	}
	b := d.get(t, borrower)
	if !containsRun(historyStates(b), "CHECKPOINTING", "SUSPENDED", "PENDING") {
		t.Fatalf("borrower history %v", historyStates(b))
	}
	if b.Preemption == nil || b.Preemption.Kind != model.PreemptReclaim || b.Preemption.ByVcluster != "hpc-batch" || b.RequeueCount != 1 {
		t.Fatalf("borrower preemption %+v requeues %d", b.Preemption, b.RequeueCount)
	}
	if b.State == string(model.StateFailed) || b.State == string(model.StateCancelled) {
		t.Fatalf("borrower ended %s", b.State)
	}
	out, _ := os.ReadFile(marker)
	if !strings.Contains(string(out), "got USR1") {
		t.Fatalf("the borrower never got SIGUSR1 before its nodes were taken:\n%s", out)
	}
	e, err := d.allocs.Explain(context.Background(), &latticev1.ExplainRequest{Id: borrower})
	if err != nil {
		t.Fatal(err)
	}
	if b.State == string(model.StatePending) && !strings.Contains(e.Message, "reclaimed by vCluster hpc-batch") {
		t.Fatalf("explain does not say who reclaimed it: %q", e.Message)
	}
	// Once the back-off is over it borrows again and finishes as a restart.
	b = d.waitState(t, borrower, model.StateCompleted)
	out, _ = os.ReadFile(marker)
	if !strings.Contains(string(out), "start restart=1") || !strings.Contains(string(out), "resumed") {
		t.Fatalf("the restart did not see LATTICE_RESTART_COUNT=1 and its checkpoint dir:\n%s", out)
	}
	if b.CheckpointCount != 1 {
		t.Fatalf("checkpoints %d", b.CheckpointCount)
	}
}

func TestPreemptionEndToEnd(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir, 8)
	d.setVCluster(t, &latticev1.SetVClusterRequest{Name: "hpc-batch", ReclaimGraceMs: 20000, SetLending: true, AllowLending: false})
	marker := filepath.Join(dir, "victim.log")
	victim := d.submit(t, &latticev1.AllocationRequest{Name: "victim", Vcluster: "hpc-batch", NodesMin: 4, WalltimeSeconds: 600,
		PriorityClass: 2, Checkpoint: "signal", Command: []string{checkpointingApp(marker)}})
	d.waitState(t, victim, model.StateRunning)
	waitFor(t, 10*time.Second, "the victim's start marker", func() bool {
		b, _ := os.ReadFile(marker)
		return strings.Contains(string(b), "start restart=0")
	})
	urgent := d.submit(t, &latticev1.AllocationRequest{Name: "urgent", Vcluster: "hpc-batch", NodesMin: 4, WalltimeSeconds: 120,
		PriorityClass: 7, Command: []string{"sleep 1"}})
	d.waitState(t, urgent, model.StateCompleted)
	v := d.get(t, victim)
	if v.Preemption == nil || v.Preemption.Kind != model.PreemptClass || v.Preemption.ForDisplayId != urgent {
		t.Fatalf("victim preemption %+v", v.Preemption)
	}
	if !containsRun(historyStates(v), "CHECKPOINTING", "SUSPENDED", "PENDING") {
		t.Fatalf("victim history %v", historyStates(v))
	}
	out, _ := os.ReadFile(marker)
	if !strings.Contains(string(out), "got USR1") {
		t.Fatalf("the victim was not asked to checkpoint:\n%s", out)
	}
	d.waitState(t, victim, model.StateCompleted)
}

// A job that completes while it is asked to checkpoint ends COMPLETED.
func TestPreemptedJobCompletingInGraceEndsCompleted(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir, 8)
	d.setVCluster(t, &latticev1.SetVClusterRequest{Name: "hpc-batch", ReclaimGraceMs: 20000, SetLending: true, AllowLending: false})
	// On USR1 it finishes its work (exit 0) without writing a checkpoint.
	victim := d.submit(t, &latticev1.AllocationRequest{Name: "finisher", Vcluster: "hpc-batch", NodesMin: 4, WalltimeSeconds: 600,
		PriorityClass: 1, Checkpoint: "signal", Command: []string{"trap 'exit 0' USR1; while :; do sleep 0.2; done"}})
	d.waitState(t, victim, model.StateRunning)
	time.Sleep(300 * time.Millisecond) // the trap is set
	urgent := d.submit(t, &latticev1.AllocationRequest{Vcluster: "hpc-batch", NodesMin: 4, WalltimeSeconds: 120, PriorityClass: 8, Command: []string{"true"}})
	v := d.waitState(t, victim, model.StateCompleted)
	if v.RequeueCount != 0 || !v.HasExitCode || v.ExitCode != 0 {
		t.Fatalf("finisher %+v", v)
	}
	d.waitState(t, urgent, model.StateCompleted)
}

// A user checkpoint in webhook mode: the application gets the POST and
// acknowledges through the API; the job keeps running.
func TestWebhookCheckpointAcknowledgedThroughTheAPI(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir, 8)
	var mu sync.Mutex
	var got map[string]any
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		_ = json.NewDecoder(r.Body).Decode(&got)
	}))
	defer hook.Close()
	id := d.submit(t, &latticev1.AllocationRequest{NodesMin: 1, WalltimeSeconds: 300, Checkpoint: "webhook", CheckpointWebhook: hook.URL,
		Command: []string{"sleep 60"}})
	d.waitState(t, id, model.StateRunning)
	resp, err := d.allocs.Checkpoint(context.Background(), &latticev1.CheckpointAllocationRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	if resp.State != string(model.StateCheckpointing) || resp.DeadlineUnixMs == 0 {
		t.Fatalf("checkpoint answer %+v", resp)
	}
	waitFor(t, 10*time.Second, "the webhook POST", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return got != nil
	})
	mu.Lock()
	if got["allocation"] != id || got["checkpoint_dir"] == "" || got["deadline"] == "" {
		t.Fatalf("webhook body %v", got)
	}
	mu.Unlock()
	if _, err := d.allocs.CheckpointDone(context.Background(), &latticev1.CheckpointDoneRequest{Id: id}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the acknowledged checkpoint", func() bool {
		a := d.get(t, id)
		return a.State == string(model.StateRunning) && a.CheckpointCount == 1 && a.LastCheckpointUnixMs != 0
	})
	// Not running a checkpoint any more: a second acknowledgement is refused.
	if _, err := d.allocs.CheckpointDone(context.Background(), &latticev1.CheckpointDoneRequest{Id: id}); err == nil {
		t.Fatal("CheckpointDone of a RUNNING allocation was accepted")
	}
	// A job that cannot checkpoint is refused with the reason.
	none := d.submit(t, &latticev1.AllocationRequest{NodesMin: 1, Command: []string{"sleep 30"}})
	d.waitState(t, none, model.StateRunning)
	if _, err := d.allocs.Checkpoint(context.Background(), &latticev1.CheckpointAllocationRequest{Id: none}); err == nil ||
		!strings.Contains(err.Error(), "--checkpoint none") {
		t.Fatalf("checkpoint of a --checkpoint none job: %v", err)
	}
}

// An application that ignores the request is stopped after the grace and
// requeued all the same.
func TestIgnoredCheckpointIsStoppedAfterTheGrace(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir, 8)
	d.setVCluster(t, &latticev1.SetVClusterRequest{Name: "hpc-batch", ReclaimGraceMs: 2000, SetLending: true, AllowLending: false})
	victim := d.submit(t, &latticev1.AllocationRequest{Vcluster: "hpc-batch", NodesMin: 4, WalltimeSeconds: 600, PriorityClass: 1,
		Checkpoint: "signal", Command: []string{"trap '' USR1 TERM; while :; do sleep 0.2; done"}})
	d.waitState(t, victim, model.StateRunning)
	urgent := d.submit(t, &latticev1.AllocationRequest{Vcluster: "hpc-batch", NodesMin: 4, WalltimeSeconds: 120, PriorityClass: 9, Command: []string{"true"}})
	d.waitState(t, urgent, model.StateCompleted)
	v := d.get(t, victim)
	if v.RequeueCount != 1 || v.CheckpointCount != 0 {
		t.Fatalf("ignoring victim: requeues %d checkpoints %d, history %v", v.RequeueCount, v.CheckpointCount, historyStates(v))
	}
	var suspended *latticev1.Transition
	for _, h := range v.History {
		if h.State == string(model.StateSuspended) {
			suspended = h
		}
	}
	if suspended == nil || suspended.Reason != "CheckpointTimeout" {
		t.Fatalf("suspended transition %+v", suspended)
	}
}

// The leader's checkpoint broker: sbatch's --signal=SIG@SECS lead time, and
// a proactive checkpoint when the cost model says it pays. Both keep the
// job running.
func TestCheckpointBroker(t *testing.T) {
	dir := t.TempDir()
	params := checkpoint.DefaultParams()
	params.MinRunTime, params.DefaultCheckpointMinutes, params.StorageCostNodeHours = time.Second, 0.001, 0
	params.FailureRatePerNodeHour = 1000 // every minute of work is at risk: checkpoint as soon as allowed
	d := startDevWith(t, dir, 8, []string{"hpc-batch", "ml-training"}, func(c *Config) {
		c.Checkpoint, c.BrokerInterval = params, 200*time.Millisecond
	})
	marker := filepath.Join(dir, "signals.log")
	app := `trap 'echo "got USR2" >> ` + marker + `; touch "$LATTICE_CHECKPOINT_DONE"' USR2
i=0; while [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done`

	// 60 s of walltime, signalled 57 s before its end: after about 3 s.
	lead := d.submit(t, &latticev1.AllocationRequest{NodesMin: 1, WalltimeSeconds: 60, Checkpoint: "signal",
		CheckpointSignal: "USR2", CheckpointSignalSecs: 57, Command: []string{app}})
	reasons := func(id string) []string {
		var out []string
		for _, h := range d.get(t, id).History {
			if h.State == string(model.StateCheckpointing) {
				out = append(out, h.Reason)
			}
		}
		return out
	}
	waitFor(t, 20*time.Second, "the --signal lead-time checkpoint", func() bool {
		return slices.Contains(reasons(lead), "signal") && d.get(t, lead).State == string(model.StateRunning)
	})
	time.Sleep(time.Second)
	if n := strings.Count(strings.Join(reasons(lead), " "), "signal"); n != 1 {
		t.Fatalf("the --signal lead time was sent %d times in one run: %v", n, reasons(lead))
	}
	if b, _ := os.ReadFile(marker); !strings.Contains(string(b), "got USR2") {
		t.Fatal("the job never got its --signal")
	}

	// A long runner (no --signal lead time) is checkpointed proactively.
	long := d.submit(t, &latticev1.AllocationRequest{NodesMin: 1, WalltimeSeconds: 3600, Checkpoint: "signal",
		CheckpointSignal: "USR2", Command: []string{app}})
	waitFor(t, 20*time.Second, "a proactive checkpoint", func() bool {
		a := d.get(t, long)
		for _, h := range a.History {
			if h.State == string(model.StateCheckpointing) && h.Reason == "proactive" {
				return a.CheckpointCount >= 1
			}
		}
		return false
	})
}
