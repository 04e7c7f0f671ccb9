package replay

import "time"

// IdleMetrics splits the idle node-time of a replay (capacity × makespan −
// work) by why the nodes were idle, each as a share of capacity ×
// makespan: NoFit + Held + Empty = 1 − utilization. An idle node is
// classified by the queues of the vClusters that may start work on it (its
// own, and those that may borrow it), after each decision.
type IdleMetrics struct {
	// NoFit: work was queued, but no queued job fitted the idle nodes its
	// vCluster could use (the machine was fragmented, or the queue held
	// only jobs wider than the idle nodes).
	NoFit float64 `json:"no_fit"`
	// Held: a queued job fitted the idle nodes by size, but the policy kept
	// it waiting: starting it would have delayed a reservation (it ran too
	// long for the hole), or the decision cycle, the power budget or the
	// energy rule held it.
	Held float64 `json:"held"`
	// Empty: nothing was queued that could use the idle nodes.
	Empty float64 `json:"empty"`
}

// Idle node classes, the index of idleAcc.rate and idleAcc.sum.
const (
	idleNoFit = iota
	idleHeld
	idleEmpty
	idleClasses
)

// idleAcc integrates the idle nodes of each class over virtual time: rate
// holds the idle nodes per class since the last event, sum the node-seconds
// so far.
type idleAcc struct {
	at   time.Duration
	rate [idleClasses]int
	sum  [idleClasses]float64
}

// advance adds the node-time from the last event to now.
func (a *idleAcc) advance(now time.Duration) {
	if dt := (now - a.at).Seconds(); dt > 0 {
		for c, r := range a.rate {
			a.sum[c] += dt * float64(r)
		}
	}
	a.at = now
}

// classifyIdle sets the idle classes' rates from the pools' idle nodes and
// queues, after the decisions at s.now.
func (s *sim) classifyIdle() {
	a := &s.idle
	a.rate = [idleClasses]int{}
	for h := range s.pools {
		free := s.pools[h].free
		if free == 0 {
			continue
		}
		c := idleEmpty
		for _, q := range s.idleUsers[h] {
			pl := &s.pools[q]
			if len(pl.queue) == 0 {
				continue
			}
			if pl.minSize <= s.usableFree(int(q)) {
				c = idleHeld
				break
			}
			c = idleNoFit
		}
		a.rate[c] += free
	}
}

// idleMetrics divides the idle node-time by capacity × makespan.
func (s *sim) idleMetrics(makespan float64) IdleMetrics {
	d := float64(s.tr.Capacity) * makespan
	if d <= 0 {
		return IdleMetrics{}
	}
	return IdleMetrics{NoFit: s.idle.sum[idleNoFit] / d, Held: s.idle.sum[idleHeld] / d, Empty: s.idle.sum[idleEmpty] / d}
}

// setIdleUsers lists, for each pool, the pools that may start work on its
// idle nodes: itself first, then those that borrow from it.
func (s *sim) setIdleUsers() {
	s.idleUsers = make([][]int32, len(s.pools))
	for h := range s.pools {
		s.idleUsers[h] = append(s.idleUsers[h], int32(h))
	}
	for q := range s.pools {
		for _, h := range s.pools[q].lenders {
			s.idleUsers[h] = append(s.idleUsers[h], int32(q))
		}
	}
}
