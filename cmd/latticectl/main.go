// Command latticectl is the Lattice command-line client: submit, inspect
// and administer work on a Lattice cluster. Everything lives in package
// cli; this file only runs it.
//
// Every latticectl run pays at start-up for the memory its code and its
// packages' initialisation touch (page faults, ~10 µs each here), and users'
// loops run one per submission, so latticectl links only what talking to a
// server needs: not package server (Prometheus, pprof, HTTP), nor the
// offline tools — replay (solver, predictor, plotting) and the quorum's
// backup format (Raft, bolt) — which run in latticectl-offline
// (cli/offline.go). deps_test.go keeps it so. Package startup, initialised
// before the others, runs the process on one processor.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/latticehpc/lattice/cli"
	_ "github.com/latticehpc/lattice/cmd/latticectl/startup"
)

// gcPercent is the collector's GOGC for a latticectl run: a call lives for
// milliseconds, and with Go's default (100) a listing of a few thousand
// jobs collects two or three times for garbage that the exit frees anyway
// (~13% of such a squeue's CPU). 400 still bounds a long-lived command
// (logs -f) to five times its live heap.
const gcPercent = 400

func main() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// Invoked as sbatch, squeue, ... (links made by `latticectl
	// slurm-commands install`), it is that Slurm command.
	code := cli.MainAs(ctx, cli.OSEnv(), os.Args[0], os.Args[1:])
	stop()
	os.Exit(code)
}
