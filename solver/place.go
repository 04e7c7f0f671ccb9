package solver

import (
	"slices"

	"github.com/latticehpc/lattice/topology"
)

type startResult int

const (
	startNodes startResult = iota // not enough usable nodes now
	startOK                       // nodes chosen in s.chosen
	startPower                    // nodes exist but the power headroom does not
)

// tryStart decides whether jb starts now and on which nodes (left in
// s.chosen, nothing committed yet). It returns how many of them are borrowed.
//
// NodesMin..NodesMax policy: a job starts when at least NodesMin usable nodes
// exist; it then takes as many own usable nodes as there are, up to NodesMax
// and its tenant's node quota room. Borrowed nodes are used only to reach
// NodesMin, never to grow beyond it (and never by a job that must stay on
// own nodes). If the chosen nodes exceed the power headroom the job shrinks
// (not below NodesMin) until they fit.
func (s *state) tryStart(jb *job, q *quota) (startResult, int) {
	c, e := jb.cls, jb.wall
	ownU := c.usableOwn(e)
	borrow := !jb.ownOnly
	borU := 0
	if borrow {
		borU = c.usableBorrow(e)
	}
	if ownU+borU < jb.min {
		return startNodes, 0
	}
	fp := int32(-1)
	if s.sensitive {
		fp, ownU = s.pickFp(c, jb.min, e)
		if fp < 0 {
			return startNodes, 0
		}
	}
	limit := jb.max
	if q.nodes >= 0 {
		limit = min(limit, q.nodes)
	}
	n := jb.min
	if ownU >= jb.min {
		n = max(jb.min, min(ownU, limit))
	}
	for shrinks := 0; ; shrinks++ {
		nb, ok := s.selectNow(c, n, e, fp, borrow)
		if !ok {
			return startNodes, 0
		}
		if s.headroom < 0 {
			return startOK, nb
		}
		var d int64
		for _, x := range s.chosen {
			d += s.delta[x]
		}
		if d <= s.headroom {
			return startOK, nb
		}
		if n == jb.min {
			return startPower, 0
		}
		next := jb.min
		if shrinks < 3 {
			next = max(jb.min, min(n-1, int(int64(n)*s.headroom/d)))
		}
		n = next
	}
}

// pickFp chooses the conformance group a sensitive job runs in: among the
// groups whose own usable nodes hold it, the one with the fewest (best fit,
// keeping big groups whole). It returns -1 if none (a sensitive vCluster
// never borrows).
func (s *state) pickFp(c *class, n int, e int64) (fp int32, ownU int) {
	best, bestOwn := int32(-1), 0
	for f := 0; f < s.nFps; f++ {
		if c.eligAll[f] < n {
			continue
		}
		own := 0
		for ci := range s.cellFp {
			if s.cellFp[ci] == int32(f) {
				own += c.cellOwn(ci, e)
			}
		}
		if own >= n && (best < 0 || own < bestOwn) {
			best, bestOwn = int32(f), own
		}
	}
	return best, bestOwn
}

// fillGroups sets s.gu to the usable nodes per dragonfly group (own ones for
// a job ending at e, or borrowable ones), restricted to conformance group
// fp (-1 = any), and returns the total.
func (s *state) fillGroups(c *class, borrow bool, e int64, fp int32) int {
	clear(s.gu)
	total := 0
	for ci := range s.cellGroup {
		if fp >= 0 && s.cellFp[ci] != fp {
			continue
		}
		var u int
		if borrow {
			u = c.cellBorrow(ci, e)
		} else {
			u = c.cellOwn(ci, e)
		}
		s.gu[s.cellGroup[ci]] += u
		total += u
	}
	return total
}

