package quorum

import (
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/latticehpc/lattice/model"
)

// FSM is the Raft state machine: it decodes committed entries and applies
// them to the State. Apply is deterministic; readers share the state under a
// read lock and may keep the (immutable) objects they got.
type FSM struct {
	mu    sync.RWMutex
	state *State
	// applied is the index of the last applied log entry.
	applied uint64

	changeMu sync.Mutex
	changed  chan struct{}

	// OnApply, when set before Raft starts, is called after each command is
	// applied (outside the lock, on Raft's apply goroutine): keep it short
	// and non-blocking.
	OnApply func(c Command, r *Result)
	// Audit, when set before Raft starts, is called after each command is
	// applied, under the write lock, with the state as that command left it
	// (soak tests check every invariant after every command). It must not
	// keep s or call back into the FSM.
	Audit func(c Command, s *State)
	// Archive, when set before Raft starts, receives the allocations each
	// Prune dropped, with the entry's log index (outside the lock, on Raft's
	// apply goroutine), so a member can keep history outside the state. An
	// entry applied again after a restart is handed over again.
	Archive func(index uint64, pruned []*model.Allocation)
}

// NewFSM returns an FSM over an empty state.
func NewFSM() *FSM {
	return &FSM{state: NewState(), changed: make(chan struct{})}
}

// Apply implements raft.FSM. A command that fails to decode panics: better to
// stop a member than to let it diverge from the others.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	c, err := Decode(l.Data)
	if err != nil {
		panic(fmt.Sprintf("quorum: log entry %d: %v", l.Index, err))
	}
	return f.applyCommand(l.Index, c)
}

// ApplyBatch implements raft.BatchingFSM: one lock for a batch of entries.
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	cmds := make([]Command, len(logs))
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		c, err := Decode(l.Data)
		if err != nil {
			panic(fmt.Sprintf("quorum: log entry %d: %v", l.Index, err))
		}
		cmds[i] = c
	}
	type archived struct {
		index  uint64
		allocs []*model.Allocation
	}
	var arch []archived
	f.mu.Lock()
	before := f.state.Version
	for i, c := range cmds {
		if c != nil {
			out[i] = f.state.apply(c)
			if f.Audit != nil {
				f.Audit(c, f.state)
			}
			if p := f.state.takePruned(); len(p) > 0 {
				arch = append(arch, archived{logs[i].Index, p})
			}
		}
		f.applied = max(f.applied, logs[i].Index)
	}
	changed := f.state.Version != before
	f.mu.Unlock()
	if changed {
		f.broadcast()
	}
	if f.Archive != nil {
		for _, a := range arch {
			f.Archive(a.index, a.allocs)
		}
	}
	if f.OnApply != nil {
		for i, c := range cmds {
			if c != nil {
				f.OnApply(c, out[i].(*Result))
			}
		}
	}
	return out
}

func (f *FSM) applyCommand(index uint64, c Command) *Result {
	f.mu.Lock()
	before := f.state.Version
	r := f.state.apply(c)
	if f.Audit != nil {
		f.Audit(c, f.state)
	}
	f.applied = max(f.applied, index)
	pruned := f.state.takePruned()
	changed := f.state.Version != before
	f.mu.Unlock()
	if changed {
		f.broadcast()
	}
	if f.Archive != nil && len(pruned) > 0 {
		f.Archive(index, pruned)
	}
	if f.OnApply != nil {
		f.OnApply(c, r)
	}
	return r
}

func (f *FSM) broadcast() {
	f.changeMu.Lock()
	close(f.changed)
	f.changed = make(chan struct{})
	f.changeMu.Unlock()
}

// Changed returns a channel closed at the next state change.
func (f *FSM) Changed() <-chan struct{} {
	f.changeMu.Lock()
	defer f.changeMu.Unlock()
	return f.changed
}

// View runs fn with read access to the committed state. fn must not modify
// it, nor block for long: Apply waits for it.
func (f *FSM) View(fn func(s *State)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.state)
}

// AppliedIndex is the index of the last applied entry.
func (f *FSM) AppliedIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.applied
}

// Snapshot implements raft.FSM: it copies references under the read lock
// (objects are immutable) and leaves the encoding to Persist.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return &fsmSnapshot{image: f.state.image()}, nil
}

// Restore implements raft.FSM: it builds a fresh state from the stream and
// swaps it in.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	s, err := ReadSnapshot(rc)
	if err != nil {
		return fmt.Errorf("restore snapshot: %w", err)
	}
	f.mu.Lock()
	f.state = s
	f.mu.Unlock()
	f.broadcast()
	return nil
}

type fsmSnapshot struct{ image *image }

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.image.write(sink); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {}

// WriteBackup writes a consistent snapshot stream of the current state to w.
// It holds the read lock only to copy references.
func (f *FSM) WriteBackup(w io.Writer) error {
	f.mu.RLock()
	im := f.state.image()
	f.mu.RUnlock()
	return im.write(w)
}
