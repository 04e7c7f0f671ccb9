// Package model holds Lattice's domain types — Node, Allocation, VCluster,
// Tenant — their state machines, and the validation of user input.
//
// It is the vocabulary every other package shares. It must never do I/O,
// read the clock or import another Lattice package. Validation errors are
// *FieldError values that name the offending field and what is allowed, so
// the CLI and the API can show them unchanged.
package model
