// Command lattice-job-supervisor records the exit status of a Lattice
// agent's jobs durably, so that a restarted agent still learns it. It runs
// either as one long-lived daemon per agent (LATTICE_SUPERVISE_DAEMON, the
// default --job-supervisor-mode) that starts every job, or once per job
// (per-job mode), leading the job's process group. Agents look for it next
// to latticed (see package agent/supervise); it is not meant to be run by
// hand.
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
