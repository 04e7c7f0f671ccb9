package solver

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/power"
	"github.com/latticehpc/lattice/predict"
	"github.com/latticehpc/lattice/topology"
)

// never is the avail of a node that takes no new work within any plan.
const never = math.MaxInt64

// addSat adds two non-negative offsets without overflowing past never-1.
func addSat(a, b int64) int64 {
	if a > never-1-b {
		return never - 1
	}
	return a + b
}

// Solve runs one scheduling cycle: GreedyTopologyAwareBackfill over the
// input's pending jobs. See docs/solver.md for the algorithm.
//
//  1. Score every pending job with the cost function (f1..f9 against
//     in.Weights) and sort: score descending, then eligible time (earliest
//     first), then id.
//  2. With reservations on, the head — the longest-waiting runnable job of
//     the highest priority class — is decided first: it starts now or gets
//     a reservation that binds every other job, so no job starves.
//  3. In score order, a job starts now when the nodes it may use — own idle
//     nodes first, nodes of lending vClusters only when its own cannot hold
//     it — pass its hard constraints, hold at least NodesMin of them, fit the
//     power headroom and its tenant's quota room, and delay no reservation
//     already made. Nodes are picked in the fewest dragonfly groups with
//     best fit, preferring one conformance group (required in a sensitive
//     vCluster).
//  4. The first ReservationDepth jobs (the head included) that cannot start
//     for lack of nodes get a reservation: the earliest time the release
//     timeline (running work, this cycle's starts and earlier reservations)
//     gives them NodesMin own nodes, and which nodes. Later jobs start now
//     only around those.
//  5. Every job gets an explanation: rank, score and factors, the reason it
//     waits, its expected start and per-filter node counts.
//
// Solve is pure and deterministic: the same Input gives the same Plan, bit
// for bit. It does not modify in. Slices inside the Plan may share backing
// arrays: treat the Plan as read-only. Solve is a Solver used once; callers
// that plan cycle after cycle (the replay simulator) keep a Solver.
func Solve(in *Input) *Plan {
	var sv Solver
	return sv.Solve(in)
}

// Solver runs scheduling cycles exactly like Solve — the same Input gives
// the same Plan, bit for bit — but keeps its working memory from one cycle
// to the next, so a cycle on an unchanged machine allocates next to
// nothing. The Plan it returns, and every slice in it, is valid only until
// the next call of Solve on the same Solver: copy what must outlive it. A
// Solver is not safe for concurrent use; the zero value is ready to use.
type Solver struct {
	s    state
	plan Plan
}

// Solve runs one scheduling cycle; see the package-level Solve.
func (sv *Solver) Solve(in *Input) *Plan {
	if in == nil {
		return &Plan{}
	}
	s := &sv.s
	s.reset(in, &sv.plan)
	s.scoreAll()
	s.plan()
	s.nameReservations()
	return s.out
}

// job is the solver's view of one pending job.
type job struct {
	j   *Job
	cls *class
	// Copied from j, read on every pass over the queue: the passes then
	// touch only the job array (in rank order after the sort), not the
	// input's larger Jobs.
	id       uint64
	class    int // PriorityClass
	ownOnly  bool
	protFlag bool  // j.Protected
	in       int32 // index in Input.Pending
	min, max int
	wall     int64 // walltime in ns, > 0
	wait     int64 // ns since eligible (ties in the order: longest first)
	q        *quota
	hold     string // j.Hold, or EnergyPrice when flexible work waits for cheaper hours
	score    float64
	f        [model.NumFactors]float64
	pre      bool // started on the nodes held for it, before the others
	prot     bool // protected (Job.Protected): decided after the head, before the others
}

// heldNode is a node held for one job (Node.ReservedFor).
type heldNode struct {
	job  uint64
	node int32
}

// quota is a tenant's remaining room this cycle (< 0 = unlimited) and its f3.
type quota struct {
	nodes, running int
	fairShare      float64
	// svc: the per-job fair share of service applies (a target, and
	// Input.ServiceAverage > 0); svcMean, svcWeight are the tenant's.
	svc                bool
	svcMean, svcWeight float64
}

type state struct {
	in        *Input
	nodes     []Node
	sensitive bool // one conformance group per job (hard), never borrows
	fifo      bool // nothing starts past the first runnable job that cannot
	binpack   bool // own nodes from the busiest dragonfly groups first
	weights   model.Weights

	// Dense indexes by node.
	group, fp, cell []int32
	own, ready      []bool
	idle0           []bool  // no allocation at cycle start
	borrowable      []bool  // another vCluster's free Ready node we may borrow
	held            []bool  // idle, but held for one job (Node.ReservedFor): in no pool
	taken           []bool  // started on this cycle
	avail           []int64 // own nodes: offset from Now when free of all decisions; never = not in the timeline
	// firstRes: own free nodes: start of their first reservation;
	// borrowable nodes: their lending limit (Node.LendUntil); never = none.
	firstRes []int64
	delta    []int64 // watts added by starting work on the node (with a power limit)
	minGPUs  int     // the fewest GPUs of a node, or 0

	nGroups, nFps  int
	groupsInSystem int
	cellGroup      []int32
	cellFp         []int32
	groupCells     []int32 // cells of group g are groupCells[g]..groupCells[g+1]

	classes    []*class
	classByKey map[string]*class
	plainCls   *class
	timelines  []*timeline

	jobs  []job // in the last cycle's rank order (placeJobs); order[rank] indexes it
	order []int32
	keys  []sortKey
	pos   []int32  // by input index: the job's place in jobs (see placeJobs)
	ids   []uint64 // this cycle's ids, in input order (the next prevIDs)
	// The last cycle's order, to seed this cycle's sort with (see
	// seedKeys): the input's ids in input order, and each one's rank.
	prevIDs  []uint64
	prevRank []int32
	slot     []int32    // scratch, by previous rank: the input index, or -1
	mergeBuf []sortKey  // scratch: the merged keys, then swapped with keys
	heldBy   []heldNode // nodes held for a job, by job then node

	quotas   map[string]*quota
	quotaBuf []quota // backing store of quotas; never grows within a cycle
	headroom int64   // < 0 = unlimited

	depth    int  // reservations allowed (ReservationDepth)
	reserved int  // reservations made
	waiting  bool // a job decided earlier waits for nodes
	force    bool // the job being decided is protected: it gets a reservation whatever the depth
	// protRanks lists the protected jobs' ranks (scratch).
	protRanks []int

	// Scratch, reused across jobs.
	gu       []int   // by group
	quotaG   []int   // by group; all zero between uses
	levelCnt []int   // by group; all zero between uses
	touched  []int32 // groups touched by a level
	counts   []int
	cellUse  []bool
	takes    []topology.Take
	picker   topology.Picker
	chosen   []int32
	tmp      []int32
	keyBuf   []byte
	names    []string
	freeG    []int // by group, per class built
	usableG  []int
	byAvail  []int32
	avails   []int64 // distinct avail values, sorted
	bucket   []int32 // by node: index in avails
	starts   []int32 // counting sort offsets
	resTaken []int64 // reservation starts of the holes a start takes
	stack    []int32 // treap building

	// Kept from earlier cycles for reuse: group and fingerprint values
	// (of runs of nodes, then sorted and unique) and the runs' dense
	// indexes, the cell index, classes and timelines no longer in use.
	groupRuns      []int
	fpRuns         []string
	groupNums      []int
	fps            []string
	runDense       []int32
	cellIdx        []int32
	spareClasses   []*class
	spareTimelines []*timeline

	// ver counts the changes of the pools and timelines this cycle
	// (commitStart, commitReservation): a memo below holds while it stays.
	ver     uint64
	memoUse struct {
		cls      *class
		wall     int64
		ver      uint64
		own, bor int
	}
	memoEarliest struct {
		at  time.Time // Now + key
		cls *class
		n   int
		ver uint64
		tl  *timeline
		key int64
	}

	resv resvState // node reservations (nodereserve.go)

	out *Plan
}

