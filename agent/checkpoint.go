package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/latticehpc/lattice/model"
)

// Checkpoint delivery tuning.
const (
	// DefaultCheckpointWait is the deadline of a request that has none.
	DefaultCheckpointWait = 5 * time.Minute
	// donePollInterval is how often the done file is looked for.
	donePollInterval = 100 * time.Millisecond
	// doneSettle is how long a run that acknowledged a stopping checkpoint
	// (done file, CheckpointDone, hook or webhook) may take to exit on its
	// own before it is sent SIGTERM: applications often write the done
	// file as their last act, and a clean exit beats a signal.
	doneSettle = time.Second
	// webhookAttempts bounds the deliveries of one webhook request.
	webhookAttempts     = 5
	webhookFirstBackoff = 250 * time.Millisecond
	webhookMaxBackoff   = 4 * time.Second
	webhookAttemptLimit = 30 * time.Second
)

// CheckpointOrder is one checkpoint request for a running allocation.
type CheckpointOrder struct {
	AllocID uint64
	// Mode is how it is delivered; empty = the allocation's own mode.
	Mode     model.CheckpointMode
	Deadline time.Time
	// Stop ends the run after the checkpoint (a reclaim or a preemption).
	Stop    bool
	Signal  syscall.Signal // signal mode; 0 = the allocation's own, else SIGUSR1
	Hook    string         // hook mode; empty = the allocation's own
	Webhook string         // webhook mode; empty = the allocation's own
	Reason  string         // user, proactive, signal, reclaim, preempt
	Grace   time.Duration  // SIGTERM→SIGKILL when it stops the run
}

// CheckpointResult is how a checkpoint that leaves the run going ended.
type CheckpointResult struct {
	AllocID      uint64
	RequeueCount int
	Reason       string // Checkpointed, CheckpointFailed or CheckpointTimeout
	Message      string
}

// ErrNotRunning: the allocation does not run here.
var ErrNotRunning = errors.New("allocation does not run here")

// checkpointRun is one checkpoint in progress.
type checkpointRun struct {
	order  CheckpointOrder
	ctx    context.Context // ends at the deadline, when superseded, or when the run ends
	cancel context.CancelFunc
	acks   chan bool // CheckpointAck: failed?
}

// outcome is what a checkpoint came to.
type outcome int

const (
	acknowledged outcome = iota
	failed
	timedOut
	undeliverable // mode none
)

// deliveryResult is what a hook or a webhook delivery came to.
type deliveryResult struct {
	delivered bool // webhook: accepted, now wait for the acknowledgement
	ok        bool // hook: exit 0
	msg       string
}

// Checkpoint asks a running allocation to checkpoint: it removes a stale
// done file, delivers by mode and waits for the acknowledgement in the
// background. A request while another is in progress replaces it (and
// never turns a stop into a non-stop). It returns ErrNotRunning, or an
// error when the run is already being stopped.
func (r *Runner) Checkpoint(o CheckpointOrder) error {
	r.mu.Lock()
	p := r.running[o.AllocID]
	if p == nil {
		r.mu.Unlock()
		return ErrNotRunning
	}
	if p.why != "" {
		why := p.why
		r.mu.Unlock()
		return fmt.Errorf("allocation %d is already stopping (%s)", o.AllocID, why)
	}
	l := p.launch
	if o.Mode == "" {
		o.Mode = l.Checkpoint
	}
	if o.Signal == 0 {
		o.Signal = l.CheckpointSignal
	}
	if o.Signal == 0 {
		o.Signal = syscall.SIGUSR1
	}
	if o.Hook == "" {
		o.Hook = l.CheckpointHook
	}
	if o.Webhook == "" {
		o.Webhook = l.CheckpointWebhook
	}
	if o.Deadline.IsZero() {
		o.Deadline = time.Now().Add(DefaultCheckpointWait)
	}
	if o.Grace <= 0 {
		o.Grace = l.Grace
	}
	if o.Grace <= 0 {
		o.Grace = 30 * time.Second
	}
	// Removed before the request counts, so that neither the wait nor the
	// run's exit takes an earlier acknowledgement for this one.
	if err := removeIfExists(l.DonePath()); err != nil {
		r.log.Warn("stale checkpoint done file", "alloc", o.AllocID, "err", err)
	}
	if old := p.ckpt; old != nil {
		o.Stop = o.Stop || old.order.Stop
		old.cancel()
	}
	ctx, cancel := context.WithDeadline(context.Background(), o.Deadline)
	c := &checkpointRun{order: o, ctx: ctx, cancel: cancel, acks: make(chan bool, 1)}
	p.ckpt = c
	r.wg.Add(1)
	r.mu.Unlock()
	r.log.Info("checkpoint requested", "alloc", o.AllocID, "run", l.RequeueCount, "mode", o.Mode,
		"stop", o.Stop, "reason", o.Reason, "deadline", o.Deadline)
	go r.runCheckpoint(p, c)
	return nil
}

