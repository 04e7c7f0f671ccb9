package agent

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// harness drives an Agent through handle, as the leader's stream would,
// and reads the reports it sends.
type harness struct {
	t    *testing.T
	a    *Agent
	out  chan *latticev1.AgentMessage
	root string // checkpoint root
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	dir := t.TempDir()
	h := &harness{t: t, root: filepath.Join(dir, "shared"), out: make(chan *latticev1.AgentMessage, 256)}
	a, err := New(Config{ID: "test", Servers: []string{"127.0.0.1:1"}, DataDir: filepath.Join(dir, "agent"),
		CheckpointDir: h.root, Nodes: []model.Node{{Name: "n1", HomeVCluster: "hpc"}}, Grace: time.Second,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	a.outbox = h.out
	a.mu.Unlock()
	h.a = a
	t.Cleanup(func() { a.runner.Shutdown(time.Second) })
	return h
}

func (h *harness) dir(id uint64) string { return filepath.Join(h.root, strconv.FormatUint(id, 10)) }

func (h *harness) assign(id uint64, run int32, req *latticev1.AllocationRequest) {
	h.a.handle(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_Assign{Assign: &latticev1.Assignment{
		Allocation: &latticev1.Allocation{Id: id, DisplayId: strconv.FormatUint(id, 10), RequeueCount: run, Nodes: []string{"n1"}, Request: req},
		LaunchNode: "n1"}}})
}

func (h *harness) checkpoint(c *latticev1.CheckpointRequest) {
	h.a.handle(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_Checkpoint{Checkpoint: c}})
}

func (h *harness) cancel(id uint64, reason string) {
	h.a.handle(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_Cancel{Cancel: &latticev1.CancelAllocation{AllocationId: id, Reason: reason, GraceSeconds: 1}}})
}

func (h *harness) ack(id uint64, failed bool) {
	h.a.handle(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_CheckpointAck{CheckpointAck: &latticev1.CheckpointAck{AllocationId: id, Failed: failed}}})
}

// next returns the next report sent, and acknowledges it as the leader would.
func (h *harness) next(within time.Duration) *latticev1.AllocationReport {
	h.t.Helper()
	timeout := time.After(within)
	for {
		select {
		case m := <-h.out:
			if r := m.GetReport(); r != nil {
				h.a.handle(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_Ack{Ack: &latticev1.ReportAck{Seq: r.Seq}}})
				return r
			}
		case <-timeout:
			h.t.Fatalf("no report within %s", within)
			return nil
		}
	}
}

func (h *harness) expect(state model.AllocState, reason string) *latticev1.AllocationReport {
	h.t.Helper()
	r := h.next(20 * time.Second)
	if r.State != string(state) || r.Reason != reason {
		h.t.Fatalf("report %s/%s (exit %d, %q), want %s/%s", r.State, r.Reason, r.ExitCode, r.Message, state, reason)
	}
	return r
}

func (h *harness) noReport(d time.Duration) {
	h.t.Helper()
	select {
	case m := <-h.out:
		if r := m.GetReport(); r != nil {
			h.t.Fatalf("unexpected report %s/%s for %d", r.State, r.Reason, r.AllocationId)
		}
	case <-time.After(d):
	}
}

