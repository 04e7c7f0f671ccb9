package agent

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/latticehpc/lattice/agent/supervise"
)

// Supervisor modes (Config.SupervisorMode).
const (
	// SupervisorDaemon starts every job through one long-lived supervisor
	// daemon per agent (agent/supervise/daemon.go).
	SupervisorDaemon = "daemon"
	// SupervisorPerJob starts a supervisor process for every job.
	SupervisorPerJob = "per-job"
)

// ParseSupervisorMode checks a supervisor mode ("" is the default, daemon).
func ParseSupervisorMode(s string) (string, error) {
	switch s {
	case "", SupervisorDaemon:
		return SupervisorDaemon, nil
	case SupervisorPerJob:
		return SupervisorPerJob, nil
	}
	return "", fmt.Errorf("job supervisor mode %q: want %s or %s", s, SupervisorDaemon, SupervisorPerJob)
}

// lostMessage is the message of a run whose daemon ended before the run
// and left no exit status.
const lostMessage = "its job supervisor daemon ended before the job and recorded no exit status; the job was killed"

// daemonExit is how a run started through the daemon ended.
type daemonExit struct {
	code int
	msg  string
}

// supDaemon is an agent's connection to its supervisor daemon. Exits are
// delivered to the waiter registered for the run's status file; when the
// connection is lost (the daemon ended), every waiter gets the status its
// file holds, or 137 and lostMessage.
type supDaemon struct {
	conn *net.UnixConn
	pid  int

	mu      sync.Mutex
	dead    bool
	closed  bool                         // by this agent (detach): no waiter hears of it
	waiters map[string]chan<- daemonExit // status file → its run's exit
	replies map[string]chan *supervise.Msg
	list    chan *supervise.Msg // the answer to the list in flight
	listMu  sync.Mutex          // one list at a time
}

// dialDaemon connects to the daemon of the agent whose data dir is dir and
// checks it (same user, same protocol version).
func dialDaemon(dir string) (*supDaemon, error) {
	name := supervise.SocketName(dir)
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: name, Net: "unixpacket"})
	if err != nil {
		return nil, err
	}
	if uid, err := supervise.PeerUID(c); err != nil || uid != os.Getuid() {
		c.Close()
		return nil, fmt.Errorf("job supervisor daemon %s runs as uid %d, not this agent's %d", name, uid, os.Getuid())
	}
	if err := supervise.Send(c, &supervise.Msg{Op: supervise.OpHello, V: supervise.ProtocolVersion}); err != nil {
		c.Close()
		return nil, err
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf, oob := supervise.RecvBuffers()
	m, _, err := supervise.Recv(c, buf, oob)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("job supervisor daemon hello: %w", err)
	}
	if m.Op != supervise.OpHello || m.V != supervise.ProtocolVersion {
		c.Close()
		return nil, fmt.Errorf("%w: it speaks protocol version %d; this agent speaks %d", errDaemonVersion, m.V, supervise.ProtocolVersion)
	}
	_ = c.SetReadDeadline(time.Time{})
	d := &supDaemon{conn: c, pid: m.PID, waiters: map[string]chan<- daemonExit{}, replies: map[string]chan *supervise.Msg{}}
	go d.read(buf, oob)
	return d, nil
}

// read delivers the daemon's messages until the connection ends.
func (d *supDaemon) read(buf, oob []byte) {
	for {
		m, files, err := supervise.Recv(d.conn, buf, oob)
		for _, f := range files {
			f.Close()
		}
		if err != nil {
			d.lost()
			return
		}
		d.mu.Lock()
		switch m.Op {
		case supervise.OpExit:
			if w := d.waiters[m.Key]; w != nil {
				delete(d.waiters, m.Key)
				w <- daemonExit{code: m.Code}
			}
		case supervise.OpStarted:
			if ch := d.replies[m.Key]; ch != nil {
				delete(d.replies, m.Key)
				ch <- m
			}
		case supervise.OpList:
			if d.list != nil {
				d.list <- m
				if !m.More {
					d.list = nil
				}
			}
		}
		d.mu.Unlock()
	}
}

// lost ends every wait: the daemon is gone. A run whose status file was
// written ended as it says; the others are reported failed (their agent
// kills what is left of them).
func (d *supDaemon) lost() {
	d.mu.Lock()
	d.dead = true
	if d.closed {
		d.waiters = map[string]chan<- daemonExit{}
		d.mu.Unlock()
		return
	}
	waiters, replies, list := d.waiters, d.replies, d.list
	d.waiters, d.replies, d.list = map[string]chan<- daemonExit{}, map[string]chan *supervise.Msg{}, nil
	d.mu.Unlock()
	d.conn.Close()
	for key, w := range waiters {
		if code, ok := readStatus(key); ok {
			w <- daemonExit{code: code}
		} else {
			w <- daemonExit{code: 128 + int(syscall.SIGKILL), msg: lostMessage}
		}
	}
	for _, ch := range replies {
		close(ch)
	}
	if list != nil {
		close(list)
	}
}

