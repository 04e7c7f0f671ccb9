// Package conformance fingerprints a node's configuration — GPU driver, NIC
// firmware, BIOS/BMC firmware, kernel parameters — and groups nodes by that
// fingerprint. Nodes with the same fingerprint form one conformance group:
// a multi-node job on one group avoids the subtle failures of mixed drivers
// and firmware (NCCL hangs, performance cliffs).
//
// It is pure: no clock, no I/O, no goroutines, no global mutable state, and
// results never depend on map iteration order. The node agent calls
// Fingerprint when it registers and heartbeats; the solver uses the groups
// for the conformance factor f9 and for the sensitive vCluster's hard rule
// (all nodes of a job in one group); the CLI shows the fingerprint.
package conformance
