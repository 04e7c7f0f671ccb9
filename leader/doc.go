// Package leader is what a quorum member does while it leads: the
// lifecycle of its leadership and every leader-only loop.
//
// A Lifecycle watches leadership. On winning it waits for a Raft barrier
// (every entry committed before the election applied here), retrying a few
// times; a member that cannot finish the barrier hands leadership on
// (LeadershipTransfer) rather than keep it with no loops, answering
// Unavailable. Once the barrier holds it begins a term (Member.BeginTerm)
// and starts each loop the term names on its own goroutine, and cancels
// them all, in one place, when leadership is lost or the member stops.
//
// A Term is one term's leader state and the bodies of its loops, over a
// Host (the member: propose, read committed state, wait for a change):
//
//   - schedulers: one vcluster.Loop per vCluster; the Term is their
//     StateReader (Snapshot, Settings, Completed) and Proposer
//     (AssignBatch in slices, Reclaim, Preempt);
//   - dispatcher and reports: assignments, cancellations and checkpoint
//     requests streamed to the agents' connections (AgentConn; a node
//     held by a connected agent cannot be claimed by another, claims.go),
//     and the agents' reports committed in batches;
//   - liveness: heartbeats kept in memory, node health committed by the
//     rule Judge (node timeout, mass-silence guard, fencing hold);
//   - walltime backstop, checkpoint broker, measured power, prune (ended
//     allocations into the replicated history), idle interactive
//     allocations; the site's mail hook runs for the agents' reports;
//   - services: ServiceController (issue 31, docs/services.md) keeps each
//     service's instances between its minimum and maximum, restarts and
//     moves them, and scales them on the metric the agents scrape, one
//     ScaleService command per step.
//
// The member's gRPC handlers reach the term through its exported methods
// (ConnFor, Claim, Attach, Report, Heard, ReadLog, …); leader imports no
// handler.
package leader