func (d *supDaemon) isDead() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dead
}

// wait registers the exit channel of the run recorded in key. If the run
// ended already (its status file is written), it is delivered at once.
func (d *supDaemon) wait(key string, ch chan<- daemonExit) {
	d.mu.Lock()
	if d.dead {
		d.mu.Unlock()
		if code, ok := readStatus(key); ok {
			ch <- daemonExit{code: code}
		} else {
			ch <- daemonExit{code: 128 + int(syscall.SIGKILL), msg: lostMessage}
		}
		return
	}
	d.waiters[key] = ch
	d.mu.Unlock()
	// An exit sent before the waiter was registered (an adopted run) was
	// recorded first: the status file tells.
	if code, ok := readStatus(key); ok {
		d.mu.Lock()
		w := d.waiters[key]
		if w == ch {
			delete(d.waiters, key)
		}
		d.mu.Unlock()
		if w == ch {
			ch <- daemonExit{code: code}
		}
	}
}

// unwait drops the waiter of key (a start that failed).
func (d *supDaemon) unwait(key string) {
	d.mu.Lock()
	delete(d.waiters, key)
	d.mu.Unlock()
}

// errDaemonVersion means a daemon of another protocol version serves this
// data dir: no other can start while it runs.
var errDaemonVersion = errors.New("job supervisor daemon of another version")

// daemonReplyTimeout is how long a start waits for the daemon's answer
// before the daemon is taken for hung and killed (a var for tests).
var daemonReplyTimeout = 30 * time.Second

// abandon kills an unresponsive daemon and drops the connection, so that
// lost ends every wait on it.
func (d *supDaemon) abandon() {
	if d.pid > 0 {
		_ = syscall.Kill(d.pid, syscall.SIGKILL)
	}
	_ = d.conn.Close()
}

// errDaemonLost means the daemon ended while a start was in flight: the job
// may or may not have started.
var errDaemonLost = errors.New("the job supervisor daemon ended during the start")

// start asks the daemon to start a job; its pid (0 if it could not be
// executed: its exit, 127, follows). Its exit goes to exit, registered
// before the request.
func (d *supDaemon) start(m *supervise.Msg, stdout, stderr *os.File, exit chan<- daemonExit) (int, error) {
	reply := make(chan *supervise.Msg, 1)
	d.mu.Lock()
	if d.dead {
		d.mu.Unlock()
		return 0, errDaemonLost
	}
	d.replies[m.Key] = reply
	d.mu.Unlock()
	d.wait(m.Key, exit)
	if err := supervise.Send(d.conn, m, stdout, stderr); err != nil {
		d.mu.Lock()
		delete(d.replies, m.Key)
		d.mu.Unlock()
		d.unwait(m.Key)
		if d.isDead() {
			return 0, errDaemonLost
		}
		return 0, fmt.Errorf("job supervisor daemon: %w", err)
	}
	var r *supervise.Msg
	var ok bool
	select {
	case r, ok = <-reply:
	case <-time.After(daemonReplyTimeout):
		// A daemon that does not answer (stopped, hung) would hold every
		// start of this agent: end it. Its end reports the runs it had, as
		// a kill -9 does, and the next start runs a new daemon.
		d.abandon()
		r, ok = <-reply // closed by lost
	}
	if !ok {
		d.unwait(m.Key)
		return 0, errDaemonLost
	}
	if r.Err != "" {
		d.unwait(m.Key)
		return 0, errors.New(r.Err)
	}
	return r.PID, nil
}

// jobs lists the jobs the daemon runs now: pid by status file.
func (d *supDaemon) jobs() (map[string]int, error) {
	d.listMu.Lock()
	defer d.listMu.Unlock()
	ch := make(chan *supervise.Msg, 16)
	d.mu.Lock()
	if d.dead {
		d.mu.Unlock()
		return nil, errDaemonLost
	}
	d.list = ch
	d.mu.Unlock()
	if err := supervise.Send(d.conn, &supervise.Msg{Op: supervise.OpList}); err != nil {
		return nil, err
	}
	out := map[string]int{}
	for {
		m, ok := <-ch
		if !ok {
			return nil, errDaemonLost
		}
		for _, j := range m.Jobs {
			out[j.Key] = j.PID
		}
		if !m.More {
			return out, nil
		}
	}
}

