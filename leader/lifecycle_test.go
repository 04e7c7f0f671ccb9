package leader

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type fakeRaft struct {
	ch        chan bool
	leader    atomic.Bool
	barrierOK atomic.Bool
	barriers  atomic.Int32
	transfers atomic.Int32
}

func (f *fakeRaft) LeaderCh() <-chan bool { return f.ch }
func (f *fakeRaft) IsLeader() bool        { return f.leader.Load() }
func (f *fakeRaft) Barrier(time.Duration) error {
	f.barriers.Add(1)
	if f.barrierOK.Load() {
		return nil
	}
	return errors.New("barrier timed out")
}
func (f *fakeRaft) TransferLeadership(string) error {
	f.transfers.Add(1)
	f.leader.Store(false)
	select {
	case f.ch <- false:
	default:
	}
	return nil
}

type fakeMember struct {
	mu      sync.Mutex
	running map[string]bool
	terms   int
	ended   int
}

func (m *fakeMember) BeginTerm(ctx context.Context) []Loop {
	m.mu.Lock()
	m.terms++
	m.mu.Unlock()
	var loops []Loop
	for _, name := range []string{"a", "b", "c"} {
		loops = append(loops, Loop{Name: name, Run: func(ctx context.Context) {
			m.mu.Lock()
			m.running[name] = true
			m.mu.Unlock()
			<-ctx.Done()
			m.mu.Lock()
			m.running[name] = false
			m.mu.Unlock()
		}})
	}
	return loops
}

func (m *fakeMember) EndTerm() {
	m.mu.Lock()
	m.ended++
	m.mu.Unlock()
}

func (m *fakeMember) Changed(bool) {}

func (m *fakeMember) count() (running, terms, ended int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.running {
		if r {
			running++
		}
	}
	return running, m.terms, m.ended
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func newTest(t *testing.T) (*fakeRaft, *fakeMember, *Lifecycle, context.CancelFunc, chan struct{}) {
	r := &fakeRaft{ch: make(chan bool, 4)}
	m := &fakeMember{running: map[string]bool{}}
	lc := New(r, m, Config{BarrierTimeout: time.Millisecond, BarrierAttempts: 3, Poll: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		lc.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return r, m, lc, cancel, done
}

// Every loop starts with leadership (after the barrier) and stops with its
// loss, in one place.
func TestLoopsStartAndStopWithLeadership(t *testing.T) {
	r, m, lc, cancel, done := newTest(t)
	r.barrierOK.Store(true)
	r.leader.Store(true)
	r.ch <- true
	waitUntil(t, "three loops running", func() bool { n, _, _ := m.count(); return n == 3 })
	if !lc.Leading() {
		t.Error("Leading() false while the loops run")
	}
	r.leader.Store(false)
	r.ch <- false
	waitUntil(t, "the loops stopped", func() bool { n, _, e := m.count(); return n == 0 && e == 1 })
	if lc.Leading() {
		t.Error("Leading() true after leadership was lost")
	}
	// Won again: a new term.
	r.leader.Store(true)
	r.ch <- true
	waitUntil(t, "a second term", func() bool { n, terms, _ := m.count(); return n == 3 && terms == 2 })
	cancel()
	<-done
	if n, _, e := m.count(); n != 0 || e != 2 {
		t.Errorf("after Run returned: %d loops running, %d terms ended; want 0 and 2", n, e)
	}
}

// A leader whose barrier keeps failing hands leadership on and runs no
// loops, rather than lead with none.
func TestFailedBarrierHandsLeadershipOn(t *testing.T) {
	r, m, lc, _, _ := newTest(t)
	r.leader.Store(true)
	r.ch <- true
	waitUntil(t, "a leadership transfer", func() bool { return r.transfers.Load() > 0 })
	if got := r.barriers.Load(); got < 3 {
		t.Errorf("%d barrier attempts before the transfer, want 3", got)
	}
	if n, terms, _ := m.count(); n != 0 || terms != 0 || lc.Leading() {
		t.Errorf("%d loops running, %d terms begun after a failed barrier; want none", n, terms)
	}
	// Elected again with a working log: it leads.
	r.barrierOK.Store(true)
	r.leader.Store(true)
	r.ch <- true
	waitUntil(t, "loops after a good barrier", func() bool { n, _, _ := m.count(); return n == 3 })
}
