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

// superviseCredEnv passes the job owner's "UID:GID[:G1,G2...]" to a
// supervisor started by a root agent: the supervisor runs as the agent's
// user and starts the entrypoint as the owner.
const superviseCredEnv = "LATTICE_SUPERVISE_CRED"

func formatCredential(c *syscall.Credential) string {
	s := fmt.Sprintf("%d:%d", c.Uid, c.Gid)
	if len(c.Groups) > 0 {
		gs := make([]string, len(c.Groups))
		for i, g := range c.Groups {
			gs[i] = strconv.FormatUint(uint64(g), 10)
		}
		s += ":" + strings.Join(gs, ",")
	}
	return s
}

func parseCredential(s string) (*syscall.Credential, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return nil, fmt.Errorf("credential %q: want UID:GID[:GROUPS]", s)
	}
	uid, err1 := strconv.ParseUint(parts[0], 10, 32)
	gid, err2 := strconv.ParseUint(parts[1], 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("credential %q: want UID:GID[:GROUPS]", s)
	}
	c := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	if len(parts) == 3 && parts[2] != "" {
		for _, g := range strings.Split(parts[2], ",") {
			n, err := strconv.ParseUint(g, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("credential %q: bad group %q", s, g)
			}
			c.Groups = append(c.Groups, uint32(n))
		}
	}
	return c, nil
}

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
	var cred *syscall.Credential
	if v := os.Getenv(superviseCredEnv); v != "" {
		c, err := parseCredential(v)
		if err != nil {
			fmt.Fprintf(os.Stderr, "lattice: %v\n", err)
			_ = writeStatus(status, 126)
			return 126
		}
		cred = c
		_ = os.Unsetenv(superviseCredEnv)
	}
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs) // every catchable signal: the group delivers it to the job too
	go func() {
		for range sigs {
		}
	}()
	cmd := exec.Command(path)
	cmd.Args = argv
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
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
	return writeFileSync(path, []byte(strconv.Itoa(code)+"\n"))
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
