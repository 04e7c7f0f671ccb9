package cli

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// replayCommand is `latticectl replay`. Owned by the replay work; the body
// lands with the replay package.
func replayCommand() *cli.Command {
	return &cli.Command{
		Name:      "replay",
		Usage:     "simulate a workload trace offline with the real solver",
		ArgsUsage: "TRACE",
		Action: func(*cli.Context) error {
			return errors.New("replay is being built")
		},
	}
}
