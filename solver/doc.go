// Package solver decides, for one vCluster and one cycle, which pending
// allocations start now and where: the f1–f9 cost function with named weight
// profiles and a per-factor breakdown, and GreedyTopologyAwareBackfill with
// protected reservations.
//
// It is pure: a function of an Input snapshot and the clock value inside it.
// It never reads the wall clock, does I/O, starts goroutines, keeps global
// mutable state or ranges over a map where the order matters; the same Input
// gives the same Plan, bit for bit. The vCluster loops (vcluster) and the
// replay simulator (replay) call it.
package solver
