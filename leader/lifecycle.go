package leader

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Loop is one leader-only loop: it runs until its context ends.
type Loop struct {
	Name string
	Run  func(ctx context.Context)
}

// Raft is what the lifecycle needs of the consensus layer.
type Raft interface {
	LeaderCh() <-chan bool
	IsLeader() bool
	// Barrier waits until every entry committed before it is applied here.
	Barrier(timeout time.Duration) error
	// TransferLeadership hands leadership to another member ("" = any).
	TransferLeadership(id string) error
}

// Member is the member whose leadership the lifecycle runs.
type Member interface {
	// BeginTerm prepares a term (after the barrier) and returns its loops;
	// ctx ends with the term.
	BeginTerm(ctx context.Context) []Loop
	// EndTerm runs when the term's loops were cancelled (before they are
	// waited for): close what they serve (agents' streams).
	EndTerm()
	// Changed is told of every change of leadership (metrics); gained
	// false also after EndTerm.
	Changed(leading bool)
}

// Config tunes a Lifecycle; zero values take the defaults.
type Config struct {
	// BarrierTimeout bounds one barrier attempt (default 10 s);
	// BarrierAttempts is how many are made before leadership is handed on
	// (default 3).
	BarrierTimeout  time.Duration
	BarrierAttempts int
	// StopWait is how long a lost term's loops are waited for (default 1 s).
	StopWait time.Duration
	// Poll is how often leadership is also polled (a single member may
	// lead before anyone listens; default 250 ms).
	Poll   time.Duration
	Logger *slog.Logger
}

// Lifecycle runs a member's leadership: Run watches it, Stop ends the
// current term.
type Lifecycle struct {
	raft   Raft
	member Member
	cfg    Config
	log    *slog.Logger

	mu   sync.Mutex
	term *term
}

type term struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns the lifecycle of member over raft.
func New(raft Raft, member Member, cfg Config) *Lifecycle {
	if cfg.BarrierTimeout <= 0 {
		cfg.BarrierTimeout = 10 * time.Second
	}
	if cfg.BarrierAttempts <= 0 {
		cfg.BarrierAttempts = 3
	}
	if cfg.StopWait <= 0 {
		cfg.StopWait = time.Second
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 250 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Lifecycle{raft: raft, member: member, cfg: cfg, log: cfg.Logger}
}

// Run watches leadership until ctx ends, then ends the current term.
func (lc *Lifecycle) Run(ctx context.Context) {
	defer lc.Stop()
	ch := lc.raft.LeaderCh()
	poll := time.NewTicker(lc.cfg.Poll)
	defer poll.Stop()
	leading := false
	for {
		var now bool
		select {
		case <-ctx.Done():
			return
		case now = <-ch:
		case <-poll.C:
			now = lc.raft.IsLeader()
		}
		if now == leading {
			continue
		}
		leading = now
		lc.member.Changed(now)
		if !now {
			lc.log.Info("leadership lost")
			lc.Stop()
			continue
		}
		lc.log.Info("leadership gained; waiting for the log barrier")
		if !lc.barrier(ctx) {
			if ctx.Err() != nil {
				return
			}
			if lc.raft.IsLeader() {
				lc.log.Error("the barrier after the election did not complete: handing leadership on", "attempts", lc.cfg.BarrierAttempts)
				if err := lc.raft.TransferLeadership(""); err != nil {
					lc.log.Warn("leadership transfer", "err", err)
				}
			}
			// Leading without loops is not an option: the next change (or
			// the poll, if the transfer failed) decides again.
			leading = false
			continue
		}
		lc.begin(ctx)
	}
}

// barrier waits for the barrier, retrying while this member still leads.
func (lc *Lifecycle) barrier(ctx context.Context) bool {
	for i := 1; i <= lc.cfg.BarrierAttempts; i++ {
		if ctx.Err() != nil || !lc.raft.IsLeader() {
			return false
		}
		err := lc.raft.Barrier(lc.cfg.BarrierTimeout)
		if err == nil {
			return lc.raft.IsLeader()
		}
		lc.log.Warn("barrier after election failed", "attempt", i, "of", lc.cfg.BarrierAttempts, "err", err)
	}
	return false
}

// begin starts a term's loops.
func (lc *Lifecycle) begin(parent context.Context) {
	lc.mu.Lock()
	if lc.term != nil {
		lc.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(parent)
	t := &term{cancel: cancel}
	lc.term = t
	lc.mu.Unlock()
	loops := lc.member.BeginTerm(ctx)
	names := make([]string, len(loops))
	for i, l := range loops {
		names[i] = l.Name
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			l.Run(ctx)
		}()
	}
	lc.log.Info("leading: leader loops started", "loops", names)
}

// Stop ends the current term, if any: its loops are cancelled, the member
// told, and the loops waited for (at most StopWait).
func (lc *Lifecycle) Stop() {
	lc.mu.Lock()
	t := lc.term
	lc.term = nil
	lc.mu.Unlock()
	if t == nil {
		return
	}
	t.cancel()
	lc.member.EndTerm()
	done := make(chan struct{})
	go func() {
		t.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(lc.cfg.StopWait):
		lc.log.Warn("leader loops still stopping", "after", lc.cfg.StopWait)
	}
}

// Leading reports whether a term runs.
func (lc *Lifecycle) Leading() bool {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.term != nil
}