// CheckpointAck delivers an acknowledgement (CheckpointDone) to the
// checkpoint in progress of id; false when none waits for it.
func (r *Runner) CheckpointAck(id uint64, failed bool) bool {
	r.mu.Lock()
	var c *checkpointRun
	if p := r.running[id]; p != nil {
		c = p.ckpt
	}
	r.mu.Unlock()
	if c == nil {
		return false
	}
	select {
	case c.acks <- failed:
	default: // one is waiting already
	}
	return true
}

func (r *Runner) runCheckpoint(p *process, c *checkpointRun) {
	defer r.wg.Done()
	defer c.cancel()
	o := c.order
	results := make(chan deliveryResult, 1)
	res, msg := outcome(-1), ""
	switch o.Mode {
	case model.CheckpointSignal:
		if o.Signal < 1 || o.Signal > 64 {
			res, msg = failed, fmt.Sprintf("invalid checkpoint signal %d: allowed 1..64", int(o.Signal))
		} else if err := p.signal(o.Signal); err != nil {
			res, msg = failed, fmt.Sprintf("signal %d: %v", int(o.Signal), err)
		}
	case model.CheckpointHook:
		if o.Hook == "" {
			res, msg = failed, "hook mode without a hook command"
			break
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			results <- r.runHook(c.ctx, p, o)
		}()
	case model.CheckpointWebhook:
		if o.Webhook == "" {
			res, msg = failed, "webhook mode without a URL"
			break
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			results <- r.postWebhook(c.ctx, p, o)
		}()
	case model.CheckpointNone:
		res, msg = undeliverable, "the allocation has no checkpoint mode"
	default:
		res, msg = failed, fmt.Sprintf("unknown checkpoint mode %q: allowed signal, hook, webhook or none", o.Mode)
	}
	if res < 0 {
		res, msg = r.awaitAck(p, c, results)
	}
	if res < 0 {
		return // superseded, or the run ended: its exit says what happened
	}
	r.conclude(p, c, res, msg)
}

// awaitAck waits for the acknowledgement, a failure or the deadline; -1 when
// the run ended or a newer request took over.
func (r *Runner) awaitAck(p *process, c *checkpointRun, results <-chan deliveryResult) (outcome, string) {
	o := c.order
	tick := time.NewTicker(donePollInterval)
	defer tick.Stop()
	done := p.launch.DonePath()
	delivered := o.Mode != model.CheckpointWebhook
	for {
		select {
		case <-p.done:
			return -1, ""
		case <-c.ctx.Done():
			if !errors.Is(c.ctx.Err(), context.DeadlineExceeded) {
				return -1, ""
			}
			if fileExists(done) { // written just in time
				return acknowledged, "done file"
			}
			if !delivered {
				return failed, "the webhook was not accepted before the deadline"
			}
			return timedOut, fmt.Sprintf("no acknowledgement by %s", o.Deadline.UTC().Format(time.RFC3339))
		case <-tick.C:
			if fileExists(done) {
				return acknowledged, "done file"
			}
		case f := <-c.acks:
			if f {
				return failed, "the application reported its checkpoint failed"
			}
			return acknowledged, "CheckpointDone"
		case d := <-results:
			switch {
			case d.delivered:
				delivered = true // now wait for CheckpointDone or the done file
			case d.ok:
				return acknowledged, d.msg
			case c.ctx.Err() != nil && errors.Is(c.ctx.Err(), context.DeadlineExceeded) && o.Mode == model.CheckpointHook:
				return timedOut, d.msg // the hook was killed at the deadline
			case c.ctx.Err() != nil && !errors.Is(c.ctx.Err(), context.DeadlineExceeded):
				return -1, ""
			default:
				return failed, d.msg
			}
		}
	}
}