// selectNow picks n nodes for a job ending at e into s.chosen: own nodes in
// the fewest dragonfly groups with best fit when they can hold it (binpack:
// from the busiest groups first), else all own usable nodes plus the fewest
// borrowable ones (when borrow), again by group. It returns how many are
// borrowed and false if n nodes are not there.
func (s *state) selectNow(c *class, n int, e int64, fp int32, borrow bool) (int, bool) {
	s.chosen = s.chosen[:0]
	ownTotal := s.fillGroups(c, false, e, fp)
	if ownTotal >= n {
		s.takes = s.takes[:0]
		if s.binpack {
			s.takes = s.binpackTakes(c, n)
		} else if fp < 0 && c.multiFp {
			// Prefer one conformance group: the best-fit dragonfly group
			// among those where a single conformance group holds the job.
			best := -1
			for g, u := range s.gu {
				if u >= n && (best < 0 || u < s.gu[best]) && s.cellHolds(c, g, n, e) {
					best = g
				}
			}
			if best >= 0 {
				s.takes = append(s.takes, topology.Take{Group: best, Nodes: n})
			}
		}
		if len(s.takes) == 0 {
			s.takes, _ = s.picker.Pick(s.takes, s.gu, n)
		}
		for _, t := range s.takes {
			s.pickInGroup(c, false, t.Group, t.Nodes, s.gu[t.Group], e, fp)
		}
		return 0, true
	}
	// Own nodes cannot hold it: all of them, and borrow the rest.
	if !borrow {
		return 0, false
	}
	for g, u := range s.gu {
		if u > 0 {
			s.pickInGroup(c, false, g, u, u, e, fp)
		}
	}
	need := n - ownTotal
	if s.fillGroups(c, true, e, fp) < need {
		s.chosen = s.chosen[:0]
		return 0, false
	}
	s.takes, _ = s.picker.Pick(s.takes[:0], s.gu, need)
	for _, t := range s.takes {
		s.pickInGroup(c, true, t.Group, t.Nodes, s.gu[t.Group], e, fp)
	}
	return need, true
}

// binpackTakes splits n own usable nodes (per group in s.gu) over the
// dragonfly groups with the most busy nodes of the class first — ties to
// the group with fewer usable nodes, then the lower index — so running work
// is packed together and whole groups stay free.
func (s *state) binpackTakes(c *class, n int) []topology.Take {
	order := s.touched[:0]
	for g, u := range s.gu {
		if u > 0 {
			order = append(order, int32(g))
		}
	}
	slices.SortFunc(order, func(a, b int32) int {
		switch {
		case c.busyG[a] != c.busyG[b]:
			return c.busyG[b] - c.busyG[a]
		case s.gu[a] != s.gu[b]:
			return s.gu[a] - s.gu[b]
		}
		return int(a - b)
	})
	takes := s.takes[:0]
	for _, g := range order {
		if n == 0 {
			break
		}
		k := min(n, s.gu[g])
		takes = append(takes, topology.Take{Group: int(g), Nodes: k})
		n -= k
	}
	s.touched = order[:0]
	return takes
}

// cellUsable is a cell's usable nodes of one kind for a job ending at e.
func (c *class) cellUsable(ci int, borrow bool, e int64) int {
	if borrow {
		return c.cellBorrow(ci, e)
	}
	return c.cellOwn(ci, e)
}

// cellHolds reports whether one cell (one conformance group) of dragonfly
// group g has n usable own nodes for a job ending at e.
func (s *state) cellHolds(c *class, g, n int, e int64) bool {
	for ci := int(s.groupCells[g]); ci < int(s.groupCells[g+1]); ci++ {
		if c.cellOwn(ci, e) >= n {
			return true
		}
	}
	return false
}

// pickInGroup appends k usable nodes of dragonfly group g (which has
// groupTotal of them) to s.chosen: from the single conformance group with
// the fewest usable nodes that holds k, else from the largest groups first.
func (s *state) pickInGroup(c *class, borrow bool, g, k, groupTotal int, e int64, fp int32) {
	lo, hi := int(s.groupCells[g]), int(s.groupCells[g+1])
	if k >= groupTotal {
		for ci := lo; ci < hi; ci++ {
			if fp < 0 || s.cellFp[ci] == fp {
				s.takeFromCell(c, borrow, ci, c.cellUsable(ci, borrow, e), e)
			}
		}
		return
	}
	best, bestU := -1, 0
	for ci := lo; ci < hi; ci++ {
		if fp >= 0 && s.cellFp[ci] != fp {
			continue
		}
		if u := c.cellUsable(ci, borrow, e); u >= k && (best < 0 || u < bestU) {
			best, bestU = ci, u
		}
	}
	if best >= 0 {
		s.takeFromCell(c, borrow, best, k, e)
		return
	}
	for need := k; need > 0; {
		big, bigU := -1, 0
		for ci := lo; ci < hi; ci++ {
			if s.cellUse[ci] || (fp >= 0 && s.cellFp[ci] != fp) {
				continue
			}
			if u := c.cellUsable(ci, borrow, e); u > bigU {
				big, bigU = ci, u
			}
		}
		if big < 0 {
			break
		}
		s.cellUse[big] = true
		t := min(need, bigU)
		s.takeFromCell(c, borrow, big, t, e)
		need -= t
	}
	for ci := lo; ci < hi; ci++ {
		s.cellUse[ci] = false
	}
}

