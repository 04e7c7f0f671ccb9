// Package leader is the leader's lifecycle: what a quorum member does when
// it wins and loses leadership.
//
// A Lifecycle watches leadership. On winning it waits for a Raft barrier
// (every entry committed before the election applied here), retrying a few
// times; a member that cannot finish the barrier hands leadership on
// (LeadershipTransfer) rather than keep it with no loops, answering
// Unavailable. Once the barrier holds it begins a term: the member builds
// the term's state and names every leader-only loop (schedulers,
// dispatcher, liveness, walltime backstop, checkpoint broker, measured
// power, retention and the archive, ...), and the Lifecycle starts each one
// on its own goroutine and cancels them all, in one place, when leadership
// is lost or the member stops.
//
// ServiceController is the services' loop (issue 31, docs/services.md):
// it keeps each service's instances between its minimum and maximum,
// restarts and moves them, and scales them on the metric the agents scrape,
// one ScaleService command per step.
//
// Judge is the liveness rule those loops apply: which silent nodes are
// failed, which are held NotResponding (mass silence, fencing), which come
// back. It is pure; the server commits what it decides.
package leader