// waitFile waits for path to exist.
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !fileExists(path) {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (h *harness) pgid(id uint64) int {
	h.t.Helper()
	h.a.runner.mu.Lock()
	defer h.a.runner.mu.Unlock()
	p := h.a.runner.running[id]
	if p == nil {
		h.t.Fatalf("allocation %d does not run", id)
	}
	return p.pgid
}

func waitGroupGone(t *testing.T, pgid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(pidsInGroup(pgid)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if left := pidsInGroup(pgid); len(left) > 0 {
		t.Fatalf("processes left in the group: %v", left)
	}
}

// Application fragments. Each app marks itself ready once its traps are set.
const (
	ready    = `touch "$LATTICE_CHECKPOINT_DIR/ready"; `
	loop     = `while :; do sleep 0.1; done`
	saveUSR1 = `trap 'echo checkpoint >> "$LATTICE_CHECKPOINT_DIR/events"; echo saved > "$LATTICE_CHECKPOINT_DIR/state"; touch "$LATTICE_CHECKPOINT_DONE"' USR1; `
	termLog  = `trap 'echo term >> "$LATTICE_CHECKPOINT_DIR/events"; exit 143' TERM; `
)

func TestCheckpointAndStop(t *testing.T) {
	cases := []struct {
		name     string
		req      *latticev1.AllocationRequest
		ck       *latticev1.CheckpointRequest
		deadline time.Duration
		state    model.AllocState
		reason   string
		exit     int32
		// the report must come before this (an acknowledgement or a failure
		// does not wait for the deadline) or after it (a timeout does)
		before, after time.Duration
		check         func(t *testing.T, h *harness, id uint64)
	}{
		{name: "USR1 trapped, state saved, done file",
			req:      &latticev1.AllocationRequest{Checkpoint: "signal", Command: []string{saveUSR1 + termLog + ready + loop}},
			ck:       &latticev1.CheckpointRequest{Mode: "signal", Reason: "reclaim"},
			deadline: 20 * time.Second, state: model.StateSuspended, reason: model.ReasonCheckpointed, exit: 143, before: 8 * time.Second,
			check: func(t *testing.T, h *harness, id uint64) {
				if got := readFile(t, filepath.Join(h.dir(id), "events")); got != "checkpoint\nterm\n" {
					t.Fatalf("events %q: the checkpoint trap must run before the stop", got)
				}
				if got := readFile(t, filepath.Join(h.dir(id), "state")); got != "saved\n" {
					t.Fatalf("state %q", got)
				}
			}},
		{name: "USR2 named by the request",
			req:      &latticev1.AllocationRequest{Checkpoint: "signal", Command: []string{strings.ReplaceAll(saveUSR1, "USR1", "USR2") + termLog + ready + loop}},
			ck:       &latticev1.CheckpointRequest{Mode: "signal", Signal: 12, Reason: "preempt"},
			deadline: 20 * time.Second, state: model.StateSuspended, reason: model.ReasonCheckpointed, exit: 143, before: 8 * time.Second},
		{name: "USR2 from the allocation's --checkpoint-signal",
			req: &latticev1.AllocationRequest{Checkpoint: "signal", CheckpointSignal: "SIGUSR2",
				Command: []string{strings.ReplaceAll(saveUSR1, "USR1", "USR2") + termLog + ready + loop}},
			ck:       &latticev1.CheckpointRequest{Mode: "signal", Reason: "preempt"},
			deadline: 20 * time.Second, state: model.StateSuspended, reason: model.ReasonCheckpointed, exit: 143, before: 8 * time.Second},
		{name: "request ignored: stopped after the deadline",
			req:      &latticev1.AllocationRequest{Checkpoint: "signal", Command: []string{`trap '' USR1 TERM; ` + ready + `sleep 300 & sleep 300 & wait`}},
			ck:       &latticev1.CheckpointRequest{Mode: "signal", Reason: "reclaim"},
			deadline: time.Second, state: model.StateSuspended, reason: model.ReasonCheckpointTimeout, exit: 137, after: 2 * time.Second},
		{name: "exit 0 while asked: the work was done",
			req:      &latticev1.AllocationRequest{Checkpoint: "signal", Command: []string{`trap 'exit 0' USR1; ` + ready + loop}},
			ck:       &latticev1.CheckpointRequest{Mode: "signal", Reason: "reclaim"},
			deadline: 20 * time.Second, state: model.StateCompleted, reason: "", exit: 0, before: 8 * time.Second},
		{name: "exit 0 after the done file: checkpointed",
			req:      &latticev1.AllocationRequest{Checkpoint: "signal", Command: []string{`trap 'touch "$LATTICE_CHECKPOINT_DONE"; exit 0' USR1; ` + ready + loop}},
			ck:       &latticev1.CheckpointRequest{Mode: "signal", Reason: "reclaim"},
			deadline: 20 * time.Second, state: model.StateSuspended, reason: model.ReasonCheckpointed, exit: 0, before: 8 * time.Second},
		{name: "killed by the signal: acknowledged by exit",
			req:      &latticev1.AllocationRequest{Checkpoint: "signal", Command: []string{ready + loop}},
			ck:       &latticev1.CheckpointRequest{Mode: "signal", Reason: "preempt"},
			deadline: 20 * time.Second, state: model.StateSuspended, reason: model.ReasonPreempted, exit: 128 + 10, before: 8 * time.Second},
		{name: "hook succeeds",
			req: &latticev1.AllocationRequest{Checkpoint: "hook", CheckpointHook: "exit 9", Command: []string{termLog + ready + loop}},
			ck: &latticev1.CheckpointRequest{Mode: "hook", Reason: "reclaim",
				Hook: `echo "hook $LATTICE_CHECKPOINT_REASON $LATTICE_ALLOC_ID $LATTICE_RESTART_COUNT" >&2; echo saved > "$LATTICE_CHECKPOINT_DIR/state"`},
			deadline: 20 * time.Second, state: model.StateSuspended, reason: model.ReasonCheckpointed, exit: 143, before: 8 * time.Second,
			check: func(t *testing.T, h *harness, id uint64) {
				if got := readFile(t, filepath.Join(h.dir(id), "state")); got != "saved\n" {
					t.Fatalf("state %q", got)
				}
				lp, _ := h.a.runner.Paths(id)
				if got := readFile(t, lp.Stderr); !strings.Contains(got, "hook reclaim "+strconv.FormatUint(id, 10)+" 0\n") {
					t.Fatalf("hook output not in the job's stderr: %q", got)
				}
			}},
		{name: "hook fails: stopped at once",
			req:      &latticev1.AllocationRequest{Checkpoint: "hook", CheckpointHook: "echo cannot >&2; exit 3", Command: []string{termLog + ready + loop}},
			ck:       &latticev1.CheckpointRequest{Mode: "hook", Reason: "reclaim"},
			deadline: 30 * time.Second, state: model.StateSuspended, reason: model.ReasonCheckpointFailed, exit: 143, before: 8 * time.Second},
		{name: "hook outlives the deadline",
			req:      &latticev1.AllocationRequest{Checkpoint: "hook", CheckpointHook: "sleep 300", Command: []string{termLog + ready + loop}},
			ck:       &latticev1.CheckpointRequest{Mode: "hook", Reason: "reclaim"},
			deadline: time.Second, state: model.StateSuspended, reason: model.ReasonCheckpointTimeout, exit: 143, after: time.Second},
		{name: "mode none: stopped at once",
			req:      &latticev1.AllocationRequest{Command: []string{ready + loop}},
			ck:       &latticev1.CheckpointRequest{Mode: "none", Reason: "preempt"},
			deadline: 30 * time.Second, state: model.StateSuspended, reason: model.ReasonPreempted, exit: 143, before: 8 * time.Second},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			id := uint64(100 + i)
			h.assign(id, 0, tc.req)
			h.expect(model.StateRunning, "")
			waitFile(t, filepath.Join(h.dir(id), "ready"))
			pgid := h.pgid(id)
			tc.ck.AllocationId, tc.ck.Stop = id, true
			start := time.Now()
			tc.ck.DeadlineUnixMs = start.Add(tc.deadline).UnixMilli()
			h.checkpoint(tc.ck)
			r := h.expect(tc.state, tc.reason)
			took := time.Since(start)
			if !r.HasExitCode || r.ExitCode != tc.exit {
				t.Fatalf("exit code %v %d, want %d", r.HasExitCode, r.ExitCode, tc.exit)
			}
			if tc.before > 0 && took > tc.before {
				t.Fatalf("reported after %s, want before %s", took, tc.before)
			}
			if took < tc.after {
				t.Fatalf("reported after %s, before the deadline (%s)", took, tc.after)
			}
			waitGroupGone(t, pgid)
			if tc.check != nil {
				tc.check(t, h, id)
			}
		})
	}
}

