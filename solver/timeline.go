package solver

// The release timeline. For one node class (and, in a sensitive vCluster,
// one conformance group) it holds every own node that can take new work at
// some point, keyed by avail: the time offset from Now at which the node is
// free of everything already decided (running work, starts of this cycle,
// reservations). Nodes with the same avail form a level; the levels sit in a
// treap ordered by time whose nodes carry subtree node counts, so "the n-th
// node to become available" — a job's earliest reserved start — is one
// O(log levels) descent, and a reservation moves its nodes to a new level in
// O(nodes moved + levels touched · log levels).
//
// Reservations are appended after a node's last commitment: a node's avail
// only ever moves later. Holes that a reservation leaves before its start on
// a node that is free now are used by jobs that start now and end before the
// reservation (the backfill), not by later reservations.

// tnode is one level of the treap.
type tnode struct {
	key      int64 // time offset from Now
	cnt, sum int32 // nodes at this level; nodes in the subtree
	l, r     int32 // children, -1 = none
	pri      uint32
}

// levels is an order-statistic treap of levels with the node list of each.
type levels struct {
	t     []tnode
	lists [][]int32 // by treap node id: the nodes at that level, unordered
	root  int32
	free  []int32 // recycled treap node ids
	seed  uint32  // xorshift state: fixed seed, so the shape is deterministic
}

func newLevels() levels { return levels{root: -1, seed: 2463534242} }

func (lv *levels) rand() uint32 {
	x := lv.seed
	x ^= x << 13
	x ^= x >> 17
	x ^= x << 5
	lv.seed = x
	return x
}

func (lv *levels) sumOf(x int32) int32 {
	if x < 0 {
		return 0
	}
	return lv.t[x].sum
}

func (lv *levels) upd(x int32) {
	n := &lv.t[x]
	n.sum = n.cnt + lv.sumOf(n.l) + lv.sumOf(n.r)
}

func (lv *levels) rotR(x int32) int32 {
	y := lv.t[x].l
	lv.t[x].l = lv.t[y].r
	lv.t[y].r = x
	lv.upd(x)
	lv.upd(y)
	return y
}

func (lv *levels) rotL(x int32) int32 {
	y := lv.t[x].r
	lv.t[x].r = lv.t[y].l
	lv.t[y].l = x
	lv.upd(x)
	lv.upd(y)
	return y
}

// find returns the id of the level at key, or -1.
func (lv *levels) find(key int64) int32 {
	x := lv.root
	for x >= 0 {
		n := &lv.t[x]
		switch {
		case key < n.key:
			x = n.l
		case key > n.key:
			x = n.r
		default:
			return x
		}
	}
	return -1
}

// level returns the id of the level at key, creating an empty one if needed.
func (lv *levels) level(key int64) int32 {
	if id := lv.find(key); id >= 0 {
		return id
	}
	var id int32
	n := tnode{key: key, l: -1, r: -1, pri: lv.rand()}
	if k := len(lv.free); k > 0 {
		id = lv.free[k-1]
		lv.free = lv.free[:k-1]
		lv.t[id] = n
		lv.lists[id] = lv.lists[id][:0]
	} else {
		id = int32(len(lv.t))
		lv.t = append(lv.t, n)
		lv.lists = append(lv.lists, nil)
	}
	lv.root = lv.insert(lv.root, id)
	return id
}

func (lv *levels) insert(x, id int32) int32 {
	if x < 0 {
		return id
	}
	if lv.t[id].key < lv.t[x].key {
		l := lv.insert(lv.t[x].l, id)
		lv.t[x].l = l
		if lv.t[l].pri > lv.t[x].pri {
			return lv.rotR(x)
		}
	} else {
		r := lv.insert(lv.t[x].r, id)
		lv.t[x].r = r
		if lv.t[r].pri > lv.t[x].pri {
			return lv.rotL(x)
		}
	}
	lv.upd(x)
	return x
}

// remove deletes the (empty) level at key.
func (lv *levels) remove(key int64) { lv.root = lv.del(lv.root, key) }

