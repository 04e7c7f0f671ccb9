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

// reset returns lv emptied to newLevels' state, keeping its arrays (and
// the node lists' arrays) for reuse.
func (lv levels) reset() levels {
	return levels{t: lv.t[:0], lists: lv.lists[:0], root: -1, free: lv.free[:0], seed: 2463534242}
}

// newList appends an empty node list for a new level id, reusing the array
// a list at that position had in an earlier cycle.
func (lv *levels) newList() {
	if k := len(lv.lists); k < cap(lv.lists) {
		lv.lists = lv.lists[:k+1]
		lv.lists[k] = lv.lists[k][:0]
		return
	}
	lv.lists = append(lv.lists, nil)
}

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
		lv.newList()
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

// remove deletes the (empty) level at key and recycles its id.
func (lv *levels) remove(key int64) {
	id := lv.find(key)
	lv.root = lv.del(lv.root, key)
	lv.free = append(lv.free, id)
}

// rekey moves the whole level id from key old to newKey, which has no level:
// its node list (and so every node's position in it) stays as it is.
func (lv *levels) rekey(id int32, old, newKey int64) {
	cnt := lv.t[id].cnt
	lv.add(old, -cnt)
	lv.root = lv.del(lv.root, old)
	lv.t[id] = tnode{key: newKey, cnt: cnt, sum: cnt, l: -1, r: -1, pri: lv.t[id].pri}
	lv.root = lv.insert(lv.root, id)
}

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

// appendLevel adds a level with a key above every existing one, without
// linking it into the treap; buildSorted links them all at once.
func (lv *levels) appendLevel(key int64) int32 {
	id := int32(len(lv.t))
	lv.t = append(lv.t, tnode{key: key, l: -1, r: -1, pri: lv.rand()})
	lv.newList()
	return id
}

// buildSorted links levels appended in ascending key order into a treap in
// O(levels) (the Cartesian tree of their priorities) and sets the sums.
// stack is scratch space, returned for reuse.
func (lv *levels) buildSorted(stack []int32) []int32 {
	stack = stack[:0]
	for i := range lv.t {
		id := int32(i)
		last := int32(-1)
		for len(stack) > 0 && lv.t[stack[len(stack)-1]].pri < lv.t[id].pri {
			last = stack[len(stack)-1]
			stack = stack[:len(stack)-1]
		}
		lv.t[id].l = last
		if len(stack) > 0 {
			lv.t[stack[len(stack)-1]].r = id
		}
		stack = append(stack, id)
	}
	lv.root = -1
	if len(stack) > 0 {
		lv.root = stack[0]
		lv.sumUp(lv.root)
	}
	return stack[:0]
}

func (lv *levels) sumUp(x int32) int32 {
	if x < 0 {
		return 0
	}
	n := &lv.t[x]
	n.sum = n.cnt + lv.sumUp(n.l) + lv.sumUp(n.r)
	return n.sum
}

// timeline is the release timeline of one class (and conformance group).
type timeline struct {
	cls  *class
	fp   int32 // conformance group, -1 = any
	lv   levels
	pos  []int32 // by node: index in its level's list, -1 = not a member
	pend []int32 // scratch for move
}

// move moves the member nodes among xs from their current avail (read from
// avail) to key newKey. xs lists nodes level by level, as a reservation's
// walk or a start collects them: a run of members with the same old avail
// that is the whole level moves in O(log levels) by re-keying the level;
// other runs move node by node.
func (tl *timeline) move(xs []int32, avail []int64, newKey int64) {
	pend := tl.pend[:0]
	for i := 0; i < len(xs); {
		x := xs[i]
		if tl.pos[x] < 0 || avail[x] == newKey {
			i++
			continue
		}
		old := avail[x]
		j, cnt := i, int32(0)
		for ; j < len(xs); j++ {
			y := xs[j]
			if tl.pos[y] < 0 {
				continue
			}
			if avail[y] != old {
				break
			}
			cnt++
		}
		id := tl.lv.find(old)
		if cnt == tl.lv.t[id].cnt {
			tl.moveLevel(id, old, newKey)
		} else {
			list := tl.lv.lists[id]
			for k := i; k < j; k++ {
				y := xs[k]
				if tl.pos[y] < 0 {
					continue
				}
				p := tl.pos[y]
				last := list[len(list)-1]
				list[p] = last
				tl.pos[last] = p
				list = list[:len(list)-1]
				pend = append(pend, y)
			}
			tl.lv.lists[id] = list
			tl.lv.add(old, -cnt)
		}
		i = j
	}
	if len(pend) > 0 {
		id := tl.lv.level(newKey)
		list := tl.lv.lists[id]
		for _, y := range pend {
			tl.pos[y] = int32(len(list))
			list = append(list, y)
		}
		tl.lv.lists[id] = list
		tl.lv.add(newKey, int32(len(pend)))
	}
	tl.pend = pend[:0]
}

// moveLevel moves every node of level id from old to newKey: a re-key when
// newKey has no level, else a merge that copies the shorter list.
func (tl *timeline) moveLevel(id int32, old, newKey int64) {
	lv := &tl.lv
	target := lv.find(newKey)
	if target < 0 {
		lv.rekey(id, old, newKey)
		return
	}
	src, dst := lv.lists[id], lv.lists[target]
	cnt := lv.t[id].cnt
	if len(src) > len(dst) {
		// Keep the longer list in place; append the target's nodes to it.
		for _, y := range dst {
			tl.pos[y] = int32(len(src))
			src = append(src, y)
		}
		lv.lists[target], lv.lists[id] = src, dst[:0]
	} else {
		for _, y := range src {
			tl.pos[y] = int32(len(dst))
			dst = append(dst, y)
		}
		lv.lists[target], lv.lists[id] = dst, src[:0]
	}
	lv.add(newKey, cnt)
	lv.add(old, -cnt)
	lv.remove(old)
}