func TestCheckpointWebhook(t *testing.T) {
	type call struct {
		contentType string
		body        webhookBody
	}
	cases := []struct {
		name    string
		stop    bool
		answers []int // HTTP status per attempt; the last one repeats
		ack     *bool // CheckpointAck to send once a call succeeded
		state   model.AllocState
		reason  string
		calls   int
	}{
		{name: "retried, then acknowledged", stop: true, answers: []int{503, 200}, ack: new(false),
			state: model.StateSuspended, reason: model.ReasonCheckpointed, calls: 2},
		{name: "the application reports failure", stop: true, answers: []int{200}, ack: new(true),
			state: model.StateSuspended, reason: model.ReasonCheckpointFailed, calls: 1},
		{name: "never accepted", stop: true, answers: []int{500},
			state: model.StateSuspended, reason: model.ReasonCheckpointFailed, calls: webhookAttempts},
		{name: "acknowledged, keeps running", stop: false, answers: []int{204}, ack: new(false),
			state: model.StateRunning, reason: model.ReasonCheckpointed, calls: 1},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var calls []call
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				var c call
				c.contentType = r.Header.Get("Content-Type")
				if err := json.Unmarshal(b, &c.body); err != nil || r.Method != http.MethodPost {
					w.WriteHeader(http.StatusBadRequest)
					return
				}
				mu.Lock()
				calls = append(calls, c)
				code := tc.answers[min(len(calls), len(tc.answers))-1]
				mu.Unlock()
				w.WriteHeader(code)
			}))
			t.Cleanup(srv.Close)
			if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
				t.Fatalf("test server on %s, want 127.0.0.1", srv.URL)
			}
			h := newHarness(t)
			id := uint64(200 + i)
			h.assign(id, 0, &latticev1.AllocationRequest{Checkpoint: "webhook", CheckpointWebhook: srv.URL + "/ckpt", Command: []string{termLog + ready + loop}})
			h.expect(model.StateRunning, "")
			waitFile(t, filepath.Join(h.dir(id), "ready"))
			deadline := time.Now().Add(30 * time.Second)
			h.checkpoint(&latticev1.CheckpointRequest{AllocationId: id, Mode: "webhook", Stop: tc.stop, Reason: "preempt", DeadlineUnixMs: deadline.UnixMilli()})
			if tc.ack != nil {
				waitUntil(t, func() bool {
					mu.Lock()
					defer mu.Unlock()
					return len(calls) == tc.calls
				})
				h.noReport(300 * time.Millisecond) // it waits for the acknowledgement
				h.ack(id, *tc.ack)
			}
			h.expect(tc.state, tc.reason)
			mu.Lock()
			got := slices.Clone(calls)
			mu.Unlock()
			if len(got) != tc.calls {
				t.Fatalf("%d webhook calls, want %d", len(got), tc.calls)
			}
			want := webhookBody{Allocation: strconv.FormatUint(id, 10), AllocationID: id, Deadline: deadline.UTC().Format(time.RFC3339),
				CheckpointDir: h.dir(id), Reason: "preempt", Stop: tc.stop}
			if got[0].body != want || got[0].contentType != "application/json" {
				t.Fatalf("webhook call %+v (%s), want %+v (application/json)", got[0].body, got[0].contentType, want)
			}
			if !tc.stop {
				if !h.a.runner.IsRunning(id) {
					t.Fatal("the allocation stopped")
				}
				h.cancel(id, model.ReasonCancelled)
				h.expect(model.StateCancelled, model.ReasonCancelled)
			}
		})
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestCheckpointWithoutStop(t *testing.T) {
	cases := []struct {
		name     string
		req      *latticev1.AllocationRequest
		mode     string
		deadline time.Duration
		state    model.AllocState
		reason   string
	}{
		{"signal acknowledged", &latticev1.AllocationRequest{Checkpoint: "signal", Command: []string{saveUSR1 + ready + loop}},
			"signal", 20 * time.Second, model.StateRunning, model.ReasonCheckpointed},
		{"signal ignored", &latticev1.AllocationRequest{Checkpoint: "signal", Command: []string{`trap '' USR1; ` + ready + loop}},
			"signal", time.Second, model.StateRunning, model.ReasonCheckpointTimeout},
		{"a done file left from before is no acknowledgement", &latticev1.AllocationRequest{Checkpoint: "signal",
			Command: []string{`trap '' USR1; touch "$LATTICE_CHECKPOINT_DONE"; ` + ready + loop}},
			"signal", time.Second, model.StateRunning, model.ReasonCheckpointTimeout},
		{"hook fails", &latticev1.AllocationRequest{Checkpoint: "hook", CheckpointHook: "exit 1", Command: []string{ready + loop}},
			"hook", 20 * time.Second, model.StateRunning, model.ReasonCheckpointFailed},
		{"hook acknowledges", &latticev1.AllocationRequest{Checkpoint: "hook", CheckpointHook: "true", Command: []string{ready + loop}},
			"", 20 * time.Second, model.StateRunning, model.ReasonCheckpointed},
		{"nothing to deliver", &latticev1.AllocationRequest{Command: []string{ready + loop}},
			"none", 20 * time.Second, model.StateRunning, model.ReasonCheckpointFailed},
		{"exits during the checkpoint: its exit wins", &latticev1.AllocationRequest{Checkpoint: "signal", Command: []string{`trap 'exit 0' USR1; ` + ready + loop}},
			"signal", 20 * time.Second, model.StateCompleted, ""},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			id := uint64(300 + i)
			h.assign(id, 0, tc.req)
			h.expect(model.StateRunning, "")
			waitFile(t, filepath.Join(h.dir(id), "ready"))
			h.checkpoint(&latticev1.CheckpointRequest{AllocationId: id, Mode: tc.mode, Reason: "user",
				DeadlineUnixMs: time.Now().Add(tc.deadline).UnixMilli()})
			h.expect(tc.state, tc.reason)
			if tc.state != model.StateRunning {
				h.noReport(500 * time.Millisecond)
				return
			}
			if !h.a.runner.IsRunning(id) || len(pidsInGroup(h.pgid(id))) == 0 {
				t.Fatal("the allocation no longer runs")
			}
			h.cancel(id, model.ReasonCancelled)
			h.expect(model.StateCancelled, model.ReasonCancelled)
		})
	}
}

