package solver

import (
	"slices"

	"github.com/latticehpc/lattice/model"
)

// Node reservations (Input.NodeReservations). A future one is planned
// around like a protected reservation made before the cycle: its free nodes
// become holes that only jobs ending by its start may use, and its nodes
// are free in the release timeline only from its end. An active one takes
// its nodes out of every class but the class of the jobs that run in it
// (Job.Reservation), which holds only its nodes.

// resvState is the cycle's view of the node reservations.
type resvState struct {
	// at: by node, 1 + the index of the reservation active on it now (0 = none).
	at []int32
	// next: by node, 1 + the index of its earliest future reservation;
	// nextSt its start offset from Now (never = none).
	next   []int32
	nextSt []int64
	// future lists the nodes with a future reservation, in node order.
	future    []int32
	anyActive bool
	index     map[string]int32 // node name -> index, built when there are reservations
}

// applyNodeReservations marks the reservations' nodes (from reset, after
// the node states and the release timeline's starting point).
func (s *state) applyNodeReservations() {
	in := s.in
	r := &s.resv
	n := len(in.Nodes)
	r.at = grow(r.at, n)
	r.next = grow(r.next, n)
	r.nextSt = growNoClear(r.nextSt, n)
	for i := range r.nextSt {
		r.nextSt[i] = never
	}
	r.future = r.future[:0]
	r.anyActive = false
	if len(in.NodeReservations) == 0 {
		return
	}
	if r.index == nil {
		r.index = make(map[string]int32, n)
	}
	clear(r.index)
	for i := range in.Nodes {
		r.index[in.Nodes[i].Name] = int32(i)
	}
	for k := range in.NodeReservations {
		nr := &in.NodeReservations[k]
		if !nr.End.After(in.Now) {
			continue
		}
		active := !nr.Start.After(in.Now)
		st := max(0, int64(nr.Start.Sub(in.Now)))
		en := min(int64(nr.End.Sub(in.Now)), never-1)
		for _, name := range nr.Nodes {
			i, ok := r.index[name]
			if !ok {
				continue
			}
			if active {
				if r.at[i] == 0 {
					r.at[i] = int32(k + 1)
					r.anyActive = true
				}
				continue
			}
			if st < r.nextSt[i] {
				if r.nextSt[i] == never {
					r.future = append(r.future, i)
				}
				r.next[i], r.nextSt[i] = int32(k+1), st
			}
			switch {
			case s.own[i] && s.ready[i] && s.idle0[i]:
				// Free now: a hole until st, then taken until en.
				s.firstRes[i] = min(s.firstRes[i], st)
				s.avail[i] = max(s.avail[i], en)
			case s.own[i] && s.ready[i] && s.avail[i] != never:
				s.avail[i] = max(s.avail[i], en)
			case s.borrowable[i]:
				s.firstRes[i] = min(s.firstRes[i], st)
			}
		}
	}
	slices.Sort(r.future)
}

// resvIndex is 1 + the index of the reservation named name, or 0.
func (s *state) resvIndex(name string) int32 {
	for k := range s.in.NodeReservations {
		if s.in.NodeReservations[k].Name == name {
			return int32(k + 1)
		}
	}
	return 0
}

// resvHold is the hold of a job that runs in a reservation: Reservation
// while it is missing or not active yet.
func (s *state) resvHold(j *Job) string {
	k := s.resvIndex(j.Reservation)
	if k == 0 {
		return model.ReasonReservation
	}
	nr := &s.in.NodeReservations[k-1]
	if !nr.Start.After(s.in.Now) && nr.End.After(s.in.Now) {
		return ""
	}
	return model.ReasonReservation
}

// resvReason is the reason reservation k (1-based) gives a job it keeps
// from starting.
func (s *state) resvReason(k int32) string {
	if s.in.NodeReservations[k-1].Maint {
		return model.ReasonMaintenance
	}
	return model.ReasonReserved
}

// resvBlocks explains a job that waits for nodes when future reservations
// are what keeps it off free nodes: with their holes it could start now
// (its walltime ends at e), so the reason names the earliest of them.
func (s *state) resvBlocks(jb *job, ex *Explanation, e int64) {
	r := &s.resv
	if len(r.future) == 0 {
		return
	}
	c := jb.cls
	blocked, first := 0, int32(0)
	for _, x := range r.future {
		if !c.elig[x] || s.taken[x] || r.nextSt[x] >= e {
			continue
		}
		if !((s.own[x] && s.ready[x] && s.idle0[x]) || (s.borrowable[x] && !jb.ownOnly)) {
			continue
		}
		blocked++
		if first == 0 || s.in.NodeReservations[r.next[x]-1].Start.Before(s.in.NodeReservations[first-1].Start) {
			first = r.next[x]
		}
	}
	if blocked == 0 {
		return
	}
	usable := c.usableOwn(e)
	if !jb.ownOnly {
		usable += c.usableBorrow(e)
	}
	if usable+blocked >= jb.min {
		ex.Reason = s.resvReason(first)
		ex.Reservation = s.in.NodeReservations[first-1].Name
	}
}

// nameReservations fills Explanation.Reservation for the reasons a node
// reservation gives, once the plan is made.
func (s *state) nameReservations() {
	if len(s.in.NodeReservations) == 0 && !s.anyJobResv() {
		return
	}
	for rank := range s.out.Explanations {
		ex := &s.out.Explanations[rank]
		if ex.Reservation != "" {
			continue
		}
		jb := &s.jobs[s.order[rank]]
		switch {
		case jb.j.Reservation != "":
			ex.Reservation = jb.j.Reservation
		case (ex.Reason == model.ReasonMaintenance || ex.Reason == model.ReasonReserved) && jb.cls.resvBlock > 0:
			ex.Reservation = s.in.NodeReservations[jb.cls.resvBlock-1].Name
		}
	}
}

// anyJobResv reports whether a pending job runs in a reservation.
func (s *state) anyJobResv() bool {
	for i := range s.in.Pending {
		if s.in.Pending[i].Reservation != "" {
			return true
		}
	}
	return false
}