// grow returns b with n zero elements, reusing its array when it can.
func grow[T any](b []T, n int) []T {
	if cap(b) < n || b == nil {
		return make([]T, n, n+n/8)
	}
	b = b[:n]
	clear(b)
	return b
}

// memoOff turns off the memos of neighbouring jobs' and ranks' results
// (scoreAll, explainBase, decide): the tests compare plans made with and
// without them.
var memoOff bool

// growNoClear returns b with n elements, reusing its array when it can,
// for a caller that writes every element.
func growNoClear[T any](b []T, n int) []T {
	if cap(b) < n || b == nil {
		return make([]T, n, n+n/8)
	}
	return b[:n]
}

// reset prepares s for a cycle over in, writing its plan to out. Every
// buffer of an earlier cycle is reused; everything else starts from zero.
func (s *state) reset(in *Input, out *Plan) {
	n := len(in.Nodes)
	old := *s
	alg := in.Algorithm
	if alg == "" {
		alg = model.AlgorithmFor(in.Type)
	}
	*s = state{
		in:        in,
		nodes:     in.Nodes,
		sensitive: alg == model.AlgorithmSensitive,
		fifo:      alg == model.AlgorithmFIFO,
		binpack:   alg == model.AlgorithmBinpack,
		headroom:  in.PowerHeadroomWatts,

		group:      grow(old.group, n),
		fp:         grow(old.fp, n),
		cell:       grow(old.cell, n),
		own:        grow(old.own, n),
		ready:      grow(old.ready, n),
		borrowable: grow(old.borrowable, n),
		held:       grow(old.held, n),
		idle0:      grow(old.idle0, n),
		taken:      grow(old.taken, n),
		avail:      grow(old.avail, n),
		firstRes:   grow(old.firstRes, n),
		delta:      grow(old.delta, n),
		classByKey: old.classByKey,
		quotas:     old.quotas,
		quotaBuf:   old.quotaBuf,
		cellGroup:  old.cellGroup[:0],
		cellFp:     old.cellFp[:0],
		groupCells: old.groupCells,
		classes:    old.classes[:0],
		timelines:  old.timelines[:0],
		protRanks:  old.protRanks[:0],
		jobs:       old.jobs,
		heldBy:     old.heldBy[:0],
		order:      old.order,
		keys:       old.keys,
		pos:        old.pos,
		ids:        old.ids,
		prevIDs:    old.prevIDs,
		prevRank:   old.prevRank,
		slot:       old.slot,
		mergeBuf:   old.mergeBuf,

		touched:  old.touched[:0],
		counts:   old.counts[:0],
		takes:    old.takes[:0],
		picker:   old.picker,
		chosen:   old.chosen[:0],
		tmp:      old.tmp[:0],
		keyBuf:   old.keyBuf[:0],
		names:    old.names[:0],
		freeG:    old.freeG,
		usableG:  old.usableG,
		byAvail:  old.byAvail[:0],
		avails:   old.avails[:0],
		bucket:   old.bucket,
		starts:   old.starts,
		resTaken: old.resTaken,
		stack:    old.stack[:0],

		groupRuns:      old.groupRuns,
		fpRuns:         old.fpRuns,
		groupNums:      old.groupNums[:0],
		fps:            old.fps[:0],
		runDense:       old.runDense,
		cellIdx:        old.cellIdx,
		spareClasses:   append(old.spareClasses, old.classes...),
		spareTimelines: append(old.spareTimelines, old.timelines...),
		resv:           old.resv,
	}
	clear(old.classes)
	clear(old.timelines)
	if s.classByKey == nil {
		s.classByKey = make(map[string]*class)
	}
	clear(s.classByKey)
	if s.quotas == nil {
		s.quotas = make(map[string]*quota)
	}
	clear(s.quotas)
	*out = Plan{
		Starts:       out.Starts[:0],
		Reservations: out.Reservations[:0],
		Explanations: out.Explanations[:0],
	}
	s.out = out

	for i, w := range in.Weights {
		if !math.IsNaN(w) {
			s.weights[i] = w
		}
	}
	if s.headroom < 0 {
		s.headroom = -1
	}

	// Node states and the release timeline's starting point, in one pass
	// over the nodes. Neighbouring nodes mostly share their group,
	// fingerprint and (running the same job) release time: the values are
	// collected once per run (group[i] and fp[i] hold the node's run for
	// now), and a release time is converted once per run.
	groupRuns, fpRuns := s.groupRuns[:0], s.fpRuns[:0]
	var lastFree time.Time
	var lastAvail int64
	power := s.headroom >= 0
	s.minGPUs = 0
	for i := range in.Nodes {
		nd := &in.Nodes[i]
		if i == 0 || nd.Group != in.Nodes[i-1].Group {
			groupRuns = append(groupRuns, nd.Group)
		}
		if i == 0 || nd.Fingerprint != in.Nodes[i-1].Fingerprint {
			fpRuns = append(fpRuns, nd.Fingerprint)
		}
		s.group[i], s.fp[i] = int32(len(groupRuns)-1), int32(len(fpRuns)-1)
		s.minGPUs = min(s.minGPUs, nd.GPUs)
		s.firstRes[i] = never
		s.avail[i] = never
		ready := nd.State == model.NodeReady
		idle := nd.Allocation == 0
		s.ready[i] = ready
		s.own[i] = nd.Own
		if power {
			s.delta[i] = max(0, int64(nd.BusyWatts)-int64(nd.IdleWatts))
		}
		held := nd.ReservedFor != 0 && in.Now.Before(nd.ReservedUntil)
		if held {
			// Held for one job until ReservedUntil: in no free pool, and in
			// the timeline no earlier than then. That job may start on it
			// (startHeld).
			s.heldBy = append(s.heldBy, heldNode{nd.ReservedFor, int32(i)})
			if nd.Own && idle {
				s.held[i] = true
				idle = false
			}
		}
		s.idle0[i] = idle
		switch {
		case nd.Own && ready && idle:
			s.avail[i] = 0
		case nd.Own && ready && !nd.FreeAt.IsZero():
			if nd.FreeAt != lastFree || lastFree.IsZero() {
				lastFree = nd.FreeAt
				lastAvail = max(0, int64(nd.FreeAt.Sub(in.Now)))
				if lastAvail >= never-1 {
					lastAvail = never
				}
			}
			s.avail[i] = lastAvail
		case !nd.Own && ready && idle && !s.sensitive && !held:
			s.borrowable[i] = true
			if !nd.LendUntil.IsZero() {
				lim := int64(nd.LendUntil.Sub(in.Now))
				if lim <= 0 {
					s.borrowable[i] = false // its home needs it now
				} else {
					s.firstRes[i] = lim
				}
			}
		}
		if held && nd.Own && ready {
			// No other job may start on it before ReservedUntil.
			u := min(int64(nd.ReservedUntil.Sub(in.Now)), never-1)
			if s.held[i] {
				s.avail[i] = u
			} else if s.avail[i] != never {
				s.avail[i] = max(s.avail[i], u)
			}
		}
	}
	s.applyNodeReservations()
	if len(s.heldBy) > 1 {
		slices.SortFunc(s.heldBy, func(a, b heldNode) int {
			if a.job != b.job {
				if a.job < b.job {
					return -1
				}
				return 1
			}
			return int(a.node - b.node)
		})
	}
	s.groupRuns, s.fpRuns = groupRuns, fpRuns

	// Dense group and fingerprint indexes, in sorted order of the values.
	groupNums := append(s.groupNums, groupRuns...)
	slices.Sort(groupNums)
	groupNums = slices.Compact(groupNums)
	fps := append(s.fps, fpRuns...)
	slices.Sort(fps)
	fps = slices.Compact(fps)
	s.groupNums, s.fps = groupNums, fps
	s.nGroups, s.nFps = len(groupNums), len(fps)
	s.groupsInSystem = in.Groups
	if s.groupsInSystem <= 0 {
		s.groupsInSystem = s.nGroups
	}
	runG := grow(s.runDense, len(groupRuns)+len(fpRuns))
	s.runDense = runG
	runG, runF := runG[:len(groupRuns)], runG[len(groupRuns):]
	for r, v := range groupRuns {
		k, _ := slices.BinarySearch(groupNums, v)
		runG[r] = int32(k)
	}
	for r, v := range fpRuns {
		k, _ := slices.BinarySearch(fps, v)
		runF[r] = int32(k)
	}
	// Cells: (dragonfly group, conformance group) pairs present, in that
	// order. With one conformance group, cell g is group g.
	if s.nFps == 1 {
		for i := range in.Nodes {
			g := runG[s.group[i]]
			s.group[i], s.fp[i], s.cell[i] = g, 0, g
		}
		for g := range s.nGroups {
			s.cellGroup = append(s.cellGroup, int32(g))
			s.cellFp = append(s.cellFp, 0)
		}
	} else {
		cellIdx := grow(s.cellIdx, s.nGroups*s.nFps)
		s.cellIdx = cellIdx
		for i := range cellIdx {
			cellIdx[i] = -1
		}
		for i := range in.Nodes {
			g, f := runG[s.group[i]], runF[s.fp[i]]
			s.group[i], s.fp[i] = g, f
			cellIdx[int(g)*s.nFps+int(f)] = 0
		}
		for g := 0; g < s.nGroups; g++ {
			for f := 0; f < s.nFps; f++ {
				if k := g*s.nFps + f; cellIdx[k] == 0 {
					cellIdx[k] = int32(len(s.cellGroup))
					s.cellGroup = append(s.cellGroup, int32(g))
					s.cellFp = append(s.cellFp, int32(f))
				}
			}
		}
		for i := range in.Nodes {
			s.cell[i] = cellIdx[int(s.group[i])*s.nFps+int(s.fp[i])]
		}
	}
	nCells := len(s.cellGroup)
	s.groupCells = grow(s.groupCells, s.nGroups+1)
	for ci, g := range s.cellGroup {
		s.groupCells[g+1] = int32(ci + 1)
	}
	s.gu = grow(old.gu, s.nGroups)
	s.quotaG = grow(old.quotaG, s.nGroups)
	s.levelCnt = grow(old.levelCnt, s.nGroups)
	s.cellUse = grow(old.cellUse, nCells)
}