func TestCheckpointRequestDeliveredOnce(t *testing.T) {
	h := newHarness(t)
	const id = 400
	count := filepath.Join(h.dir(id), "count")
	h.assign(id, 0, &latticev1.AllocationRequest{Checkpoint: "signal",
		Command: []string{`trap 'echo x >> "$LATTICE_CHECKPOINT_DIR/count"' USR1; ` + ready + loop}})
	h.expect(model.StateRunning, "")
	waitFile(t, filepath.Join(h.dir(id), "ready"))
	req := &latticev1.CheckpointRequest{AllocationId: id, Mode: "signal", Reason: "user",
		DeadlineUnixMs: time.Now().Add(1500 * time.Millisecond).UnixMilli()}
	h.checkpoint(req)
	h.checkpoint(req) // resent by a new leader
	h.expect(model.StateRunning, model.ReasonCheckpointTimeout)
	h.checkpoint(req) // resent late
	h.noReport(700 * time.Millisecond)
	if got := readFile(t, count); got != "x\n" {
		t.Fatalf("signal delivered %d times, want once", strings.Count(got, "x"))
	}
	// A new request (another deadline) is delivered again.
	h.checkpoint(&latticev1.CheckpointRequest{AllocationId: id, Mode: "signal", Reason: "user",
		DeadlineUnixMs: time.Now().Add(time.Second).UnixMilli()})
	h.expect(model.StateRunning, model.ReasonCheckpointTimeout)
	if got := readFile(t, count); got != "x\nx\n" {
		t.Fatalf("count %q after a second request", got)
	}
	h.cancel(id, model.ReasonCancelled)
	h.expect(model.StateCancelled, model.ReasonCancelled)
}

