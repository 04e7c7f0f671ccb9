package agent

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/latticehpc/lattice/agent/supervise"
	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// Pseudo-terminal steps (latticectl run --pty, srun --pty): the step's one
// task runs as the session leader of a new session whose controlling
// terminal is a PTY this agent holds the master side of. What the task
// writes to it goes to the leader as the rank's stdout; what the user
// types comes back as StepInput and is written to the master, so the
// terminal's line discipline on this node turns ^C and ^Z into SIGINT and
// SIGTSTP for the foreground process group, exactly as a local terminal
// would. github.com/creack/pty opens the pair (ptmx, grantpt, unlockpt
// and the slave's name differ per OS; it is the small, widely used and
// maintained library for exactly this).

// ptyTable is the masters of the pty tasks running here, by step.
type ptyTable struct {
	mu      sync.Mutex
	masters map[stepKey]*os.File
}

func (t *ptyTable) get(k stepKey) *os.File {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.masters[k]
}

func (t *ptyTable) set(k stepKey, f *os.File) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if f == nil {
		delete(t.masters, k)
		return
	}
	if t.masters == nil {
		t.masters = map[stepKey]*os.File{}
	}
	t.masters[k] = f
}

// ptyDrain is how long the output still in the terminal is read after
// the task ended (a background process holding the terminal open does
// not keep the step alive).
const ptyDrain = 2 * time.Second

// startPtyTask starts a step's task on a new pseudo-terminal.
func (a *Agent) startPtyTask(m *latticev1.StepLaunch, t *latticev1.StepTask, place *supervise.Cgroups) (*stepTask, error) {
	if len(m.Command) == 0 {
		return nil, errors.New("empty command")
	}
	key := stepKey{m.AllocationId, m.StepId}
	if a.ptys.get(key) != nil {
		return nil, fmt.Errorf("step %d.%d already has a terminal here", m.AllocationId, m.StepId)
	}
	env := append(StepEnv(m, t), AgentTagEnv+"="+a.runner.tag)
	if envValue(env, "TERM") == "" {
		env = append(env, "TERM=xterm")
	}
	path, err := lookPathIn(m.Command[0], envValue(env, "PATH"), m.WorkDir)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, m.Command[1:]...)
	cmd.Args[0] = m.Command[0]
	cmd.Env = env
	if m.WorkDir != "" {
		if st, err := os.Stat(m.WorkDir); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("work dir %s does not exist on %s", m.WorkDir, m.Node)
		}
		cmd.Dir = m.WorkDir
	}
	cred, err := a.runner.credential(Launch{AllocID: m.AllocationId, User: m.User})
	if err != nil {
		return nil, err
	}
	master, tty, err := openPty()
	if err != nil {
		return nil, fmt.Errorf("open a pseudo-terminal: %w", err)
	}
	defer tty.Close() // the task holds its own copy
	setWinsize(master, m.PtyRows, m.PtyCols)
	if cred != nil {
		// The user's terminal is the user's (programs reopen /dev/tty).
		_ = os.Chown(tty.Name(), int(cred.Uid), int(cred.Gid))
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	// A new session led by the task, with the terminal as its controlling
	// terminal (fd 0); the session id is its process group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0, Credential: cred}
	if err := startInCgroup(place, cmd); err != nil { // its step's cgroup (runner_cgroup.go)
		master.Close()
		return nil, err
	}
	a.ptys.set(key, master)
	task := &stepTask{rank: t.Rank, pgid: cmd.Process.Pid, done: make(chan struct{})}
	// Stopping the task hangs its terminal up first, as closing a terminal
	// window does: the shell and its jobs get SIGHUP.
	task.hangup = func() { _ = syscall.Kill(-task.pgid, syscall.SIGHUP) }
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, stepChunk)
		for {
			n, err := master.Read(buf)
			if n > 0 {
				a.sendStepEvent(&latticev1.StepEvent{AllocationId: m.AllocationId, StepId: m.StepId, Rank: t.Rank,
					Data: append([]byte(nil), buf[:n]...)})
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		err := cmd.Wait()
		code := supervise.ExitCode(err) // 128+N when signal N ended it
		if code < 0 {
			code = 255 // it could not be waited for
		}
		// The session's other processes lose their terminal.
		_ = syscall.Kill(-task.pgid, syscall.SIGHUP)
		select {
		case <-read:
		case <-time.After(ptyDrain):
		}
		a.ptys.set(key, nil)
		master.Close() // ends the read (the master is non-blocking)
		<-read
		close(task.done)
		a.sendStepEvent(&latticev1.StepEvent{AllocationId: m.AllocationId, StepId: m.StepId, Rank: t.Rank, Exited: true, ExitCode: int32(code)})
	}()
	return task, nil
}

// stepInput delivers a terminal's input to the pty task of a step.
func (a *Agent) stepInput(in *latticev1.StepInput) {
	master := a.ptys.get(stepKey{in.AllocationId, in.StepId})
	if master == nil {
		return // ended, or not on this agent
	}
	if len(in.Data) > 0 {
		if _, err := master.Write(in.Data); err != nil {
			a.log.Info("terminal input not delivered", "alloc", in.AllocationId, "step", in.StepId, "err", err)
		}
	}
	if r := in.Resize; r != nil {
		// The foreground process gets SIGWINCH from the kernel.
		setWinsize(master, r.Rows, r.Cols)
	}
	if in.Signal > 0 && in.Signal <= 64 {
		// To the terminal's foreground process group, as the keyboard would.
		if rc, err := master.SyscallConn(); err == nil {
			_ = rc.Control(func(fd uintptr) {
				if pgrp, err := unix.IoctlGetInt(int(fd), unix.TIOCGPGRP); err == nil && pgrp > 0 {
					_ = syscall.Kill(-pgrp, syscall.Signal(in.Signal))
				}
			})
		}
	}
	if in.CloseStdin {
		// End of input, as ^D at the start of a line.
		_, _ = master.Write([]byte{4})
	}
}

// openPty opens a pseudo-terminal pair. The master is made non-blocking
// and goes through Go's poller, so closing it ends a read in progress
// (creack/pty's own master is blocking: its read would outlive the task
// when a background process keeps the terminal open).
func openPty() (master, tty *os.File, err error) {
	m, tty, err := pty.Open()
	if err != nil {
		return nil, nil, err
	}
	defer m.Close()
	fd, err := unix.Dup(int(m.Fd()))
	if err != nil {
		tty.Close()
		return nil, nil, err
	}
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		tty.Close()
		return nil, nil, err
	}
	return os.NewFile(uintptr(fd), m.Name()), tty, nil
}

// setWinsize sets a terminal's size (TIOCSWINSZ) without Fd, which would
// make the master blocking again; a size out of range is ignored.
func setWinsize(f *os.File, rows, cols uint32) {
	if rows == 0 || cols == 0 || rows > 0xffff || cols > 0xffff {
		return
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: uint16(rows), Col: uint16(cols)})
	})
}