// classFor returns the class of a job's constraints, creating it on first use.
func (s *state) classFor(j *Job) *class {
	if j.GPUType == "" && j.GPUsPerNode <= 0 && len(j.Constraints) == 0 && len(j.NodeList) == 0 && len(j.ExcludeNodes) == 0 && j.Reservation == "" {
		if s.plainCls == nil {
			s.plainCls = s.newClass("", 0, nil, nil, nil, 0)
		}
		return s.plainCls
	}
	cons := j.Constraints
	for i := 1; i < len(cons); i++ {
		if cons[i] <= cons[i-1] { // not sorted and unique: canonicalise a copy
			cons = slices.Compact(slices.Sorted(slices.Values(cons)))
			break
		}
	}
	b := s.keyBuf[:0]
	b = append(b, strings.ToLower(j.GPUType)...)
	b = append(b, 0)
	b = append(b, byte(j.GPUsPerNode), byte(j.GPUsPerNode>>8), byte(j.GPUsPerNode>>16), byte(j.GPUsPerNode>>24))
	for _, c := range cons {
		b = append(b, 0)
		b = append(b, c...)
	}
	// Node lists (-w, -x): their names, after markers no feature contains.
	for _, n := range j.NodeList {
		b = append(b, 1)
		b = append(b, n...)
	}
	for _, n := range j.ExcludeNodes {
		b = append(b, 2)
		b = append(b, n...)
	}
	var resv int32
	if j.Reservation != "" {
		// The reservation it runs in (an unknown one: no node at all).
		resv = s.resvIndex(j.Reservation)
		if resv == 0 {
			resv = -1
		}
		b = append(b, 3)
		b = append(b, j.Reservation...)
	}
	s.keyBuf = b
	if c, ok := s.classByKey[string(b)]; ok {
		return c
	}
	c := s.newClass(j.GPUType, j.GPUsPerNode, slices.Clone(cons), j.NodeList, j.ExcludeNodes, resv)
	s.classByKey[string(b)] = c
	return c
}

