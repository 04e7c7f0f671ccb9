// Package scale is the scale harness (`latticed bench`): it starts three
// `latticed server` processes and simulated agents as real processes on
// loopback, loads them through the API, measures what users and operators
// see (submit latency, scheduler cycles, placements and completions,
// members' CPU and memory, Raft log and snapshot sizes, a restarted
// follower's catch-up, failover) and checks every invariant on backups
// taken throughout (docs/scale.md). Throughput runs the Lattice side of the
// Slurm comparison (../shared/peers/slurm/throughput.sh).
//
// It only orchestrates processes and reads their APIs, /metrics and /proc;
// it holds no scheduling logic and is never imported by the servers or
// agents. It stops exactly the processes it started.
package scale