func (lv *levels) del(x int32, key int64) int32 {
	if x < 0 {
		return -1
	}
	n := lv.t[x]
	switch {
	case key < n.key:
		l := lv.del(n.l, key)
		lv.t[x].l = l
	case key > n.key:
		r := lv.del(n.r, key)
		lv.t[x].r = r
	default:
		if n.l < 0 || n.r < 0 {
			lv.free = append(lv.free, x)
			if n.l < 0 {
				return n.r
			}
			return n.l
		}
		if lv.t[n.l].pri > lv.t[n.r].pri {
			x = lv.rotR(x)
			r := lv.del(lv.t[x].r, key)
			lv.t[x].r = r
		} else {
			x = lv.rotL(x)
			l := lv.del(lv.t[x].l, key)
			lv.t[x].l = l
		}
	}
	lv.upd(x)
	return x
}

// add changes the node count of the existing level at key by d.
func (lv *levels) add(key int64, d int32) {
	x := lv.root
	for x >= 0 {
		n := &lv.t[x]
		n.sum += d
		switch {
		case key < n.key:
			x = n.l
		case key > n.key:
			x = n.r
		default:
			n.cnt += d
			return
		}
	}
	panic("solver: timeline level missing") // unreachable: callers add to existing levels
}

// total is the number of nodes over all levels.
func (lv *levels) total() int { return int(lv.sumOf(lv.root)) }

// kth returns the key of the level holding the k-th node (0-based) in time
// order: the time at which k+1 nodes are available. k must be < total.
func (lv *levels) kth(k int) int64 {
	kk := int32(k)
	x := lv.root
	for {
		n := &lv.t[x]
		ls := lv.sumOf(n.l)
		switch {
		case kk < ls:
			x = n.l
		case kk < ls+n.cnt:
			return n.key
		default:
			kk -= ls + n.cnt
			x = n.r
		}
	}
}

// pred returns the largest key below key, and false when there is none.
func (lv *levels) pred(key int64) (int64, bool) {
	x, best, ok := lv.root, int64(0), false
	for x >= 0 {
		n := &lv.t[x]
		if n.key < key {
			best, ok = n.key, true
			x = n.r
		} else {
			x = n.l
		}
	}
	return best, ok
}

// timeline is the release timeline of one class (and conformance group).
type timeline struct {
	cls *class
	fp  int32 // conformance group, -1 = any
	lv  levels
	pos []int32 // by node: index in its level's list, -1 = not a member
}

// put adds member node x at key.
func (tl *timeline) put(x int32, key int64) {
	id := tl.lv.level(key)
	tl.pos[x] = int32(len(tl.lv.lists[id]))
	tl.lv.lists[id] = append(tl.lv.lists[id], x)
	tl.lv.add(key, 1)
}

// move moves the member nodes among xs from their current avail (read from
// avail) to key newKey. Runs of nodes with the same old avail cost one
// level lookup.
func (tl *timeline) move(xs []int32, avail []int64, newKey int64) {
	moved := int32(0)
	var runKey int64
	runID, run := int32(-1), int32(0)
	flush := func() {
		if run == 0 {
			return
		}
		tl.lv.add(runKey, -run)
		if tl.lv.t[runID].cnt == 0 {
			tl.lv.remove(runKey)
		}
		run = 0
	}
	for _, x := range xs {
		if tl.pos[x] < 0 {
			continue
		}
		old := avail[x]
		if old == newKey {
			continue
		}
		if runID < 0 || old != runKey {
			flush()
			runKey, runID = old, tl.lv.find(old)
		}
		list := tl.lv.lists[runID]
		i := tl.pos[x]
		last := list[len(list)-1]
		list[i] = last
		tl.pos[last] = i
		tl.lv.lists[runID] = list[:len(list)-1]
		run++
		moved++
	}
	flush()
	if moved == 0 {
		return
	}
	id := tl.lv.level(newKey)
	for _, x := range xs {
		if tl.pos[x] < 0 || avail[x] == newKey {
			continue
		}
		tl.pos[x] = int32(len(tl.lv.lists[id]))
		tl.lv.lists[id] = append(tl.lv.lists[id], x)
	}
	tl.lv.add(newKey, moved)
}