// newClass builds a class's counts and pools from the cycle-start state,
// reusing a class of an earlier cycle when there is one.
func (s *state) newClass(gpuType string, gpus int, cons []string, only, not []string, resv int32) *class {
	n := len(s.nodes)
	var c *class
	if k := len(s.spareClasses); k > 0 {
		c = s.spareClasses[k-1]
		s.spareClasses[k-1] = nil
		s.spareClasses = s.spareClasses[:k-1]
	} else {
		c = new(class)
	}
	*c = class{
		gpuType: gpuType, gpus: gpus, constraints: cons, only: only, not: not, resv: resv,
		elig:      grow(c.elig, n),
		eligAll:   grow(c.eligAll, s.nFps),
		eligReady: grow(c.eligReady, s.nFps),
		initFree:  grow(c.initFree, s.nFps),
		own:       growPools(c.own, len(s.cellGroup)),
		borrow:    growPools(c.borrow, len(s.cellGroup)),
		holes:     c.holes[:0],
		borrowLim: c.borrowLim[:0],
		freeCap:   capacity{prefix: c.freeCap.prefix[:0]},
		usableCap: capacity{prefix: c.usableCap.prefix[:0]},
		tlFp:      grow(c.tlFp, s.nFps),
	}
	if s.binpack {
		c.busyG = grow(c.busyG, s.nGroups)
	}
	freeG := grow(s.freeG, s.nGroups)
	usableG := grow(s.usableG, s.nGroups)
	s.freeG, s.usableG = freeG, usableG
	firstFp := int32(-1)
	// Without constraints every node passes (unless it has fewer than zero
	// GPUs): the node list need not be read.
	all := gpuType == "" && len(cons) == 0 && gpus <= s.minGPUs && len(only) == 0 && len(not) == 0 &&
		resv == 0 && !s.resv.anyActive
	ownHoles := false
	c.allElig = all
	for i := range s.nodes {
		x := int32(i)
		if !all && !c.passes(&s.nodes[i]) {
			c.outConstraint++
			continue
		}
		if s.sensitive && !s.own[i] { // never on another vCluster's nodes
			c.outOwnership++
			continue
		}
		if a := s.resv.at[i]; a != resv {
			if resv != 0 { // runs only on its active reservation's nodes
				c.outConstraint++
				continue
			}
			// Another reservation's node now: counted like a node that is
			// not Ready (it exists), with the reservation for the reason.
			c.eligAll[s.fp[i]]++
			c.outResv++
			if c.resvBlock == 0 {
				c.resvBlock = a
			}
			continue
		}
		c.elig[i] = true
		f, g, ci := s.fp[i], s.group[i], s.cell[i]
		if firstFp < 0 {
			firstFp = f
		} else if f != firstFp {
			c.multiFp = true
		}
		c.eligAll[f]++
		switch {
		case !s.ready[i]:
			c.outState++
		case s.own[i]:
			c.eligReady[f]++
			c.ownReady++
			usableG[g]++
			if s.idle0[i] {
				if fr := s.firstRes[i]; fr != never {
					// A node reservation starts at fr: a hole (nodereserve.go).
					c.own[ci].holes = append(c.own[ci].holes, hole{fr, x})
					c.holes = append(c.holes, fr)
					ownHoles = true
				} else {
					c.own[ci].free = append(c.own[ci].free, x)
					c.own[ci].n++
					c.ownFree++
				}
				c.initFree[f]++
				freeG[g]++
			} else if s.binpack {
				c.busyG[g]++
			}
		case s.borrowable[i]:
			c.eligReady[f]++
			if lim := s.firstRes[i]; lim != never {
				// Lent only until its home needs it: usable by jobs that
				// end by then, like an own node's hole.
				c.borrow[ci].holes = append(c.borrow[ci].holes, hole{lim, x})
				c.borrowLim = append(c.borrowLim, lim)
			} else {
				c.borrow[ci].free = append(c.borrow[ci].free, x)
				c.borrow[ci].n++
				c.borrowFree++
			}
			c.initBorrow++
			c.initFree[f]++
			freeG[g]++
			usableG[g]++
		default:
			c.outOwnership++
		}
	}
	if ownHoles {
		slices.Sort(c.holes)
		for ci := range c.own {
			slices.SortFunc(c.own[ci].holes, cmpHole)
		}
	}
	if len(c.borrowLim) > 0 {
		slices.Sort(c.borrowLim)
		for ci := range c.borrow {
			slices.SortFunc(c.borrow[ci].holes, cmpHole)
		}
	}
	c.largestConf = largestFp(c.eligReady)
	if s.sensitive { // one conformance group must hold a job
		c.staticAll, c.staticReady, c.staticFree = largestFp(c.eligAll), largestFp(c.eligReady), largestFp(c.initFree)
	} else {
		c.staticAll, c.staticReady, c.staticFree = sum(c.eligAll), sum(c.eligReady), sum(c.initFree)
	}
	c.freeCap.set(freeG)
	c.usableCap.set(usableG)
	s.classes = append(s.classes, c)
	return c
}

