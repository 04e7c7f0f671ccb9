// Package replay is Lattice's trace-driven scheduling simulator: it reads
// workload traces (the Standard Workload Format, plain or gzipped, and the
// replay's own JSON format with tenants, vClusters, priority classes,
// checkpoint modes and DAG edges), replays them in virtual time under a
// policy — the baselines fcfs, easy and conservative, or lattice, which runs
// production's very scheduling step (vcluster.BuildInput and solver.Solve,
// through a vcluster.Builder and a solver.Solver that keep their memory from
// one decision to the next) over a synthetic dragonfly machine — and reports waits, bounded slowdown,
// utilization, fairness and topology metrics, plots and weight sweeps.
//
// It never talks to a server and never reads the wall clock inside the
// simulation (only to report how long a replay took). latticectl replay
// (package cli) calls it; sites use it to tune weights before they change
// production.
package replay