// takeFromCell appends k usable nodes of cell ci to s.chosen. Nodes come
// from the holes first — own free nodes reserved later, or borrowable nodes
// lent until a limit: the tightest that still fit first, since only short
// jobs can use them — then from unreserved ones.
func (s *state) takeFromCell(c *class, borrow bool, ci, k int, e int64) {
	if k <= 0 {
		return
	}
	p := &c.own[ci]
	if borrow {
		p = &c.borrow[ci]
	}
	h := p.holes
	for i := holesFrom(h, e); i < len(h) && k > 0; i++ {
		s.chosen = append(s.chosen, h[i].node)
		k--
	}
	for _, x := range p.free {
		if k == 0 {
			break
		}
		if s.taken[x] || (!borrow && s.firstRes[x] != never) {
			continue
		}
		s.chosen = append(s.chosen, x)
		k--
	}
}

// commitStart records that the nodes xs run a job for e from now on.
func (s *state) commitStart(xs []int32, e int64) {
	s.ver++
	for _, c := range s.classes {
		taken := s.resTaken[:0] // reservation starts of the holes taken
		for _, x := range xs {
			if !c.elig[x] {
				continue
			}
			ci := s.cell[x]
			if s.binpack && s.own[x] && !s.held[x] { // held ones count as busy already
				c.busyG[s.group[x]]++
			}
			switch {
			case s.held[x]: // in no pool
			case !s.own[x] && s.firstRes[x] == never:
				c.borrow[ci].n--
				c.borrowFree--
			case !s.own[x]: // lent until a limit
				p := &c.borrow[ci]
				if i, ok := slicesBinarySearchHole(p.holes, hole{s.firstRes[x], x}); ok {
					p.holes = append(p.holes[:i], p.holes[i+1:]...)
				}
				if i := startsFrom(c.borrowLim, s.firstRes[x]); i < len(c.borrowLim) && c.borrowLim[i] == s.firstRes[x] {
					c.borrowLim = append(c.borrowLim[:i], c.borrowLim[i+1:]...)
				}
			case s.firstRes[x] == never:
				c.own[ci].n--
				c.ownFree--
			default:
				p := &c.own[ci]
				if i, ok := slicesBinarySearchHole(p.holes, hole{s.firstRes[x], x}); ok {
					p.holes = append(p.holes[:i], p.holes[i+1:]...)
				}
				taken = append(taken, s.firstRes[x])
			}
		}
		if len(taken) > 0 {
			c.holes = removeEach(c.holes, taken)
		}
		s.resTaken = taken
	}
	for _, x := range xs {
		s.taken[x] = true
	}
	// Unreserved own nodes are now busy until e; reserved ones (holes) stay
	// committed until the end of their reservations, which is later.
	s.tmp = s.tmp[:0]
	for _, x := range xs {
		if s.own[x] && s.firstRes[x] == never && s.avail[x] != never {
			s.tmp = append(s.tmp, x)
		}
	}
	for _, tl := range s.timelines {
		tl.move(s.tmp, s.avail, e)
	}
	for _, x := range s.tmp {
		s.avail[x] = e
	}
	s.compactPools(xs)
}

// removeEach removes from the sorted h one occurrence of each value of rm
// that it holds (rm is sorted here), in one pass.
func removeEach(h, rm []int64) []int64 {
	if len(rm) == 1 {
		if i := startsFrom(h, rm[0]); i < len(h) && h[i] == rm[0] {
			h = append(h[:i], h[i+1:]...)
		}
		return h
	}
	slices.Sort(rm)
	out, j := h[:0], 0
	for _, v := range h {
		for j < len(rm) && rm[j] < v {
			j++
		}
		if j < len(rm) && rm[j] == v {
			j++
			continue
		}
		out = append(out, v)
	}
	return out
}

// compactPools compacts the pools of the cells of xs in every class.
func (s *state) compactPools(xs []int32) {
	ownLive := func(x int32) bool { return !s.taken[x] && s.firstRes[x] == never }
	borLive := func(x int32) bool { return !s.taken[x] }
	for _, c := range s.classes {
		for _, x := range xs {
			if !c.elig[x] {
				continue
			}
			if s.own[x] {
				c.own[s.cell[x]].compact(ownLive)
			} else {
				c.borrow[s.cell[x]].compact(borLive)
			}
		}
	}
}

