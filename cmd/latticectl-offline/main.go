// Command latticectl-offline is latticectl with its offline tools linked
// in: `latticectl replay` (the solver, the predictor, plotting) and
// `latticectl quorum verify|restore` (the quorum's backup format). latticectl
// runs it, with the same arguments, for those commands, so that its own
// start-up — paid once per submission in users' loops — does not carry
// them (cli/offline.go). Install it next to latticectl; `go build -o bin/
// ./cmd/...` and `make` build both.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/latticehpc/lattice/cli"
	"github.com/latticehpc/lattice/cli/offline"
	"github.com/latticehpc/lattice/quorum"
)

func main() {
	cli.ReplayAction = offline.Replay
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
