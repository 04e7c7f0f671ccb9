// Package vcluster runs one scheduler loop per vCluster on the quorum's
// leader: it reads a consistent snapshot of committed state, builds the
// solver's input (BuildInput, shared with the replay simulator, which keeps a
// Builder: the same inputs, with memory reused from cycle to cycle), calls the
// solver, and proposes the resulting assignments — with borrows — as one
// batch per cycle, re-queueing whatever the quorum rejects.
//
// It never changes state directly; every change is a proposal the quorum
// validates. It reads the clock only in the loop shell (Loop), never in
// BuildInput.
package vcluster
