// Package topology is the dragonfly model of the machine: nodes sit in
// numbered groups, links inside a group are cheap and links between groups
// are the scarce global ones, so a job should span as few groups as it can.
//
// It answers three questions: which group a node is in, how many groups a
// node set spans, and how to pick n nodes in the fewest groups with best fit
// (the group with the fewest free nodes that still holds the job, so large
// groups stay whole for large jobs).
//
// It is pure: no clock, no I/O, no goroutines, no global mutable state, and
// results never depend on map iteration order. The solver calls it for
// placement and for the topology factor f4; the quorum and the replay
// simulator call it to report how many groups a placement spans.
package topology
