// Package checkpoint owns the checkpoint cost model and the pure decisions of
// the checkpoint broker.
//
// The cost model weighs, for one running allocation, the Value of a
// checkpoint now (recompute saved from a failure + being cheap to preempt +
// backlog relief) against its Cost (write time + compute waste around the
// write + storage), all in node-hours: Evaluate explains one job part by
// part, Proactive picks the long runners to checkpoint now. SignalDue says
// when Slurm's --signal=SIG@secs lead-time signal is due, and PreemptionCost
// what stopping a running allocation now would lose, so that victims of a
// reclaim or a preemption can be ordered cheapest first. Params holds the
// model's knobs (the `checkpoint:` key of the latticed config file) with
// DefaultParams and Validate. The formulas and defaults are described in
// docs/checkpoint.md.
//
// It is pure: every function is a function of its arguments, and time comes
// in as values (Situation.Now, now). It never reads the wall clock, does
// I/O, starts goroutines, keeps global mutable state or ranges over a map;
// the same inputs give the same results, and inputs are never modified. It
// does not deliver checkpoints or signals either: that is the broker's
// work, which also remembers what it already sent.
//
// The leader's checkpoint broker (package server) calls Proactive and
// SignalDue every broker cycle; the vCluster loops (package vcluster) call
// PreemptionCost to order the victims of a reclaim or a preemption.
package checkpoint