// buildTimelines builds, from the cycle-start state, the release timeline
// of every class (per conformance group in a sensitive vCluster).
func (s *state) buildTimelines() {
	s.sortByAvail()
	for _, c := range s.classes {
		if !s.sensitive {
			c.tlAny = s.newTimeline(c, -1, s.byAvail)
			continue
		}
		for f := range c.tlFp {
			if c.eligAll[f] > 0 {
				c.tlFp[f] = s.newTimeline(c, int32(f), s.byAvail)
			}
		}
	}
}

// sortByAvail lists in s.byAvail the own nodes in the timeline, by avail
// then index. Avails are few (the nodes of one running job share theirs)
// and neighbouring nodes mostly share them, so it sorts the distinct values
// and places the nodes by counting: O(nodes + values · log values).
func (s *state) sortByAvail() {
	vals := s.avails[:0]
	last := int64(-1)
	for i := range s.nodes {
		if a := s.avail[i]; s.own[i] && a != never && a != last {
			vals = append(vals, a)
			last = a
		}
	}
	slices.Sort(vals)
	vals = slices.Compact(vals)
	s.avails = vals
	bucket := grow(s.bucket, len(s.nodes))
	starts := grow(s.starts, len(vals)+1)
	s.bucket, s.starts = bucket, starts
	b, last, total := int32(-1), int64(-1), 0
	for i := range s.nodes {
		a := s.avail[i]
		if !s.own[i] || a == never {
			bucket[i] = -1
			continue
		}
		if a != last {
			k, _ := slices.BinarySearch(vals, a)
			b, last = int32(k), a
		}
		bucket[i] = b
		starts[b+1]++
		total++
	}
	for k := 1; k < len(starts); k++ {
		starts[k] += starts[k-1]
	}
	byAvail := grow(s.byAvail, total)
	for i, b := range bucket {
		if b >= 0 {
			byAvail[starts[b]] = int32(i)
			starts[b]++
		}
	}
	s.byAvail = byAvail
}

// newTimeline builds the timeline of class c in conformance group fp (-1 =
// any) from own nodes sorted by avail, reusing a timeline of an earlier
// cycle when there is one.
func (s *state) newTimeline(c *class, fp int32, byAvail []int32) *timeline {
	var tl *timeline
	if k := len(s.spareTimelines); k > 0 {
		tl = s.spareTimelines[k-1]
		s.spareTimelines[k-1] = nil
		s.spareTimelines = s.spareTimelines[:k-1]
	} else {
		tl = new(timeline)
	}
	*tl = timeline{cls: c, fp: fp, lv: tl.lv.reset(), pos: grow(tl.pos, len(s.nodes)), pend: tl.pend[:0]}
	for i := range tl.pos {
		tl.pos[i] = -1
	}
	lv := &tl.lv
	if fp < 0 && c.allElig {
		// Every node is a member: each run of one avail in byAvail is a
		// level, copied whole.
		for a := 0; a < len(byAvail); {
			key := s.avail[byAvail[a]]
			b := a + 1
			for b < len(byAvail) && s.avail[byAvail[b]] == key {
				b++
			}
			id := lv.appendLevel(key)
			lv.lists[id] = append(lv.lists[id], byAvail[a:b]...)
			lv.t[id].cnt = int32(b - a)
			for k, x := range byAvail[a:b] {
				tl.pos[x] = int32(k)
			}
			a = b
		}
	} else {
		id, last := int32(-1), int64(-1)
		for _, x := range byAvail {
			if !c.elig[x] || (fp >= 0 && s.fp[x] != fp) {
				continue
			}
			if id < 0 || s.avail[x] != last {
				last = s.avail[x]
				id = lv.appendLevel(last)
			}
			tl.pos[x] = int32(len(lv.lists[id]))
			lv.lists[id] = append(lv.lists[id], x)
			lv.t[id].cnt++
		}
	}
	s.stack = lv.buildSorted(s.stack)
	s.timelines = append(s.timelines, tl)
	return tl
}

