// Package dag is Lattice's workflow format: a YAML file of allocations
// (stages) joined by dependency conditions, its validation, and the
// workflow-level view of a submitted DAG (its state, drawn as text or as
// Graphviz).
//
// Parse reads a file and reports unknown keys and bad values with their
// line; Validate checks the graph (duplicate names, unknown references,
// self-loops, cycles — named as a path — and a size limit) and every stage
// as a request, so nothing is stored unless all of it is right. Plan turns
// a valid file into requests in topological order, the shape of the one
// Raft command that submits the whole DAG.
//
// The release of successors and the cancellation of stages that can never
// run happen inside the quorum's FSM (quorum/dependencies.go), where the
// states they depend on change; State and the renderers here only read
// what the quorum reports.
//
// Everything here is pure: no I/O, no clock, no goroutines. It imports
// only model; latticectl and the server call it.
package dag
