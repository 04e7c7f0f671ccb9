// Command lattice-job-supervisor is the small process a Lattice agent
// starts for every run: it leads the job's process group, starts the
// entrypoint (as its owner when the agent is root), and records its exit
// status durably so that a restarted agent still learns it. Agents look for
// it next to latticed (see package agent/supervise); it is not meant to be
// run by hand.
package main

import (
	"fmt"
	"os"

	"github.com/latticehpc/lattice/agent/supervise"
)

func main() {
	code, ok := supervise.Main()
	if !ok {
		fmt.Fprintf(os.Stderr, "%s: started by a Lattice agent for each job (needs %s and PATH ARGV0 [ARGS...]); not run by hand\n",
			supervise.BinaryName, supervise.StatusEnv)
		os.Exit(2)
	}
	os.Exit(code)
}