// growPools returns p with n empty pools, reusing their arrays.
func growPools(p []pool, n int) []pool {
	if cap(p) < n {
		p = append(p[:cap(p)], make([]pool, n-cap(p))...)
	}
	p = p[:n]
	for i := range p {
		p[i] = pool{free: p[i].free[:0], holes: p[i].holes[:0]}
	}
	return p
}

// scoreAll computes every job's factors and score and sorts the queue.
func (s *state) scoreAll() {
	in := s.in
	s.jobs = growNoClear(s.jobs, len(in.Pending)) // every job is written whole below
	s.quotaBuf = grow(s.quotaBuf, len(in.Pending))[:0]
	// f6: queued node-hours against the node-hours running work still holds.
	queued, fresh := s.placeJobs()
	var running float64
	for _, r := range in.Running {
		if rem := r.End.Sub(in.Now); rem > 0 && r.Nodes > 0 {
			running += float64(r.Nodes) * rem.Hours()
		}
	}
	backlog := fBacklog(queued, running)
	energy := fEnergy(in.EnergyPrice)
	var shift *Energy
	if e := in.Energy; e != nil && e.Prices != nil {
		if !(in.EnergyPrice >= 0) {
			energy = fEnergy(e.Prices.Normalized(in.Now))
		}
		if power.ShiftsType(in.Type) && !s.sensitive {
			shift = e
		}
	}

	var m struct { // the last job's inputs and results (see below)
		elig   time.Time
		waitNs int64
		f3, f8 float64
		wait   int64
		length time.Duration
		f1     float64
		tenant string
		q      *quota
		cls    *class
		min    int
	}
	for i := range in.Pending {
		j := &in.Pending[i]
		jb := &s.jobs[s.pos[i]]
		*jb = job{j: j, id: j.ID, class: j.PriorityClass, ownOnly: j.OwnNodesOnly, protFlag: j.Protected,
			in: int32(i), cls: s.classFor(j)}
		jb.min = max(1, j.NodesMin)
		jb.max = max(jb.min, j.NodesMax)
		// Starts and reservations are planned with the walltime, the
		// guaranteed bound, so that no backfilled job that runs past its
		// prediction delays a reservation; the prediction orders the queue
		// (f2). Running work's release times are predicted by the caller.
		jb.wall = int64(jobWall(j))
		length := jobLength(j)
		if in.PredictedStarts {
			jb.wall = int64(length)
		}
		if s.fifo {
			length = -1
		}
		elig := j.EligibleTime
		if elig.IsZero() {
			elig = j.SubmitTime
		}
		if !elig.IsZero() {
			if i == 0 || memoOff || elig != m.elig { // an array's tasks share it
				m.elig, m.waitNs = elig, int64(in.Now.Sub(elig))
			}
			jb.wait = m.waitNs
		}
		jb.hold = j.Hold
		if jb.hold == "" && j.Reservation != "" {
			jb.hold = s.resvHold(j)
		}
		if shift != nil && jb.hold == "" && shift.Shift.Flexible(j.PriorityClass, j.Checkpoint) &&
			shift.Shift.Defer(shift.Prices, in.Now, elig, jobWall(j)) {
			jb.hold = model.ReasonEnergyPrice
		}
		f := &jb.f
		f[0] = fPriority(j.PriorityClass)
		// Neighbouring jobs (an array's tasks, one user's submissions)
		// mostly share their wait, length, tenant and shape: the pure
		// functions below are evaluated again only when an input differs
		// from the last job's (the same inputs give the same bits).
		if i == 0 || memoOff || jb.wait != m.wait || length != m.length {
			m.wait, m.length = jb.wait, length
			m.f1 = fWait(time.Duration(jb.wait), length)
		}
		f[1] = m.f1
		if i == 0 || memoOff || j.Tenant != m.tenant {
			m.tenant, m.q = j.Tenant, s.quotaOf(j.Tenant)
		}
		jb.q = m.q
		f[2] = jb.q.fairShare
		if jb.q.svc {
			// The per-job fair share of service: by the slowdown this
			// job's wait has reached, with its expected length.
			if b := predict.PendingBehind(in.ServiceAverage, jb.q.svcMean, jb.q.svcWeight,
				time.Duration(jb.wait), jobLength(j)); b > f[2] {
				f[2] = min(1, b)
			}
		}
		if i == 0 || memoOff || jb.cls != m.cls || jb.min != m.min {
			m.cls, m.min = jb.cls, jb.min
			k := jb.cls.freeCap.GroupsNeeded(jb.min)
			if k < 0 {
				k = jb.cls.usableCap.GroupsNeeded(jb.min)
			}
			m.f3, m.f8 = fTopology(k, s.groupsInSystem), fConformance(jb.cls.largestConf, jb.min)
		}
		f[3] = m.f3
		f[4] = fDataReady(j.HotDataFraction)
		f[5] = backlog
		f[6] = energy
		f[7] = fCheckpoint(j.Checkpoint, j.CheckpointMinutes)
		f[8] = m.f8
		jb.score = score(&s.weights, f)
	}
	// Sort compact keys rather than the jobs: fewer cache misses. The
	// jobs are in the last cycle's order (placeJobs), so the keys start
	// nearly sorted, and the passes that follow walk the jobs nearly in
	// order.
	keys := grow(s.keys, len(s.jobs))
	s.keys = keys
	for k := range s.jobs {
		jb := &s.jobs[k]
		keys[k] = sortKey{jb.score, jb.wait, jb.id, jb.in, int32(k)}
	}
	s.sortKeys(keys, fresh)
	keys = s.keys
	s.order = grow(s.order, len(keys))
	s.prevRank = grow(s.prevRank, len(keys))
	for rank, k := range keys {
		s.order[rank] = k.at
		s.prevRank[k.idx] = int32(rank)
	}
	s.prevIDs, s.ids = s.ids, s.prevIDs
}

// cmpKeys is the score order: score descending, then the longest wait,
// then the lowest id (then the input's order, for equal ids). It is a total
// order, so the sorted keys do not depend on the order they start in.
func cmpKeys(a, b sortKey) int {
	switch {
	case a.score != b.score:
		if a.score > b.score {
			return -1
		}
		return 1
	case a.wait != b.wait:
		if a.wait > b.wait {
			return -1
		}
		return 1
	case a.id != b.id:
		if a.id < b.id {
			return -1
		}
		return 1
	}
	return int(a.idx - b.idx)
}

