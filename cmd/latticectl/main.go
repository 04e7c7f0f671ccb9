// Command latticectl is the Lattice command-line client: submit, inspect
// and administer work on a Lattice cluster. Everything lives in package
// cli; this file only runs it, wiring in the quorum's offline backup tools.
//
// It imports package quorum (the backup format) and not package server:
// every latticectl run pays for the initialisation of what it links, and
// the server's (Prometheus, pprof, HTTP) made each run ~1 ms slower.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/latticehpc/lattice/cli"
	"github.com/latticehpc/lattice/quorum"
)

func main() {
	cli.VerifyBackup = func(path string) error {
		_, err := quorum.VerifyBackupFile(path)
		return err
	}
	cli.RestoreBackup = func(path, dataDir string) error {
		_, err := quorum.PrepareRestore(path, dataDir)
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, cli.OSEnv(), os.Args[1:])
	stop()
	os.Exit(code)
}
