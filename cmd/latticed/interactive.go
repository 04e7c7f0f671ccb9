package main

import (
	"time"

	"github.com/urfave/cli/v2"

	"github.com/latticehpc/lattice/server"
)

// interactiveIdleFlag is the site's idle timeout for interactive
// allocations (salloc, latticectl alloc).
func interactiveIdleFlag() *cli.DurationFlag {
	return &cli.DurationFlag{Name: "interactive-idle-timeout", EnvVars: env("interactive-idle-timeout"), Value: server.DefaultInteractiveIdleTimeout,
		Usage: "end an interactive allocation (salloc, latticectl alloc) that has had no step running for this long (0 = never)"}
}

// interactiveIdle is the flag as the server takes it (negative = never).
func interactiveIdle(c *cli.Context) time.Duration {
	if d := c.Duration("interactive-idle-timeout"); d > 0 {
		return d
	}
	return -1
}
