// Package vcluster runs one scheduler loop per vCluster on the quorum's
// leader: it reads a consistent snapshot of committed state, builds the
// solver's input (BuildInput, shared with the replay simulator, which keeps a
// Builder: the same inputs, with memory reused from cycle to cycle) — the
// nodes it may borrow by the lenders' policies, the nodes held for its
// allocations, tenant shares that count running work —, calls the solver,
// plans reclaims of its lent nodes (PlanReclaims) and preemptions by
// priority class (PlanPreemptions) with what-if solves, and proposes the
// assignments (with borrows), the reclaims and the preemptions, re-queueing
// whatever the quorum rejects. The loops of a leader term share their plans'
// reservations on a Board, so a vCluster does not lend the nodes it is about
// to use.
//
// It never changes state directly; every change is a proposal the quorum
// validates. It reads the clock only in the loop shell (Loop), never in
// BuildInput or the planning functions.
package vcluster