// conclude acts on an outcome: with stop it ends the run (its exit report
// says SUSPENDED and why); without, it reports the checkpoint's end unless
// the run ended meanwhile.
func (r *Runner) conclude(p *process, c *checkpointRun, res outcome, msg string) {
	o := c.order
	reason := model.ReasonCheckpointed
	switch res {
	case failed:
		reason = model.ReasonCheckpointFailed
	case timedOut:
		reason = model.ReasonCheckpointTimeout
	case undeliverable:
		reason = model.ReasonPreempted
		if !o.Stop {
			reason = model.ReasonCheckpointFailed
		}
	}
	r.mu.Lock()
	if p.ckpt != c {
		r.mu.Unlock()
		return // a newer request took over
	}
	if !o.Stop {
		p.ckpt = nil
	}
	r.mu.Unlock()
	r.log.Info("checkpoint ended", "alloc", o.AllocID, "run", p.launch.RequeueCount, "reason", reason, "stop", o.Stop, "how", msg)
	if o.Stop {
		if res == acknowledged {
			// An exit during the settle is this checkpoint's stop.
			r.mu.Lock()
			if p.why == "" {
				p.why = reason
			}
			r.mu.Unlock()
			select {
			case <-p.done:
			case <-time.After(doneSettle):
			}
		}
		r.stop(p, reason, o.Grace)
		return
	}
	p.reportMu.Lock()
	defer p.reportMu.Unlock()
	select {
	case <-p.done:
		return // the exit report wins
	default:
	}
	if r.onCheckpoint != nil {
		res := CheckpointResult{AllocID: o.AllocID, RequeueCount: p.launch.RequeueCount, Reason: reason}
		if reason != model.ReasonCheckpointed {
			res.Message = msg
		}
		r.onCheckpoint(res)
	}
}

// runHook runs the hook command in the job's environment and work dir, in
// its own process group, output appended to the job's stderr file; it is
// killed when ctx ends (the deadline).
func (r *Runner) runHook(ctx context.Context, p *process, o CheckpointOrder) deliveryResult {
	l := p.launch
	out, err := openLog(p.logs.Stderr)
	if err != nil {
		return deliveryResult{msg: "hook output: " + err.Error()}
	}
	cmd := exec.Command("/bin/sh", "-c", o.Hook)
	cmd.Dir = l.WorkDir
	cmd.Env = append(Env(l, BaseEnv()), "LATTICE_CHECKPOINT_REASON="+o.Reason)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	out.Close()
	if err != nil {
		return deliveryResult{msg: "start hook: " + err.Error()}
	}
	pgid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err = <-exited:
	case <-ctx.Done():
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-exited
		return deliveryResult{msg: "hook killed at the deadline"}
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL) // what it left behind
	if err != nil {
		code := -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		return deliveryResult{msg: "hook exited with code " + strconv.Itoa(code)}
	}
	return deliveryResult{ok: true, msg: "hook exited 0"}
}

// webhookBody is what a webhook-mode checkpoint POSTs.
type webhookBody struct {
	Allocation    string `json:"allocation"`
	AllocationID  uint64 `json:"allocation_id"`
	Deadline      string `json:"deadline"`
	CheckpointDir string `json:"checkpoint_dir"`
	Reason        string `json:"reason"`
	Stop          bool   `json:"stop"`
}

// postWebhook POSTs the request, retrying a non-2xx answer or a network
// error with back-off, at most webhookAttempts times, until ctx ends.
func (r *Runner) postWebhook(ctx context.Context, p *process, o CheckpointOrder) deliveryResult {
	l := p.launch
	display := l.DisplayID
	if display == "" {
		display = strconv.FormatUint(l.AllocID, 10)
	}
	body, _ := json.Marshal(webhookBody{Allocation: display, AllocationID: l.AllocID,
		Deadline: o.Deadline.UTC().Format(time.RFC3339), CheckpointDir: l.CheckpointDir, Reason: o.Reason, Stop: o.Stop})
	backoff := webhookFirstBackoff
	var last error
	for attempt := 1; ; attempt++ {
		last = r.postOnce(ctx, o.Webhook, body)
		if last == nil {
			return deliveryResult{delivered: true}
		}
		r.log.Warn("checkpoint webhook", "alloc", l.AllocID, "attempt", attempt, "err", last)
		if attempt == webhookAttempts || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, webhookMaxBackoff)
	}
	return deliveryResult{msg: "webhook not delivered: " + last.Error()}
}

func (r *Runner) postOnce(ctx context.Context, url string, body []byte) error {
	actx, cancel := context.WithTimeout(ctx, webhookAttemptLimit)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.http.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("%s answered %s", url, resp.Status)
	}
	return nil
}
