// Package solver decides, for one vCluster and one cycle, which pending
// allocations start now and where: the f1–f9 cost function with named weight
// profiles and a per-factor breakdown, and GreedyTopologyAwareBackfill with
// protected reservations on a release timeline — or, by Input.Algorithm, its
// strict-order (fifo), packing (binpack) and one-fingerprint (sensitive)
// variants. It honours borrowed nodes' lending limits and nodes held for one
// job (which starts on them first).
//
// Its entry point is Solve(*Input) *Plan, or a Solver's Solve for callers
// that plan cycle after cycle: the same plans, with working memory kept from
// one cycle to the next. The factor catalog (Factors), the weight profiles
// (Profile, ResolveProfile, ProfileNames, ProfileForType) and
// ParseWeightOverride serve `explain`, `vcluster set` and the API. The
// algorithm, the factors' neutral values, the tie-breaking and the
// complexity are described in docs/solver.md.
//
// It is pure: a function of an Input snapshot and the clock value inside it.
// It never reads the wall clock, does I/O, starts goroutines, keeps global
// mutable state or ranges over a map where the order matters; the same Input
// gives the same Plan, bit for bit (a Solver's memory of earlier cycles
// changes nothing), and the Input is never modified. The vCluster loops
// (vcluster) and the replay simulator (replay) call it, both through
// vcluster.BuildInput (the replay through a vcluster.Builder and a Solver).
package solver
