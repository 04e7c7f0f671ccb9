// Package agent is the node agent. The Runner starts an allocation's
// entrypoint as a real process in its own process group, with the Slurm
// and Lattice environment and its output in files; it stops it (SIGTERM,
// grace, SIGKILL) at the walltime or when told, and delivers checkpoint
// requests (signal, hook, webhook; the done file acknowledges in every
// mode) and acts on their outcome (docs/checkpoint-delivery.md). The Agent
// keeps one stream to the leader: it receives assignments, cancellations,
// checkpoint requests and log reads, and sends reports numbered by seq and
// resent until acknowledged after commit. It keeps its bookkeeping per run
// — (allocation id, requeue count) — so a requeued allocation starts again
// exactly once and an old run's end is never taken for the new one's. It
// must never report what it does not know: a cancel or a report for a run
// the quorum has moved past is dropped. cmd/latticed runs it (`latticed
// agent`, `latticed dev`).
package agent
