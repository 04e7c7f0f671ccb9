// Command latticed runs Lattice: a quorum member (server), a node agent
// (agent), or everything in one process (dev).
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := app().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "latticed:", err)
		os.Exit(exitCode(err))
	}
}
