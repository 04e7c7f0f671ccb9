// Package quorum is the replicated state of a Lattice cluster: the Raft
// state machine, its commands, and the Raft member that carries them.
//
//   - Commands (commands.go and the files of each topic: submit.go,
//     jobcontrol.go, step.go, history.go, …) are what a leader proposes: a
//     type byte and a body (a versioned binary codec for the hot ones,
//     codec.go; JSON for the others). Every member applies the same entries
//     in the same order, so Apply is deterministic: times come in the
//     command (minted on the leader before it proposes), never from the
//     clock; no map order, randomness or I/O decides anything. A refused
//     command or item is a Result with a Rejection (code, pending reason,
//     message); an entry that cannot be decoded panics rather than diverge.
//   - State (state.go) is the committed state — nodes, allocations,
//     vClusters, tenants, users and tokens, the history of ended jobs — and
//     the derived indexes every command keeps in step (group usage, power
//     draw, tenant load, pending per vCluster, …). Objects are never
//     changed in place, so readers (FSM.View, Quorum.View) share them under
//     a read lock, and the long lists without copying (alloclist.go).
//     CheckInvariants recomputes every index and checks the invariants the
//     quorum enforces.
//   - FSM (fsm.go) applies entries, takes and restores snapshots
//     (snapshot.go) and signals each change (Changed).
//   - Quorum (raft.go) is a member's Raft: bolt log and stable store,
//     snapshots on disk, TCP (optionally TLS, optionally proven by a
//     cluster secret: tls.go, secret.go) or in-memory transport,
//     bootstrap, join and removal of members, Propose and Barrier;
//     backup.go writes, verifies and stages restores of backups;
//     faults.go and diskfaults.go inject network and disk faults in tests.
//
// quorum imports only model and power: what to propose is decided
// elsewhere (the leader's loops in package leader, the gRPC handlers after
// package admission's checks); Apply checks each command against the
// committed state it meets (state machine, staleness, ownership, quota,
// power).
package quorum