func TestCancelAndWalltimeDuringCheckpoint(t *testing.T) {
	t.Run("cancel while waiting", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		const id = 500
		h.assign(id, 0, &latticev1.AllocationRequest{Checkpoint: "signal", Command: []string{`trap '' USR1; ` + ready + loop}})
		h.expect(model.StateRunning, "")
		waitFile(t, filepath.Join(h.dir(id), "ready"))
		h.checkpoint(&latticev1.CheckpointRequest{AllocationId: id, Mode: "signal", Stop: true, Reason: "reclaim",
			DeadlineUnixMs: time.Now().Add(30 * time.Second).UnixMilli()})
		time.Sleep(200 * time.Millisecond)
		h.cancel(id, model.ReasonCancelled)
		h.expect(model.StateCancelled, model.ReasonCancelled)
	})
	t.Run("cancel while the checkpoint stops it", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		const id = 501
		h.assign(id, 0, &latticev1.AllocationRequest{Checkpoint: "signal", Command: []string{
			`trap 'touch "$LATTICE_CHECKPOINT_DONE"' USR1; trap 'touch "$LATTICE_CHECKPOINT_DIR/term"' TERM; ` + ready + loop}})
		h.expect(model.StateRunning, "")
		waitFile(t, filepath.Join(h.dir(id), "ready"))
		h.checkpoint(&latticev1.CheckpointRequest{AllocationId: id, Mode: "signal", Stop: true, Reason: "reclaim", GraceSeconds: 2,
			DeadlineUnixMs: time.Now().Add(30 * time.Second).UnixMilli()})
		waitFile(t, filepath.Join(h.dir(id), "term")) // acknowledged, SIGTERM sent, in its grace
		h.cancel(id, model.ReasonCancelled)
		r := h.expect(model.StateCancelled, model.ReasonCancelled)
		if r.ExitCode != 137 {
			t.Fatalf("exit code %d, want 137 (SIGKILL after the grace)", r.ExitCode)
		}
	})
	t.Run("walltime", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		const id = 502
		h.assign(id, 0, &latticev1.AllocationRequest{Checkpoint: "signal", WalltimeSeconds: 2, Command: []string{`trap '' USR1; ` + ready + loop}})
		h.expect(model.StateRunning, "")
		waitFile(t, filepath.Join(h.dir(id), "ready"))
		h.checkpoint(&latticev1.CheckpointRequest{AllocationId: id, Mode: "signal", Reason: "user",
			DeadlineUnixMs: time.Now().Add(30 * time.Second).UnixMilli()})
		h.expect(model.StateFailed, model.ReasonWalltimeExceeded)
		h.noReport(300 * time.Millisecond)
	})
}