// close disconnects without ending any wait: the runs are left to the
// daemon and to whichever agent connects next (Runner.Detach, Shutdown).
func (d *supDaemon) close() {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.conn.Close()
}

// daemonClient returns the connection to this agent's supervisor daemon,
// starting the daemon when none runs (start false: only connect).
func (r *Runner) daemonClient(start bool) (*supDaemon, error) {
	r.daemonMu.Lock()
	defer r.daemonMu.Unlock()
	if r.daemon != nil && !r.daemon.isDead() {
		return r.daemon, nil
	}
	d, err := dialDaemon(r.dir)
	if err == nil || !start || errors.Is(err, errDaemonVersion) {
		if err == nil {
			r.daemon = d
			r.log.Info("connected to the job supervisor daemon", "pid", d.pid)
		}
		return d, err
	}
	if err := r.startDaemon(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		d, err = dialDaemon(r.dir)
		if err == nil {
			r.daemon = d
			r.log.Info("started the job supervisor daemon", "pid", d.pid)
			return d, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("job supervisor daemon did not answer: %w (see %s)", err, filepath.Join(r.dir, supervise.LogFile))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startDaemon starts the supervisor daemon, in its own session so that it
// outlives this agent; its stderr goes to the data dir's supervisor.log.
func (r *Runner) startDaemon() error {
	cmd, err := supervisorCommand(r.supervisor, "", "", nil)
	if err != nil {
		return err
	}
	cmd.Args = cmd.Args[:1]
	cmd.Args[0] = supervise.BinaryName
	logf, err := os.OpenFile(filepath.Join(r.dir, supervise.LogFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("job supervisor daemon log: %w", err)
	}
	defer logf.Close()
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, AgentTagEnv+"=") && !strings.HasPrefix(kv, superviseEnv+"=") && !strings.HasPrefix(kv, superviseCredEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, supervise.DaemonEnv+"="+r.dir)
	cmd.Stderr = logf
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the job supervisor daemon: %w", err)
	}
	go func() { _ = cmd.Wait() }() // no zombie while this agent runs
	return nil
}

// spawnDaemon starts cmd (prepared by spawn: path, argv, env, dir) through
// the supervisor daemon; ok is false when the daemon cannot be used and
// nothing was started (the caller falls back to a per-job supervisor).
func (r *Runner) spawnDaemon(cmd *exec.Cmd, l Launch, cred *syscall.Credential, stdout, stderr *os.File, place *supervise.Cgroups) (p *process, ok bool, err error) {
	m := &supervise.Msg{Op: supervise.OpStart, Key: l.StatusFile, Path: cmd.Path, Argv: cmd.Args, Env: cmd.Env, Dir: cmd.Dir, Cgroups: place}
	if m.Dir == "" {
		m.Dir = r.cwd
	}
	if cred != nil {
		m.Cred = formatCredential(cred)
	}
	if size := msgSize(m); size > supervise.MaxMsg-4096 {
		return nil, false, nil
	}
	d, err := r.daemonClient(true)
	if err != nil {
		r.log.Warn("job supervisor daemon unavailable; this run gets its own supervisor", "alloc", l.AllocID, "err", err)
		return nil, false, nil
	}
	exit := make(chan daemonExit, 1)
	pid, err := d.start(m, stdout, stderr, exit)
	if errors.Is(err, errDaemonLost) {
		// It may have started before the daemon ended: nothing of it may stay.
		r.killRun(l.AllocID, l.RequeueCount)
		return nil, true, fmt.Errorf("start entrypoint: %w", err)
	}
	if err != nil {
		return nil, true, fmt.Errorf("start entrypoint: %w", err)
	}
	r.ensurePlaced(pid, place)
	return &process{pgid: pid, launch: l, done: make(chan struct{}), exited: exit}, true, nil
}

// msgSize is about the encoded size of m (its strings).
func msgSize(m *supervise.Msg) int {
	n := len(m.Key) + len(m.Path) + len(m.Dir) + len(m.Cred) + 256
	for _, s := range m.Argv {
		n += len(s) + 8
	}
	for _, s := range m.Env {
		n += len(s) + 8
	}
	return n + n/8 // JSON escapes
}

// killRun kills the processes of run of allocation id this agent started
// (found by their environment).
func (r *Runner) killRun(id uint64, run int) {
	for _, p := range scanProcesses(r.tag) {
		if p.alloc == id && p.run == run && p.pid == p.pgid {
			_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
		}
	}
}
