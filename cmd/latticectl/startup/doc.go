// Package startup sets up the latticectl process for a short life before
// any other package of latticectl initialises: a latticectl run is one
// call (one `sbatch`, one `squeue` in a workflow tool's loop), so its cost
// is mostly process start-up, and that is what this package keeps low.
//
// It runs Go's scheduler on one processor (GOMAXPROCS=1) unless the
// environment sets GOMAXPROCS: with one per CPU, each goroutine that the
// packages' initialisation and the gRPC connection start may wake another
// OS thread, and under gVisor — and on a login node with many cores — a new
// thread and the memory it touches cost more than the call's own work. A
// command that waits on the network gains nothing from parallelism.
//
// It imports only runtime and syscall, so that it is initialised before
// the heavy packages (gRPC, protobuf): Go initialises, among the packages
// whose imports are done, the first in import-path order.
// cmd/latticectl's tests check both.
package startup