func TestRequeuedAllocationRunsAgain(t *testing.T) {
	h := newHarness(t)
	const id = 600
	dir := h.dir(id)
	// Every run records its restart count and directory; a run that finds
	// its saved state waits for "go", then finishes.
	req := &latticev1.AllocationRequest{Checkpoint: "signal", Command: []string{
		`echo "$LATTICE_RESTART_COUNT $SLURM_RESTART_COUNT $LATTICE_CHECKPOINT_DIR" >> "$LATTICE_CHECKPOINT_DIR/runs"
if [ -f "$LATTICE_CHECKPOINT_DIR/state" ]; then
  while [ ! -f "$LATTICE_CHECKPOINT_DIR/go" ]; do sleep 0.05; done
  exit 0
fi
` + saveUSR1 + ready + loop}}
	h.assign(id, 0, req)
	h.expect(model.StateRunning, "")
	waitFile(t, filepath.Join(dir, "ready"))
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("checkpoint dir: %v %v, want mode 0700", st.Mode(), err)
	}
	h.checkpoint(&latticev1.CheckpointRequest{AllocationId: id, Mode: "signal", Stop: true, Reason: "reclaim",
		DeadlineUnixMs: time.Now().Add(20 * time.Second).UnixMilli()})
	h.expect(model.StateSuspended, model.ReasonCheckpointed)

	// The leader stops what it no longer wants running: neither cancel is a
	// cancellation of the requeued allocation.
	h.cancel(id, model.ReasonCheckpointed)
	h.cancel(id, model.ReasonCancelled)
	h.noReport(300 * time.Millisecond)

	h.assign(id, 1, req)
	h.expect(model.StateRunning, "")
	h.assign(id, 1, req) // resent: not a second start
	h.expect(model.StateRunning, "")
	h.assign(id, 0, req) // the old run: ignored
	h.noReport(300 * time.Millisecond)
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := h.expect(model.StateCompleted, "")
	if r.ExitCode != 0 {
		t.Fatalf("exit code %d", r.ExitCode)
	}
	want := "0 0 " + dir + "\n1 1 " + dir + "\n"
	if got := readFile(t, filepath.Join(dir, "runs")); got != want {
		t.Fatalf("runs:\n%s\nwant:\n%s", got, want)
	}
	if fileExists(filepath.Join(dir, CheckpointDoneFile)) {
		t.Fatal("done file left after the allocation ended")
	}
}

