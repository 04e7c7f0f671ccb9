// Command callcost measures what one call of a command costs: the CPU
// (user + system, from the kernel's accounting of the child, wait4's
// rusage) and the wall time of each run, and its page faults, for several
// commands run interleaved — one of each, then again, CALLS times — so
// that a machine whose load changes during the run weighs on every
// command alike. It prints the median and quartiles of each.
//
// Usage:
//
//	go run ./scripts/callcost [-n CALLS] [-warm K] SPEC
//
// SPEC is a file with one command per line: a label, then the program and
// its arguments, separated by tabs. A label "SIDE:NAME" (slurm:squeue,
// lattice:squeue) pairs commands: after the table, each NAME measured on
// two sides gets one line with both sides' medians and their ratio, the
// second side over the first. Each command's standard output and error go
// to /dev/null; a command that exits non-zero is reported, once, with its
// output, and counted anyway. scripts/slurm-call-cost.sh uses it to
// compare Lattice's Slurm commands with Slurm's own.
package main
