// Package server wires a quorum member together: the Raft member (quorum),
// the gRPC services (allocations, nodes, admin, the agents' stream), the
// Prometheus metrics, follower→leader forwarding, and the leader-only loops
// — one scheduler per vCluster (vcluster), the dispatcher that streams
// assignments to agents and commits their reports in batches, node liveness
// kept in memory, and retention. It mints command times before proposing;
// the state machine never reads the clock.
package server
