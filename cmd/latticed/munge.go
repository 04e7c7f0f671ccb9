package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	latticecli "github.com/latticehpc/lattice/cli"
	"github.com/latticehpc/lattice/model"
)

// MUNGE on the servers, like Slurm's AuthInfo=socket=: the member decodes
// the credentials latticectl sends through its own munged.

func mungeSocketFlag(dev bool) *cli.StringFlag {
	usage := "munged's socket: MUNGE credentials are checked through it when it exists (\"off\" = never); users are then who their uid is"
	if dev {
		usage = "munged's socket: when given, MUNGE credentials are checked through it (your own uid is an admin)"
		return &cli.StringFlag{Name: "munge-socket", Usage: usage, EnvVars: env("munge-socket")}
	}
	return &cli.StringFlag{Name: "munge-socket", Value: latticecli.DefaultMungeSocket, Usage: usage, EnvVars: env("munge-socket")}
}

// mungeSocket is the socket to check MUNGE credentials through, or "" for
// none: the flag's value when it is a socket; a socket named explicitly
// (flag or environment) must exist.
func mungeSocket(c *cli.Context) (string, error) {
	p := c.String("munge-socket")
	if p == "" || p == "off" || p == "none" {
		return "", nil
	}
	fi, err := os.Stat(p)
	if err == nil && fi.Mode()&os.ModeSocket != 0 {
		return p, nil
	}
	if c.IsSet("munge-socket") && p != latticecli.DefaultMungeSocket {
		return "", usageError{&model.FieldError{Field: "munge-socket", Value: p,
			Allowed: fmt.Sprintf("the socket of a running munged (start munged, or pass --munge-socket off): %v", statErr(err))}}
	}
	return "", nil
}

func statErr(err error) string {
	if err == nil {
		return "not a socket"
	}
	return err.Error()
}
