package quorum

import (
	"slices"
	"sync/atomic"

	"github.com/latticehpc/lattice/model"
)

// allocChunk is the most allocations one chunk of an allocList holds; a
// chunk that grows past it is split in two.
const allocChunk = 512

// allocList is a set of allocations in id order — a derived index (a
// vCluster's pending allocations, the active ones) that readers take
// whole, without a copy under the read lock: Share hands out the chunks as
// they are, and the state never writes a chunk a reader may hold again —
// the first change after a Share copies the chunk it touches (at most
// allocChunk pointers). So a scheduling cycle over 100,000 pending
// allocations holds Apply up for a few hundred pointers, and reads them in
// order after the lock, with no sort.
//
// Apply owns the list (under the write lock); Share may be called by
// concurrent readers under the read lock.
type allocList struct {
	chunks []*allocChunkData
	n      int
	// gen is the generation of the list's changes: a chunk made in an
	// older generation than gen may be held by a reader and is copied
	// before it changes. shared is the last generation shared.
	gen    uint64
	shared atomic.Uint64
}

type allocChunkData struct {
	gen    uint64
	ids    []uint64 // ascending
	allocs []*model.Allocation
}

// AllocView is an allocList as it was when shared: allocations in id
// order, never changed afterwards. The zero value is empty.
type AllocView struct {
	chunks []*allocChunkData
	n      int
}

// Len is the number of allocations in the view.
func (v AllocView) Len() int { return v.n }

// AppendTo appends the view's allocations, in id order, to dst.
func (v AllocView) AppendTo(dst []*model.Allocation) []*model.Allocation {
	dst = slices.Grow(dst, v.n)
	for _, c := range v.chunks {
		dst = append(dst, c.allocs...)
	}
	return dst
}

// All iterates over the view's allocations in id order.
func (v AllocView) All(yield func(*model.Allocation) bool) {
	for _, c := range v.chunks {
		for _, a := range c.allocs {
			if !yield(a) {
				return
			}
		}
	}
}

func newAllocList() *allocList { return &allocList{gen: 1} }

// Share returns the list as it is now. Safe under the read lock.
func (l *allocList) Share() AllocView {
	if l == nil {
		return AllocView{}
	}
	if l.shared.Load() != l.gen {
		l.shared.Store(l.gen)
	}
	return AllocView{chunks: slices.Clone(l.chunks), n: l.n}
}

// Len is the number of allocations in the list.
func (l *allocList) Len() int {
	if l == nil {
		return 0
	}
	return l.n
}

// begin starts a change: when the current generation was shared, chunks
// of it are a reader's from now on.
func (l *allocList) begin() {
	if l.shared.Load() == l.gen {
		l.gen++
	}
}

// own returns chunk i, copied first when a reader may hold it.
func (l *allocList) own(i int) *allocChunkData {
	c := l.chunks[i]
	if c.gen == l.gen {
		return c
	}
	cp := &allocChunkData{gen: l.gen, ids: make([]uint64, len(c.ids), max(len(c.ids)+1, allocChunk/2)),
		allocs: make([]*model.Allocation, len(c.allocs), max(len(c.allocs)+1, allocChunk/2))}
	copy(cp.ids, c.ids)
	copy(cp.allocs, c.allocs)
	l.chunks[i] = cp
	return cp
}

// find returns the chunk that holds id or would: the first whose last id
// is >= id, else the last chunk (-1 when there is none).
func (l *allocList) find(id uint64) int {
	i, _ := slices.BinarySearchFunc(l.chunks, id, func(c *allocChunkData, id uint64) int {
		last := c.ids[len(c.ids)-1]
		switch {
		case last < id:
			return -1
		case last > id:
			return 1
		}
		return 0
	})
	if i == len(l.chunks) {
		i--
	}
	return i
}

// put stores a (replacing the allocation with its id, if any).
func (l *allocList) put(a *model.Allocation) {
	l.begin()
	ci := l.find(a.ID)
	if ci < 0 {
		l.chunks = append(l.chunks, &allocChunkData{gen: l.gen,
			ids: append(make([]uint64, 0, allocChunk/2), a.ID), allocs: append(make([]*model.Allocation, 0, allocChunk/2), a)})
		l.n++
		return
	}
	c := l.own(ci)
	j, found := slices.BinarySearch(c.ids, a.ID)
	if found {
		c.allocs[j] = a
		return
	}
	c.ids = slices.Insert(c.ids, j, a.ID)
	c.allocs = slices.Insert(c.allocs, j, a)
	l.n++
	if len(c.ids) > allocChunk {
		// Split in two halves; each keeps room to grow.
		h := len(c.ids) / 2
		right := &allocChunkData{gen: l.gen, ids: make([]uint64, len(c.ids)-h, allocChunk),
			allocs: make([]*model.Allocation, len(c.ids)-h, allocChunk)}
		copy(right.ids, c.ids[h:])
		copy(right.allocs, c.allocs[h:])
		clear(c.allocs[h:]) // no stale pointers past the end
		c.ids, c.allocs = c.ids[:h], c.allocs[:h]
		l.chunks = slices.Insert(l.chunks, ci+1, right)
	}
}

// remove drops the allocation with id, if the list holds it.
func (l *allocList) remove(id uint64) {
	ci := l.find(id)
	if ci < 0 {
		return
	}
	if _, found := slices.BinarySearch(l.chunks[ci].ids, id); !found {
		return
	}
	l.begin()
	c := l.own(ci)
	j, _ := slices.BinarySearch(c.ids, id)
	c.ids = slices.Delete(c.ids, j, j+1)
	c.allocs = slices.Delete(c.allocs, j, j+1)
	l.n--
	switch {
	case len(c.ids) == 0:
		l.chunks = slices.Delete(l.chunks, ci, ci+1)
	case len(c.ids) < allocChunk/8:
		// A small chunk joins a neighbour, so that the chunks a Share
		// copies stay about n/allocChunk however the list shrank.
		if ci+1 < len(l.chunks) && len(c.ids)+len(l.chunks[ci+1].ids) <= allocChunk {
			l.merge(ci)
		} else if ci > 0 && len(c.ids)+len(l.chunks[ci-1].ids) <= allocChunk {
			l.merge(ci - 1)
		}
	}
}

// merge joins chunk i+1 to chunk i.
func (l *allocList) merge(i int) {
	c := l.own(i)
	next := l.chunks[i+1]
	c.ids = append(c.ids, next.ids...)
	c.allocs = append(c.allocs, next.allocs...)
	l.chunks = slices.Delete(l.chunks, i+1, i+2)
}
