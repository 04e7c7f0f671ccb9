package quorum

import (
	"fmt"
	"sync/atomic"
	"syscall"

	"github.com/hashicorp/raft"
)

// faultLogStore wraps the Raft log store so that tests can make this member
// behave as if its disk were full: every write fails with ENOSPC (Raft then
// refuses the entries, and the member falls behind), reads work.
type faultLogStore struct {
	raft.LogStore
	full atomic.Bool
}

var errDiskFull = fmt.Errorf("fault injection: %w", syscall.ENOSPC)

func (s *faultLogStore) StoreLog(l *raft.Log) error {
	if s.full.Load() {
		return errDiskFull
	}
	return s.LogStore.StoreLog(l)
}

func (s *faultLogStore) StoreLogs(ls []*raft.Log) error {
	if s.full.Load() {
		return errDiskFull
	}
	return s.LogStore.StoreLogs(ls)
}

// SetDiskFull makes the member's Raft log refuse writes (true) or accept
// them again (false). It fails unless the member runs with fault injection.
func (q *Quorum) SetDiskFull(full bool) error {
	if q.diskFaults == nil {
		return fmt.Errorf("fault injection is off on this member (start it with --fault-injection)")
	}
	q.diskFaults.full.Store(full)
	return nil
}

// DiskFull reports whether a disk-full fault is injected.
func (q *Quorum) DiskFull() bool { return q.diskFaults != nil && q.diskFaults.full.Load() }

// DataDir is the member's data directory.
func (q *Quorum) DataDir() string { return q.cfg.DataDir }