// earliest returns the timeline and time offset at which n own nodes of
// class c (in one conformance group when sensitive) are first free of all
// decisions so far, or nil when its own nodes can never hold n.
func (s *state) earliest(c *class, n int) (*timeline, int64) {
	if !s.sensitive {
		tl := c.tlAny
		if tl.lv.total() < n {
			return nil, 0
		}
		return tl, tl.lv.kth(n - 1)
	}
	var best *timeline
	var bestKey int64
	for f := 0; f < s.nFps; f++ {
		if c.eligAll[f] < n {
			continue
		}
		tl := c.tlFp[f]
		if tl.lv.total() < n {
			continue
		}
		if k := tl.lv.kth(n - 1); best == nil || k < bestKey {
			best, bestKey = tl, k
		}
	}
	return best, bestKey
}

// reserve chooses n nodes of tl available by key and reserves them from key
// for e. It takes the nodes that become available latest (but by key)
// first, so nodes free now stay usable for backfill as long as possible;
// within the last level it needs, it picks by dragonfly group with best fit.
// The chosen nodes are left in s.chosen.
func (s *state) reserve(tl *timeline, key int64, n int, e int64) {
	s.chosen = s.chosen[:0]
	remaining := n
	for k := key; remaining > 0; {
		list := tl.lv.lists[tl.lv.find(k)]
		if len(list) <= remaining {
			s.chosen = append(s.chosen, list...)
			remaining -= len(list)
		} else {
			s.pickFromLevel(list, remaining)
			remaining = 0
		}
		if remaining > 0 {
			k, _ = tl.lv.pred(k)
		}
	}
	s.commitReservation(s.chosen, key, addSat(key, e))
}

// pickFromLevel appends r nodes of list to s.chosen, in the fewest dragonfly
// groups with best fit among the groups the level touches. On a long level
// that would cost a scan of the level for each small reservation, it takes
// the level's last r nodes instead: a reservation's exact nodes matter only
// until it starts (each cycle plans afresh, and the start itself is placed
// by topology).
func (s *state) pickFromLevel(list []int32, r int) {
	if len(list) > 64 && len(list) > 4*r {
		s.chosen = append(s.chosen, list[len(list)-r:]...)
		return
	}
	// Count per touched group (in order of first appearance), pick on the
	// compact counts, then take the nodes group by group.
	touched := s.touched[:0]
	for _, x := range list {
		g := s.group[x]
		if s.levelCnt[g] == 0 {
			touched = append(touched, g)
		}
		s.levelCnt[g]++
	}
	counts := s.counts[:0]
	for _, g := range touched {
		counts = append(counts, s.levelCnt[g])
		s.levelCnt[g] = 0
	}
	s.takes, _ = s.picker.Pick(s.takes[:0], counts, r)
	for _, t := range s.takes {
		s.quotaG[touched[t.Group]] = t.Nodes
	}
	for _, x := range list {
		if g := s.group[x]; s.quotaG[g] > 0 {
			s.quotaG[g]--
			s.chosen = append(s.chosen, x)
		}
	}
	s.touched, s.counts = touched, counts
}

// commitReservation records that nodes xs are reserved from start to end.
func (s *state) commitReservation(xs []int32, start, end int64) {
	s.ver++
	// Nodes free now with no reservation become holes: usable now only by
	// jobs that end by start.
	s.tmp = s.tmp[:0]
	for _, x := range xs {
		if s.avail[x] == 0 && s.firstRes[x] == never && !s.taken[x] && s.own[x] && s.ready[x] && s.idle0[x] {
			s.tmp = append(s.tmp, x)
		}
	}
	if len(s.tmp) > 0 {
		for _, c := range s.classes {
			added := 0
			for _, x := range s.tmp {
				if !c.elig[x] {
					continue
				}
				p := &c.own[s.cell[x]]
				p.n--
				h := hole{start, x}
				i, _ := slicesBinarySearchHole(p.holes, h)
				p.holes = append(p.holes, hole{})
				copy(p.holes[i+1:], p.holes[i:])
				p.holes[i] = h
				added++
			}
			if added > 0 {
				c.ownFree -= added
				i := startsFrom(c.holes, start)
				c.holes = append(c.holes, make([]int64, added)...)
				copy(c.holes[i+added:], c.holes[i:])
				for k := i; k < i+added; k++ {
					c.holes[k] = start
				}
			}
		}
		for _, x := range s.tmp {
			s.firstRes[x] = start
		}
		s.compactPools(s.tmp)
	}
	for _, tl := range s.timelines {
		tl.move(xs, s.avail, end)
	}
	for _, x := range xs {
		s.avail[x] = end
	}
}

func slicesBinarySearchHole(h []hole, t hole) (int, bool) {
	lo, hi := 0, len(h)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if cmpHole(h[m], t) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(h) && h[lo] == t
}