// placeJobs decides where each pending job goes in s.jobs (s.pos, by
// input index) and returns the queued node-hours (f6) and how many jobs
// the last cycle did not rank. The jobs the last cycle ranked go in its
// order, the others after them in input order; so the sort keys start
// nearly sorted (between two cycles each job moves a few places) and the
// passes over the ranked jobs read memory nearly in order. Jobs are
// matched to the last cycle's by id, in one merge of the two inputs when
// both list their ids in increasing order (the vCluster loop's and the
// replay's do); otherwise they stay in input order. Where a job is kept
// changes nothing but speed: the score order (cmpKeys) is total.
func (s *state) placeJobs() (queued float64, fresh int) {
	pending := s.in.Pending
	n := len(pending)
	pos := growNoClear(s.pos, n)
	s.pos = pos
	ids := growNoClear(s.ids, n)
	s.ids = ids
	prevIDs, prevRank := s.prevIDs, s.prevRank
	seeded := len(prevIDs) > 0 && len(prevRank) == len(prevIDs)
	var slot []int32
	if seeded {
		slot = grow(s.slot, len(prevIDs))
		s.slot = slot
		for r := range slot {
			slot[r] = -1
		}
	}
	p := 0
	for i := range pending {
		j := &pending[i]
		queued += float64(max(1, j.NodesMin)) * jobLength(j).Hours()
		id := j.ID
		ids[i] = id
		pos[i] = -1
		if !seeded {
			continue
		}
		if i > 0 && id <= ids[i-1] {
			seeded = false // not in increasing id order
			continue
		}
		for p < len(prevIDs) && prevIDs[p] < id {
			p++
		}
		if p < len(prevIDs) && prevIDs[p] == id {
			slot[prevRank[p]] = int32(i)
			p++
		}
	}
	if !seeded {
		for i := range pos {
			pos[i] = int32(i)
		}
		return queued, n
	}
	k := int32(0)
	for _, i := range slot {
		if i >= 0 {
			pos[i] = k
			k++
		}
	}
	ranked := int(k)
	for i := range pos {
		if pos[i] < 0 {
			pos[i] = k
			k++
		}
	}
	return queued, n - ranked
}

// sortKeys sorts s.keys (keys) in the score order. The last fresh keys
// are jobs the last cycle did not rank; the others are in its order. When
// they are nearly in order (each key a few places from its rank, as
// between two cycles), an insertion sort bounded to a few moves per key
// finishes them, the fresh ones are sorted apart and merged in: O(n) in
// all. Otherwise (or when the bound is hit, leaving the keys permuted)
// every key is sorted with pdqsort. Either way the result is the one
// total order of cmpKeys.
func (s *state) sortKeys(keys []sortKey, fresh int) {
	body := keys[:len(keys)-fresh]
	if fresh == len(keys) || !insertionSortBounded(body, 8*len(body)) {
		slices.SortFunc(keys, cmpKeys)
		return
	}
	if fresh == 0 {
		return
	}
	tail := keys[len(body):]
	slices.SortFunc(tail, cmpKeys)
	out := grow(s.mergeBuf, len(keys))[:0]
	i, j := 0, 0
	for i < len(body) && j < len(tail) {
		if cmpKeys(tail[j], body[i]) < 0 {
			out = append(out, tail[j])
			j++
		} else {
			out = append(out, body[i])
			i++
		}
	}
	out = append(out, body[i:]...)
	out = append(out, tail[j:]...)
	s.mergeBuf, s.keys = keys, out
}

// insertionSortBounded sorts k by cmpKeys with an insertion sort unless
// that takes more than budget moves; it reports whether it finished (if
// not, k is a permutation of what it was).
func insertionSortBounded(k []sortKey, budget int) bool {
	for i := 1; i < len(k); i++ {
		if cmpKeys(k[i], k[i-1]) >= 0 {
			continue
		}
		x := k[i]
		j := i
		for j > 0 && cmpKeys(x, k[j-1]) < 0 {
			k[j] = k[j-1]
			j--
		}
		k[j] = x
		budget -= i - j
		if budget < 0 {
			return false
		}
	}
	return true
}

// sortKey is a job's place in the score order.
type sortKey struct {
	score float64
	wait  int64
	id    uint64
	idx   int32 // index in Input.Pending (the last tie-break)
	at    int32 // index in state.jobs
}

// jobWall is a job's walltime; a missing one counts as the longest allowed.
func jobWall(j *Job) time.Duration {
	if j.Walltime <= 0 {
		return model.MaxWalltime
	}
	return j.Walltime
}

// jobLength is what the plan assumes a job runs: its prediction when it is
// shorter than its walltime.
func jobLength(j *Job) time.Duration {
	w := jobWall(j)
	if j.Predicted > 0 && j.Predicted < w {
		return j.Predicted
	}
	return w
}

func (s *state) quotaOf(tenant string) *quota {
	if q, ok := s.quotas[tenant]; ok {
		return q
	}
	s.quotaBuf = append(s.quotaBuf, quota{nodes: -1, running: -1, fairShare: NeutralFairShare})
	q := &s.quotaBuf[len(s.quotaBuf)-1]
	if t, ok := s.in.Tenants[tenant]; ok {
		q.nodes, q.running = max(-1, t.NodesLeft), max(-1, t.RunningLeft)
		q.fairShare = fFairShare(t.FairShareTarget, t.UsageShare)
		if t.FairShareTarget > 0 && t.ServiceBehind > q.fairShare {
			q.fairShare = min(1, t.ServiceBehind)
		}
		if t.FairShareTarget > 0 && s.in.ServiceAverage > 0 {
			q.svc, q.svcMean, q.svcWeight = true, t.ServiceMean, t.ServiceWeight
		}
	}
	s.quotas[tenant] = q
	return q
}

