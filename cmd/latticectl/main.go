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
// (cli/offline.go). deps_test.go keeps it so.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/latticehpc/lattice/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// Invoked as sbatch, squeue, ... (links made by `latticectl
	// slurm-commands install`), it is that Slurm command.
	code := cli.MainAs(ctx, cli.OSEnv(), os.Args[0], os.Args[1:])
	stop()
	os.Exit(code)
}
