package agent

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/latticehpc/lattice/agent/supervise"
)

// A job's entrypoint runs under a supervisor (package agent/supervise): the
// small lattice-job-supervisor binary when it is installed next to
// latticed (or configured), else this binary re-executed with
// LATTICE_SUPERVISE_STATUS set. The supervisor leads the job's process
// group, starts the entrypoint in it, ignores the signals sent to the group
// (the entrypoint gets them itself), and when the entrypoint ends writes its
// exit status to the status file and exits with it. So an agent that was
// down when a job ended still learns its real exit code, and a restarted
// agent recognises its jobs by the supervisor's environment (recover.go).
const superviseEnv = supervise.StatusEnv

// superviseCredEnv passes the job owner's credential to a supervisor
// started by a root agent (supervise.CredEnv).
const superviseCredEnv = supervise.CredEnv

// AgentTagEnv marks every process an agent starts (jobs, their steps) with
// the agent's data dir, so a restarted agent finds what it started.
const AgentTagEnv = "LATTICE_AGENT_TAG"

func init() {
	if code, ok := supervise.Main(); ok {
		os.Exit(code)
	}
}

var (
	formatCredential = supervise.FormatCredential
	exitCodeOf       = supervise.ExitCode
	readStatus       = supervise.ReadStatus
	writeFileSync    = supervise.WriteFileSync
)

// findSupervisor returns the supervisor binary a runner starts for every
// run: configured (which must be executable), else lattice-job-supervisor
// next to this executable, else "" (this binary re-executes itself).
func findSupervisor(configured string) (string, error) {
	if configured != "" {
		abs, err := filepath.Abs(configured)
		if err != nil {
			return "", fmt.Errorf("job supervisor path: %w", err)
		}
		if !isExecutable(abs) {
			return "", fmt.Errorf("job supervisor %s is not an executable file", abs)
		}
		return abs, nil
	}
	if exe, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(exe), supervise.BinaryName); isExecutable(p) {
			return p, nil
		}
	}
	return "", nil
}

// supervisorCommand wraps path/argv in a supervisor writing status (whose
// directory exists: Runner.statusDir), or returns an error when no
// supervisor binary can be found. bin is the
// supervisor binary (findSupervisor); "" re-executes this binary.
func supervisorCommand(bin, status, path string, argv []string) (*exec.Cmd, error) {
	self := bin
	if self == "" {
		// /proc/self/exe is this very binary even after an upgrade replaced
		// (unlinked) its file; elsewhere, the path it was started from.
		self = "/proc/self/exe"
		if _, err := os.Stat(self); err != nil {
			if self, err = os.Executable(); err != nil {
				return nil, fmt.Errorf("find the agent's own binary for the job supervisor: %w", err)
			}
		}
	}
	cmd := exec.Command(self, append([]string{path}, argv...)...)
	cmd.Args[0] = supervise.BinaryName // what ps shows
	return cmd, nil
}
