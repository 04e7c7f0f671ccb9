// Command latticectl is the Lattice command-line client: submit, inspect
// and administer work on a Lattice cluster. Everything lives in package
// cli; this file only runs it, wiring in the quorum's offline backup tools.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/latticehpc/lattice/cli"
	"github.com/latticehpc/lattice/server"
)

func main() {
	cli.VerifyBackup = server.VerifyBackup
	cli.RestoreBackup = server.StageRestore
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, cli.OSEnv(), os.Args[1:])
	stop()
	os.Exit(code)
}
