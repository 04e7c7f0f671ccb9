// Package power owns the power model of the site: the estimated draw of a
// node (idle or busy watts), budget accounting (what a start adds to the
// system and to a vCluster, whether a limit still holds, the headroom left),
// and the time-of-use energy price schedule with its normalisation to [0,1]
// (the solver's f7) and the rule that lets flexible work wait for cheaper
// hours within its deadline.
//
// It is pure: every function is a function of its arguments; time comes in
// as values. It never reads the wall clock, does I/O (schedules are parsed
// from an io.Reader or a string the caller read), starts goroutines or keeps
// global mutable state, so the quorum's FSM may call it.
//
// Callers: the quorum's power check (invariant I3) and its RegisterNodes,
// SetPowerBudget and SetVCluster guards; the leader's snapshot for the
// solver (headroom, price now); the solver (f7, energy deferral); the replay
// simulator (the same schedule on trace time, energy cost, peak draw).
package power
