// Package supervise is the job supervisor: the process that leads a job's
// process group, starts its entrypoint, and records how it ended in a
// status file, so an agent that was down when a job ended still learns its
// real exit code and a restarted agent recognises its jobs (agent/recover.go).
//
// It imports the standard library only, so that the small
// lattice-job-supervisor binary (cmd/lattice-job-supervisor), which agents
// start once per run, stays cheap to start: on this project's test
// machine (a gVisor sandbox) re-executing the 35 MB latticed binary as the
// supervisor cost ~14 ms of CPU per job, the small binary ~2 ms. latticed
// itself can still act as the supervisor (package agent's init calls Main)
// when the small binary is not installed.
//
// By default an agent starts one supervisor daemon (daemon.go) that starts
// every job itself, rather than a supervisor per job: the Go start-up of a
// supervisor per job was ~3.5 ms of CPU per job.
package supervise

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

// StatusEnv names the file a supervisor records its job's exit status in;
// a process started with it set is a supervisor.
const StatusEnv = "LATTICE_SUPERVISE_STATUS"

// CredEnv passes the job owner's "UID:GID[:G1,G2...]" to a supervisor
// started by a root agent: the supervisor runs as the agent's user and
// starts the entrypoint as the owner.
const CredEnv = "LATTICE_SUPERVISE_CRED"

// BinaryName is the small supervisor binary's file name, looked for next
// to latticed; also what ps shows as a supervisor's name.
const BinaryName = "lattice-job-supervisor"

// Main runs the supervisor when this process was started as one
// (StatusEnv set, argv = [name, path, argv0, args...]) and returns its exit
// code; ok is false when it was not started as one.
//
// Started with DaemonEnv set, it runs the supervisor daemon instead
// (DaemonMain); with StepGuardEnv set, a step guard (StepGuardMain).
func Main() (code int, ok bool) {
	if code, ok := DaemonMain(); ok {
		return code, true
	}
	if code, ok := StepGuardMain(); ok {
		return code, true
	}
	status := os.Getenv(StatusEnv)
	if status == "" || len(os.Args) < 3 {
		return 0, false
	}
	return Run(status, os.Args[1], os.Args[2:]), true
}

// Run runs path with argv (argv[0] its name), records how it ended in the
// status file and returns that exit code.
//
// The supervisor leads the job's process group and ignores the signals sent
// to the group (the entrypoint gets them itself).
func Run(status, path string, argv []string) int {
	_ = os.Unsetenv(StatusEnv)
	var cred *syscall.Credential
	if v := os.Getenv(CredEnv); v != "" {
		c, err := ParseCredential(v)
		if err != nil {
			fmt.Fprintf(os.Stderr, "lattice: %v\n", err)
			_ = WriteStatus(status, 126)
			return 126
		}
		cred = c
		_ = os.Unsetenv(CredEnv)
	}
	cg, err := cgroupsFromEnv()
	if err != nil {
		fmt.Fprintf(os.Stderr, "lattice: %v\n", err)
		_ = WriteStatus(status, 126)
		return 126
	}
	// The signals the Go runtime would end the supervisor with when they
	// come from kill(2) (its sigtable's _SigKill and _SigThrow ones); it
	// drops the others itself while they are not notified. Handled, not
	// ignored: an ignored signal would stay ignored in the job after exec.
	// (Notify with no list, every signal, cost ~2.5 ms of CPU per run on
	// gVisor: a handler installed per signal.)
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGILL,
		syscall.SIGTRAP, syscall.SIGABRT, syscall.SIGSTKFLT, syscall.SIGSYS)
	go func() {
		for range sigs {
		}
	}()
	g := newJobGuard(status)
	code := start(path, argv, cred, cg, g.started)
	if err := WriteStatus(status, code); err != nil {
		fmt.Fprintf(os.Stderr, "lattice: record exit status: %v\n", err)
	}
	g.ended()
	return code
}

// start runs path and waits for it: its exit code, 128+N when signal N
// ended it, 127 when it could not start. syscall.ForkExec and Wait4, not
// os/exec: nothing but the process is needed (no pipes, no pidfd).
func start(path string, argv []string, cred *syscall.Credential, cg *Cgroups, started func(pid int)) int {
	attr := &syscall.ProcAttr{Env: os.Environ(), Files: []uintptr{0, 1, 2}}
	if cred != nil {
		attr.Sys = &syscall.SysProcAttr{Credential: cred}
	}
	pid, err := ForkExecIn(cg, path, argv, attr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "lattice: start %s: %v\n", path, err)
		return 127
	}
	started(pid)
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if err != syscall.EINTR {
			if err != nil {
				fmt.Fprintf(os.Stderr, "lattice: wait for %s: %v\n", path, err)
				return -1
			}
			break
		}
	}
	return WaitCode(ws)
}

// WaitCode is the exit code a wait status says: 128+N when signal N ended
// the process.
func WaitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// ExitCode is a process's exit code, 128+N when signal N ended it.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok {
			return WaitCode(ws)
		}
		return ee.ExitCode()
	}
	return -1
}

// WriteStatus records code durably in path.
func WriteStatus(path string, code int) error {
	return WriteFileSync(path, []byte(strconv.Itoa(code)+"\n"))
}

// ReadStatus returns the exit code a supervisor recorded.
func ReadStatus(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return n, err == nil
}

// WriteFileSync replaces path with data durably: temp file, fsync, rename,
// fsync of the directory.
func WriteFileSync(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
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
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// FormatCredential is CredEnv's value for c.
func FormatCredential(c *syscall.Credential) string {
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

// ParseCredential reads CredEnv's value.
func ParseCredential(s string) (*syscall.Credential, error) {
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