// plan walks the sorted queue and decides every job.
//
// With reservations on (depth != 0) one job is decided before the others:
// the head — the longest-waiting job of the highest priority class that
// could run here. It starts now if it can; otherwise its reservation is
// made first and binds every other job, higher-scored ones included. That
// is EASY's guarantee: the head's reservation never moves later from one
// cycle to the next, so no job starves however the scores rank it, while
// the score order still decides everything else (who starts, who
// backfills, who gets the remaining depth-1 reservations). Without it, a
// job whose factors rank it low (a large job on a fragmented machine, a
// tenant over its share) could be overtaken by newer jobs cycle after
// cycle and run only when the queue drains.
func (s *state) plan() {
	// Not cleared: explainBase writes the whole explanation of every rank.
	s.out.Explanations = growNoClear(s.out.Explanations, len(s.order))
	s.buildTimelines()
	s.depth = s.in.ReservationDepth
	want := s.depth + 1
	if s.depth < 0 || s.depth > len(s.order) {
		want = len(s.order)
	}
	if s.out.Reservations == nil || cap(s.out.Reservations) < want {
		s.out.Reservations = make([]Reservation, 0, want)
	}
	pre := s.startHeld()
	if s.fifo {
		s.planFIFO(pre)
		return
	}
	head := -1
	if s.depth != 0 {
		head = s.headRank()
	}
	if head >= 0 && !s.in.ProtectedFirst {
		s.decide(head)
	}
	if s.depth != 0 {
		s.decideProtected(head, pre)
	}
	if head >= 0 && s.in.ProtectedFirst {
		s.decide(head)
	}
	for rank := range s.order {
		jb := &s.jobs[s.order[rank]]
		if rank != head && !(pre && jb.pre) && !jb.prot {
			s.decide(rank)
		}
	}
}

// decideProtected decides the protected jobs (Job.Protected) other than the
// head, in eligible order (longest wait first, then lowest id), each with a
// reservation whatever the depth: the starvation guard's bound on every
// job's wait, where the head rule bounds only the head's.
func (s *state) decideProtected(head int, pre bool) {
	s.protRanks = s.protRanks[:0]
	for rank, ji := range s.order {
		jb := &s.jobs[ji]
		if jb.protFlag && rank != head && !(pre && jb.pre) {
			s.protRanks = append(s.protRanks, rank)
		}
	}
	if len(s.protRanks) == 0 {
		return
	}
	slices.SortFunc(s.protRanks, func(a, b int) int {
		ja, jb := &s.jobs[s.order[a]], &s.jobs[s.order[b]]
		switch {
		case ja.wait != jb.wait:
			if ja.wait > jb.wait {
				return -1
			}
			return 1
		case ja.id < jb.id:
			return -1
		case ja.id > jb.id:
			return 1
		}
		return 0
	})
	for _, rank := range s.protRanks {
		jb := &s.jobs[s.order[rank]]
		jb.prot = true
		s.force = true
		s.decide(rank)
		s.force = false
	}
}

// planFIFO decides the jobs in strict score order: once a job that could
// run here (staticReason is empty) cannot start now, no job after it starts
// this cycle. The blocked job is decided as usual (its reason, expected
// start and reservation); the jobs behind it are explained with their own
// static reason or Priority, and an expected start no earlier than its.
func (s *state) planFIFO(pre bool) {
	blocked := false
	var blockedAt time.Time
	for rank := range s.order {
		jb := &s.jobs[s.order[rank]]
		if pre && jb.pre {
			continue
		}
		if !blocked {
			s.decide(rank)
			if ex := &s.out.Explanations[rank]; ex.Reason != "" && s.staticReason(jb) == "" {
				blocked, blockedAt = true, ex.ExpectedStart
			}
			continue
		}
		ex := s.explainBase(rank, jb)
		if r := s.staticReason(jb); r != "" {
			ex.Reason = r
			continue
		}
		ex.Reason = model.ReasonPriority
		if blockedAt.IsZero() {
			continue
		}
		if tl, key := s.earliest(jb.cls, jb.min); tl != nil {
			ex.ExpectedStart = s.in.Now.Add(time.Duration(key))
			if ex.ExpectedStart.Before(blockedAt) {
				ex.ExpectedStart = blockedAt
			}
		}
	}
}

// startHeld is the pass before all others: a job for which nodes are held
// (Node.ReservedFor: a reclaim or a preemption freed them for it) starts on
// them, in score order, as soon as every node held for it is idle and Ready
// and they hold at least NodesMin — if nothing else (hold, quota, power)
// keeps it. It reports whether any job started.
func (s *state) startHeld() bool {
	if len(s.heldBy) == 0 {
		return false
	}
	started := false
	for rank, ji := range s.order {
		jb := &s.jobs[ji]
		id := jb.id
		i, _ := slices.BinarySearchFunc(s.heldBy, id, func(h heldNode, id uint64) int {
			switch {
			case h.job < id:
				return -1
			case h.job > id:
				return 1
			}
			return 0
		})
		if i == len(s.heldBy) || s.heldBy[i].job != id || s.staticReason(jb) != "" {
			continue
		}
		s.chosen = s.chosen[:0]
		ok := true
		for ; i < len(s.heldBy) && s.heldBy[i].job == id; i++ {
			x := s.heldBy[i].node
			if !s.held[x] || !s.ready[x] || !jb.cls.elig[x] {
				ok = false // still busy (its work is being checkpointed), or unfit
				break
			}
			s.chosen = append(s.chosen, x)
		}
		q := jb.q
		limit := jb.max
		if q.nodes >= 0 {
			limit = min(limit, q.nodes)
		}
		if !ok || len(s.chosen) < jb.min || limit < jb.min {
			continue
		}
		s.chosen = s.chosen[:min(len(s.chosen), limit)]
		if s.headroom >= 0 {
			var d int64
			for _, x := range s.chosen {
				d += s.delta[x]
			}
			if d > s.headroom {
				continue
			}
		}
		ex := s.explainBase(rank, jb)
		s.commitJobStart(jb, ex, 0)
		jb.pre, started = true, true
	}
	return started
}

// headRank returns the rank of the longest-waiting job (earliest eligible,
// then lowest id) among those of the highest priority class that are not
// held and could run here (constraints satisfiable, enough nodes not
// drained, quota room), or -1.
func (s *state) headRank() int {
	head := -1
	var hj *job
	for rank, ji := range s.order {
		jb := &s.jobs[ji]
		if jb.pre || !s.runnable(jb) {
			continue
		}
		if hj != nil {
			pa, pb := clampClass(jb.class), clampClass(hj.class)
			switch {
			case pa != pb:
				if pa < pb {
					continue
				}
			case jb.wait != hj.wait:
				if jb.wait < hj.wait {
					continue
				}
			case jb.id > hj.id:
				continue
			}
		}
		head, hj = rank, jb
	}
	return head
}

