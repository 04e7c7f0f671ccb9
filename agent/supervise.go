package agent

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// A job's entrypoint runs under a supervisor: this binary re-executed with
// LATTICE_SUPERVISE_STATUS set. The supervisor leads the job's process
// group, starts the entrypoint in it, ignores the signals sent to the group
// (the entrypoint gets them itself), and when the entrypoint ends writes its
// exit status to the status file and exits with it. So an agent that was
// down when a job ended still learns its real exit code, and a restarted
// agent recognises its jobs by the supervisor's environment (recover.go).
const superviseEnv = "LATTICE_SUPERVISE_STATUS"

// AgentTagEnv marks every process an agent starts (jobs, their steps) with
// the agent's data dir, so a restarted agent finds what it started.
const AgentTagEnv = "LATTICE_AGENT_TAG"

func init() {
	status := os.Getenv(superviseEnv)
	if status == "" || len(os.Args) < 3 {
		return
	}
	os.Exit(supervise(status, os.Args[1], os.Args[2:]))
}

// supervise runs path with argv (argv[0] its name) and records how it ended.
func supervise(status, path string, argv []string) int {
	_ = os.Unsetenv(superviseEnv)
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs) // every catchable signal: the group delivers it to the job too
	go func() {
		for range sigs {
		}
	}()
	cmd := exec.Command(path)
	cmd.Args = argv
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	code := 0
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "lattice: start %s: %v\n", path, err)
		code = 127
	} else {
		code = exitCodeOf(cmd.Wait())
	}
	if err := writeStatus(status, code); err != nil {
		fmt.Fprintf(os.Stderr, "lattice: record exit status: %v\n", err)
	}
	return code
}

// exitCodeOf is a process's exit code, 128+N when signal N ended it.
func exitCodeOf(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return -1
}

func writeStatus(path string, code int) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(strconv.Itoa(code) + "\n"); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// readStatus returns the exit code a supervisor recorded.
func readStatus(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return n, err == nil
}

// supervisorCommand wraps path/argv in a supervisor writing status, or
// returns an error when this binary cannot be found.
func supervisorCommand(status, path string, argv []string) (*exec.Cmd, error) {
	// /proc/self/exe is this very binary even after an upgrade replaced
	// (unlinked) its file; elsewhere, the path it was started from.
	self := "/proc/self/exe"
	if _, err := os.Stat(self); err != nil {
		if self, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("find the agent's own binary for the job supervisor: %w", err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(status), 0o755); err != nil {
		return nil, fmt.Errorf("status dir: %w", err)
	}
	cmd := exec.Command(self, append([]string{path}, argv...)...)
	cmd.Args[0] = "lattice-job-supervisor" // what ps shows
	return cmd, nil
}
