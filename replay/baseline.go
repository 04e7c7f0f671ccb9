package replay

import (
	"slices"
	"time"
)

// The baselines queue jobs in (submit, id) order and place each job on the
// lowest-numbered free nodes of its vCluster. They plan with estimates
// (walltimes), never with the real runtimes.

// fcfs starts jobs strictly in queue order: the head waits until it fits and
// nothing behind it may pass.
type fcfs struct{}

func (fcfs) schedule(s *sim, p int) error {
	pl := &s.pools[p]
	for _, j := range pl.queue {
		if s.tr.Jobs[j].Size > pl.free {
			break
		}
		s.start(int(j), nil)
	}
	return nil
}

// easy is FCFS with EASY backfilling: the blocked head gets one reservation
// (the shadow time at which enough running jobs will have ended, by their
// estimates); a later job may start now if it fits and either ends, by its
// estimate, no later than the shadow time, or uses only the "extra" nodes
// the head will not need at the shadow time.
type easy struct {
	ends []int32 // scratch: running jobs by estimated end
}

func (e *easy) schedule(s *sim, p int) error {
	pl := &s.pools[p]
	q := pl.queue
	i := startFitting(s, pl, q)
	if i >= len(q) {
		return nil
	}
	shadow, extra := e.shadow(s, pl, s.tr.Jobs[q[i]].Size)
	backfillPass(s, pl, q[i+1:], shadow, extra, func(j int32) time.Duration { return s.tr.Jobs[j].Estimate })
	return nil
}

// startFitting starts q's jobs in order while they fit the free nodes and
// returns the index of the first that does not (the blocked head; len(q)
// when every job started).
func startFitting(s *sim, pl *pool, q []int32) int {
	i := 0
	for ; i < len(q) && s.tr.Jobs[q[i]].Size <= pl.free; i++ {
		s.start(int(q[i]), nil)
	}
	return i
}

// backfillPass is EASY's backfill test over cands, in their order: a job
// that fits the free nodes starts if it ends, by length, no later than the
// head's shadow time, or if it fits in the extra nodes the head will not
// need then.
func backfillPass(s *sim, pl *pool, cands []int32, shadow time.Duration, extra int, length func(int32) time.Duration) {
	for _, j := range cands {
		job := &s.tr.Jobs[j]
		if job.Size > pl.free {
			continue
		}
		switch {
		case s.now+length(j) <= shadow:
			s.start(int(j), nil)
		case job.Size <= extra:
			extra -= job.Size
			s.start(int(j), nil)
		}
		if pl.free == 0 {
			break
		}
	}
}

// shadow returns when the head (needing size nodes) can start by the running
// jobs' estimates, and how many nodes will be spare then.
func (e *easy) shadow(s *sim, pl *pool, size int) (time.Duration, int) {
	e.ends = append(e.ends[:0], pl.running...)
	return shadowTime(s, pl.free, size, e.ends, s.estEnd)
}

// shadowTime sorts running (scratch) by end and returns the first end at
// which free plus the nodes released by then hold size, and the nodes spare
// at that time: every job ending at the shadow time counts, not only those
// needed to reach size (the reference implementation's extra nodes).
func shadowTime(s *sim, free, size int, running []int32, end func(int32) time.Duration) (time.Duration, int) {
	slices.SortFunc(running, func(a, b int32) int {
		ea, eb := end(a), end(b)
		if ea != eb {
			if ea < eb {
				return -1
			}
			return 1
		}
		return int(a - b)
	})
	avail := free
	for k, r := range running {
		avail += s.tr.Jobs[r].Size
		if avail < size {
			continue
		}
		t := end(r)
		for _, q := range running[k+1:] {
			if end(q) != t {
				break
			}
			avail += s.tr.Jobs[q].Size
		}
		return t, avail - size
	}
	// Unreachable for a job that fits the vCluster; never backfill by time.
	return s.now, 0
}

// conservative gives every queued job, in queue order, a reservation at the
// earliest time it fits in the availability profile (running jobs by their
// estimates plus the reservations made before it); those whose reservation
// is now start now. The schedule is rebuilt at every decision, so early
// completions move reservations forward.
type conservative struct {
	prof profile
}

func (c *conservative) schedule(s *sim, p int) error {
	pl := &s.pools[p]
	c.prof.reset(s.now, pl.free)
	for _, r := range pl.running {
		c.prof.release(s.estEnd(r), s.tr.Jobs[r].Size)
	}
	for _, j := range pl.queue {
		job := &s.tr.Jobs[j]
		at := c.prof.earliest(job.Size, job.Estimate)
		c.prof.reserve(at, job.Estimate, job.Size)
		if at == s.now {
			s.start(int(j), nil)
		}
	}
	return nil
}

// profile is a step function of free nodes over time: free[k] nodes are free
// from times[k] until times[k+1] (the last step lasts forever).
type profile struct {
	times []time.Duration
	free  []int
}

func (p *profile) reset(now time.Duration, free int) {
	p.times = append(p.times[:0], now)
	p.free = append(p.free[:0], free)
}

// release adds size nodes from time t on (a running job's estimated end).
func (p *profile) release(t time.Duration, size int) {
	k := p.split(t)
	for ; k < len(p.free); k++ {
		p.free[k] += size
	}
}

// split makes t a step boundary and returns its index.
func (p *profile) split(t time.Duration) int {
	k, found := slices.BinarySearch(p.times, t)
	if found {
		return k
	}
	// t > times[0] always: the profile starts now.
	p.times = slices.Insert(p.times, k, t)
	p.free = slices.Insert(p.free, k, p.free[k-1])
	return k
}

// earliest is the first step start at which size nodes stay free for d.
func (p *profile) earliest(size int, d time.Duration) time.Duration {
	k := 0
	for k < len(p.times) {
		if p.free[k] < size {
			k++
			continue
		}
		end := p.times[k] + d
		ok := true
		for m := k + 1; m < len(p.times) && p.times[m] < end; m++ {
			if p.free[m] < size {
				ok = false
				k = m + 1
				break
			}
		}
		if ok {
			return p.times[k]
		}
	}
	// The last step has the whole vCluster free; a job larger than that never
	// reaches here (the simulator rejects it up front).
	return p.times[len(p.times)-1]
}

// reserve takes size nodes during [at, at+d).
func (p *profile) reserve(at, d time.Duration, size int) {
	if d <= 0 {
		return
	}
	k := p.split(at)
	e := p.split(at + d)
	for ; k < e; k++ {
		p.free[k] -= size
	}
}