func clampClass(c int) int { return max(0, min(model.MaxPriorityClass, c)) }

// runnable reports whether a job could start here at all this cycle: not
// held, its constraints satisfiable, enough of those nodes not drained or
// down, and room under its tenant's quotas.
func (s *state) runnable(jb *job) bool {
	return s.staticReason(jb) == ""
}

// staticReason is the reason a job cannot start this cycle whatever the
// other jobs do, or "".
func (s *state) staticReason(jb *job) string {
	c, q := jb.cls, jb.q
	switch {
	case jb.hold != "":
		return jb.hold
	case c.staticAll < jb.min:
		return model.ReasonBadConstraints
	case c.staticReady < jb.min && c.staticReady+c.outResv >= jb.min:
		return s.resvReason(c.resvBlock)
	case c.staticReady < jb.min:
		return model.ReasonNodesDrained
	case q.running == 0:
		return model.ReasonQuotaMaxRunning
	case q.nodes >= 0 && q.nodes < jb.min:
		return model.ReasonQuotaMaxNodes
	}
	return ""
}

// explainBase fills the explanation of the job at rank with what does not
// depend on the decision: rank, score, factors, weights and the filter
// counts at cycle start, and the nodes that are busy or reserved for it now.
func (s *state) explainBase(rank int, jb *job) *Explanation {
	c := jb.cls
	ex := &s.out.Explanations[rank]
	// Every field: the explanations are not cleared before the cycle
	// (each rank is explained exactly once).
	*ex = Explanation{JobID: jb.id, Position: rank + 1, Score: jb.score, Factors: jb.f, Weights: s.weights,
		Filtered: FilterCounts{
			Constraint: c.outConstraint,
			State:      c.outState,
			Ownership:  c.outOwnership,
		}}
	// Neighbouring ranks mostly share a class and a walltime: the counts
	// are looked up again only when one of them, or the pools (ver), moved.
	m := &s.memoUse
	if memoOff || c != m.cls || jb.wall != m.wall || s.ver != m.ver {
		m.cls, m.wall, m.ver = c, jb.wall, s.ver
		m.own, m.bor = c.usableOwn(jb.wall), c.usableBorrow(jb.wall)
	}
	bor, initBorrow := m.bor, c.initBorrow
	if jb.ownOnly {
		ex.Filtered.Ownership += initBorrow
		bor, initBorrow = 0, 0
	}
	ex.Filtered.Busy = c.ownReady + initBorrow - m.own - bor
	return ex
}

// commitJobStart records the start of jb on s.chosen (nBorrow of them
// borrowed): the plan's Start, the nodes, power headroom and quota room.
func (s *state) commitJobStart(jb *job, ex *Explanation, nBorrow int) {
	st := Start{JobID: jb.id, Backfilled: s.waiting, Score: jb.score, Position: ex.Position}
	slices.Sort(s.chosen)
	st.Nodes = s.nameList(s.chosen)
	if nBorrow > 0 {
		s.tmp = s.tmp[:0]
		for _, x := range s.chosen {
			if !s.own[x] {
				s.tmp = append(s.tmp, x)
			}
		}
		st.Borrowed = s.nameList(s.tmp)
	}
	s.commitStart(s.chosen, jb.wall)
	if s.headroom >= 0 {
		for _, x := range s.chosen {
			s.headroom -= s.delta[x]
		}
	}
	q := jb.q
	if q.nodes >= 0 {
		q.nodes -= len(s.chosen)
	}
	if q.running > 0 {
		q.running--
	}
	s.out.Starts = append(s.out.Starts, st)
	ex.ExpectedStart = s.in.Now
	ex.Nodes = st.Nodes
}

// decide decides the job at rank: start it now, reserve for it, or say why
// it waits.
func (s *state) decide(rank int) {
	in := s.in
	jb := &s.jobs[s.order[rank]]
	j, c := jb.j, jb.cls
	ex := s.explainBase(rank, jb)
	e := jb.wall
	usable := c.ownReady + c.initBorrow - ex.Filtered.Busy
	if j.OwnNodesOnly {
		usable = c.ownReady - ex.Filtered.Busy
	}
	if r := s.staticReason(jb); r != "" {
		ex.Reason = r
		return
	}

	q := jb.q
	switch res, nBorrow := s.tryStart(jb, q); res {
	case startOK:
		s.commitJobStart(jb, ex, nBorrow)
		return
	case startPower:
		ex.Reason = model.ReasonPowerBudget
		ex.Filtered.Power = usable // every usable node is held back by power
		return
	}

	// It waits for nodes.
	s.waiting = true
	ex.Reason = model.ReasonResources
	free := c.staticFree
	if j.OwnNodesOnly {
		free -= c.initBorrow
	}
	if free >= jb.min {
		ex.Reason = model.ReasonPriority
	}
	s.resvBlocks(jb, ex, e)
	me := &s.memoEarliest
	if memoOff || c != me.cls || jb.min != me.n || s.ver != me.ver {
		me.cls, me.n, me.ver = c, jb.min, s.ver
		me.tl, me.key = s.earliest(c, jb.min)
		me.at = in.Now.Add(time.Duration(me.key))
	}
	tl, key := me.tl, me.key
	if tl == nil {
		return // its own nodes can never hold it: no reservation
	}
	ex.ExpectedStart = me.at
	if !s.force && (s.depth == 0 || (s.depth > 0 && s.reserved >= s.depth)) {
		return
	}
	if !s.force {
		s.reserved++
	}
	s.reserve(tl, key, jb.min, e)
	r := Reservation{JobID: j.ID, Start: ex.ExpectedStart}
	if !in.OmitReservationNodes {
		r.Nodes = s.nameList(s.chosen)
	}
	s.out.Reservations = append(s.out.Reservations, r)
	ex.Nodes = r.Nodes
}

func sum(v []int) int {
	t := 0
	for _, x := range v {
		t += x
	}
	return t
}

// nameList returns the names of nodes xs, carved from a shared arena.
func (s *state) nameList(xs []int32) []string {
	if len(xs) == 0 {
		return nil
	}
	if cap(s.names)-len(s.names) < len(xs) {
		s.names = make([]string, 0, max(4096, len(xs)))
	}
	start := len(s.names)
	for _, x := range xs {
		s.names = append(s.names, s.nodes[x].Name)
	}
	return s.names[start:len(s.names):len(s.names)]
}