func TestCancelOfRunsNotGoing(t *testing.T) {
	req := &latticev1.AllocationRequest{Command: []string{`echo "$LATTICE_RESTART_COUNT" >> "$LATTICE_CHECKPOINT_DIR/runs"; ` + termLog + ready + loop}}
	t.Run("the quorum ended a run it never ran", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		const id = 700
		h.cancel(id, model.ReasonRequeued)
		h.noReport(300 * time.Millisecond)
		h.assign(id, 1, req)
		h.expect(model.StateRunning, "")
	})
	t.Run("user cancel before the assignment", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		const id = 701
		h.cancel(id, model.ReasonCancelled)
		h.expect(model.StateCancelled, model.ReasonCancelled)
		h.assign(id, 0, req)
		h.expect(model.StateCancelled, model.ReasonCancelled)
		if h.a.runner.IsRunning(id) || fileExists(filepath.Join(h.dir(id), "runs")) {
			t.Fatal("a cancelled allocation started")
		}
	})
	t.Run("the quorum stops a running run", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		const id = 702
		h.assign(id, 0, req)
		h.expect(model.StateRunning, "")
		waitFile(t, filepath.Join(h.dir(id), "ready"))
		pgid := h.pgid(id)
		h.cancel(id, model.ReasonRequeued)
		waitGroupGone(t, pgid)
		h.noReport(300 * time.Millisecond)
	})
	t.Run("a new run while the old one still runs", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		const id = 703
		h.assign(id, 0, req)
		h.expect(model.StateRunning, "")
		waitFile(t, filepath.Join(h.dir(id), "ready"))
		h.assign(id, 1, req)
		h.expect(model.StateRunning, "") // run 1; run 0's end is not reported
		waitUntil(t, func() bool {
			return fileExists(filepath.Join(h.dir(id), "runs")) && readFile(t, filepath.Join(h.dir(id), "runs")) == "0\n1\n"
		})
		if run, ok := h.a.runner.runOf(id); !ok || run != 1 {
			t.Fatalf("running run %d %v, want 1", run, ok)
		}
		h.noReport(300 * time.Millisecond)
		h.cancel(id, model.ReasonCancelled)
		h.expect(model.StateCancelled, model.ReasonCancelled)
	})
}

func TestEnvCheckpointVariables(t *testing.T) {
	env := Env(Launch{AllocID: 9, Nodes: []string{"n1"}, RequeueCount: 3, CheckpointDir: "/shared/ckpt/9"}, nil)
	for _, want := range []string{"LATTICE_RESTART_COUNT=3", "SLURM_RESTART_COUNT=3", "LATTICE_CHECKPOINT_DIR=/shared/ckpt/9",
		"LATTICE_CHECKPOINT_DONE=/shared/ckpt/9/" + CheckpointDoneFile} {
		if !slices.Contains(env, want) {
			t.Errorf("environment lacks %s", want)
		}
	}
}
