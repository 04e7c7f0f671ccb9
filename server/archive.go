package server

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/latticehpc/lattice/model"
)

// archive keeps ended allocations after the retention period has pruned
// them from the replicated state: one JSON line per allocation
// (`{"index":N,"allocation":{…}}`, N the Prune's log index) appended to
// DATA_DIR/archive/allocations.jsonl by every member when it applies a
// Prune. The quorum's state (and so its snapshots and a follower's catch-up)
// stays proportional to live work; history lives beside it, on each member.
//
// A Prune applied again after a restart (Raft replays the log after the
// last snapshot) is skipped by its index. A member that caught up by
// installing a snapshot never applied the Prunes the snapshot covers, so its
// archive lacks what was pruned before it caught up: history is complete on
// members that were in the quorum when it was pruned (backups of the archive
// files are a copy away).
type archive struct {
	path string
	log  *slog.Logger

	mu        sync.Mutex
	lastIndex uint64    // highest Prune index written
	newestEnd time.Time // latest end time archived
	count     int
}

func openArchive(dir string, log *slog.Logger) (*archive, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("archive dir %s: %w", dir, err)
	}
	a := &archive{path: filepath.Join(dir, "allocations.jsonl"), log: log}
	err := a.scan(func(index uint64, al *model.Allocation) bool {
		a.lastIndex = max(a.lastIndex, index)
		if al.EndTime.After(a.newestEnd) {
			a.newestEnd = al.EndTime
		}
		a.count++
		return true
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

type archiveLine struct {
	Index      uint64            `json:"index"`
	Allocation *model.Allocation `json:"allocation"`
}

// write appends what one Prune dropped (quorum.FSM.Archive).
func (a *archive) write(index uint64, pruned []*model.Allocation) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if index <= a.lastIndex {
		return // applied again after a restart: written already
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	newest := a.newestEnd
	for _, al := range pruned {
		if err := enc.Encode(archiveLine{Index: index, Allocation: al}); err != nil {
			a.log.Error("archive: encode", "alloc", al.ID, "err", err)
			return
		}
		if al.EndTime.After(newest) {
			newest = al.EndTime
		}
	}
	f, err := os.OpenFile(a.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err == nil {
		_, err = f.Write(buf.Bytes())
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		// The allocations are gone from the state either way; say so loudly.
		a.log.Error("archive: pruned allocations not written", "index", index, "count", len(pruned), "err", err)
		return
	}
	a.lastIndex, a.newestEnd = index, newest
	a.count += len(pruned)
}

// scan calls fn for every archived allocation in file order until it returns false.
func (a *archive) scan(fn func(index uint64, al *model.Allocation) bool) error {
	f, err := os.Open(a.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("archive %s: %w", a.path, err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	for line := 1; ; line++ {
		b, err := r.ReadBytes('\n')
		if len(b) > 0 && b[len(b)-1] == '\n' {
			var l archiveLine
			if jerr := json.Unmarshal(b, &l); jerr != nil || l.Allocation == nil {
				return fmt.Errorf("archive %s line %d: not an archived allocation: %v", a.path, line, jerr)
			}
			if !fn(l.Index, l.Allocation) {
				return nil
			}
		} // a last line without its newline is a torn write: ignored
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("archive %s: %w", a.path, err)
		}
	}
}

// matching returns the archived allocations keep accepts, in id order,
// each once. It reads the whole file: history listings are rare and paged.
func (a *archive) matching(keep func(*model.Allocation) bool) ([]*model.Allocation, error) {
	a.mu.Lock()
	empty := a.count == 0
	a.mu.Unlock()
	if empty {
		return nil, nil
	}
	var out []*model.Allocation
	seen := map[uint64]bool{}
	err := a.scan(func(_ uint64, al *model.Allocation) bool {
		if !seen[al.ID] && keep(al) {
			seen[al.ID] = true
			out = append(out, al)
		}
		return true
	})
	slices.SortFunc(out, func(x, y *model.Allocation) int { return cmp.Compare(x.ID, y.ID) })
	return out, err
}

// endedSince reports whether something archived ended at or after t.
func (a *archive) endedSince(t time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.count > 0 && !a.newestEnd.Before(t)
}

// lookup finds archived allocations by the ids users type: "12" (and, for
// an array's id, its archived tasks) or "12_3".
func (a *archive) lookup(id string) ([]*model.Allocation, error) {
	base, idx, task := cutTask(id)
	n, err := strconv.ParseUint(base, 10, 64)
	if err != nil {
		return nil, nil
	}
	return a.matching(func(al *model.Allocation) bool {
		if task {
			return al.ArrayJobID == n && strconv.Itoa(al.ArrayIndex) == idx
		}
		return al.ID == n || al.ArrayJobID == n
	})
}

func cutTask(id string) (base, idx string, task bool) {
	for i := range len(id) {
		if id[i] == '_' {
			return id[:i], id[i+1:], true
		}
	}
	return id, "", false
}
