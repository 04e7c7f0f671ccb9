package supervise

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// The supervisor daemon: one long-lived process per agent that starts every
// job the agent runs (instead of one supervisor process per job, whose Go
// start-up cost ~3.5 ms of CPU per job). It runs in its own session as a
// child subreaper, so it outlives an agent restart; it starts each job by
// fork/exec, as its owner, leading its own process group, waits for it, and
// records its exit status in the job's status file (fsync'd) before it tells
// any connected agent. A restarted agent reconnects and asks which jobs still
// run (OpList); an agent that finds no daemon starts a new one.
//
// The protocol: SOCK_SEQPACKET on an abstract unix socket (SocketName), one
// JSON Msg per packet; both ends check that the peer runs as their own user
// (SO_PEERCRED). A start carries the job's stdout and stderr descriptors
// (SCM_RIGHTS). The agent says hello first; the daemon answers with its
// version, and an agent refuses a daemon of another version.

// DaemonEnv, set to the agent's data dir, makes a process the supervisor
// daemon of that agent.
const DaemonEnv = "LATTICE_SUPERVISE_DAEMON"

// ProtocolVersion is the daemon protocol's version (Msg.V of a hello).
const ProtocolVersion = 1

// MaxMsg is the largest message either end sends: a start whose
// environment or arguments do not fit runs under a per-job supervisor.
const MaxMsg = 192 << 10

// PIDFile is the file, in the agent's data dir, that holds the daemon's pid
// (for operators and the throughput bench; nothing depends on it).
const PIDFile = "supervisor.pid"

// LogFile is the daemon's stderr, in the agent's data dir.
const LogFile = "supervisor.log"

// Message operations.
const (
	OpHello   = "hello"   // agent → daemon; the daemon answers with V and PID
	OpStart   = "start"   // agent → daemon, with stdout and stderr; answered by OpStarted
	OpStarted = "started" // PID of the job (0 and an exit if it could not start), or Err
	OpList    = "list"    // agent → daemon; answered by OpList with Jobs
	OpExit    = "exit"    // daemon → every agent: Key's job ended with Code (recorded already)
)

// Msg is one packet of the protocol, in either direction.
type Msg struct {
	Op  string `json:"op"`
	V   int    `json:"v,omitempty"`
	PID int    `json:"pid,omitempty"`
	// Key is the job's status file: its name in every message.
	Key  string   `json:"key,omitempty"`
	Path string   `json:"path,omitempty"`
	Argv []string `json:"argv,omitempty"`
	Env  []string `json:"env,omitempty"`
	Dir  string   `json:"dir,omitempty"`
	Cred string   `json:"cred,omitempty"` // FormatCredential; "" = the daemon's own user
	// Cgroups: where the job starts (cgroup.go); nil = the daemon's own.
	Cgroups *Cgroups `json:"cgroups,omitempty"`
	Code    int      `json:"code,omitempty"`
	Err     string   `json:"err,omitempty"`
	Jobs    []Job    `json:"jobs,omitempty"`
	// More: another OpList packet follows (a long list comes in parts).
	More bool `json:"more,omitempty"`
}

// Job is a job the daemon runs now.
type Job struct {
	Key string `json:"key"`
	PID int    `json:"pid"`
}

// SocketName is the abstract unix socket of the daemon of the agent whose
// data dir is dir (abstract: no path length limit, no stale file after a
// kill; the peer's uid is checked on both ends).
func SocketName(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	h := sha256.Sum256([]byte(abs))
	return "@lattice-job-supervisor-" + hex.EncodeToString(h[:12])
}

// PeerUID is the uid of the process at the other end of c.
func PeerUID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	var cred *syscall.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return -1, err
	}
	if serr != nil {
		return -1, serr
	}
	return int(cred.Uid), nil
}

// Send writes m (with files' descriptors, if any) as one packet.
func Send(c *net.UnixConn, m *Msg, files ...*os.File) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if len(b) > MaxMsg {
		return fmt.Errorf("supervisor message of %d bytes: more than %d", len(b), MaxMsg)
	}
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = syscall.UnixRights(fds...)
	}
	_, _, err = c.WriteMsgUnix(b, oob, nil)
	return err
}

// Recv reads one packet: the message and the descriptors it carried.
func Recv(c *net.UnixConn, buf, oob []byte) (*Msg, []*os.File, error) {
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, nil, err
	}
	if n == 0 {
		return nil, nil, errors.New("supervisor connection closed")
	}
	var files []*os.File
	if oobn > 0 {
		scms, err := syscall.ParseSocketControlMessage(oob[:oobn])
		if err == nil {
			for _, scm := range scms {
				fds, err := syscall.ParseUnixRights(&scm)
				if err != nil {
					continue
				}
				for _, fd := range fds {
					syscall.CloseOnExec(fd)
					files = append(files, os.NewFile(uintptr(fd), "fd"))
				}
			}
		}
	}
	m := &Msg{}
	if err := json.Unmarshal(buf[:n], m); err != nil {
		for _, f := range files {
			f.Close()
		}
		return nil, nil, fmt.Errorf("supervisor message: %w", err)
	}
	return m, files, nil
}

// RecvBuffers returns buffers for Recv.
func RecvBuffers() (buf, oob []byte) {
	return make([]byte, MaxMsg+1024), make([]byte, syscall.CmsgSpace(4*4))
}

// daemon is the running supervisor daemon.
type daemon struct {
	dir string
	uid int
	ln  *net.UnixListener

	mu      sync.Mutex
	jobs    map[int]string // pid → status file
	conns   map[*net.UnixConn]*peer
	seen    bool          // an agent connected once
	started chan struct{} // a job started (wakes the reaper)
}

// DaemonMain runs the daemon when this process was started as one
// (DaemonEnv set) and returns its exit code; ok is false otherwise.
func DaemonMain() (code int, ok bool) {
	dir := os.Getenv(DaemonEnv)
	if dir == "" {
		return 0, false
	}
	_ = os.Unsetenv(DaemonEnv)
	if err := RunDaemon(dir); err != nil {
		fmt.Fprintf(os.Stderr, "%s %s: %v\n", time.Now().Format(time.RFC3339), BinaryName, err)
		return 1, true
	}
	return 0, true
}

// RunDaemon serves the agent whose data dir is dir until no agent is
// connected and no job runs (or no agent connected in its first 30 s).
func RunDaemon(dir string) error {
	// Orphans of the jobs (what a job left running when it ended) become
	// this process's children rather than init's: they are reaped here.
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		return fmt.Errorf("PR_SET_CHILD_SUBREAPER: %v", e)
	}
	// Handled, not ignored (an ignored signal would stay ignored in the
	// jobs after exec): a terminal's hang-up or interrupt must not end the
	// jobs' supervisor. SIGTERM and SIGKILL end it; jobs then are reported
	// failed by their agent.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGINT, syscall.SIGPIPE)
	go func() {
		for range sigs {
		}
	}()
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: SocketName(dir), Net: "unixpacket"})
	if err != nil {
		return fmt.Errorf("listen: %w", err) // another daemon serves dir
	}
	d := &daemon{dir: dir, uid: os.Getuid(), ln: ln, jobs: map[int]string{}, conns: map[*net.UnixConn]*peer{}, started: make(chan struct{}, 1)}
	_ = os.WriteFile(filepath.Join(dir, PIDFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644)
	go d.reap()
	time.AfterFunc(30*time.Second, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if !d.seen {
			d.exitIfIdle()
		}
	})
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			return fmt.Errorf("accept: %w", err)
		}
		if uid, err := PeerUID(c); err != nil || uid != d.uid {
			c.Close()
			continue
		}
		d.mu.Lock()
		p := newPeer(c)
		d.conns[c] = p
		d.seen = true
		d.mu.Unlock()
		go d.serve(c, p)
	}
}

// exitIfIdle ends the daemon when no agent is connected and no job runs
// (d.mu held).
func (d *daemon) exitIfIdle() {
	if len(d.conns) == 0 && len(d.jobs) == 0 {
		if b, err := os.ReadFile(filepath.Join(d.dir, PIDFile)); err == nil && string(b) == strconv.Itoa(os.Getpid())+"\n" {
			_ = os.Remove(filepath.Join(d.dir, PIDFile))
		}
		os.Exit(0)
	}
}

func (d *daemon) serve(c *net.UnixConn, p *peer) {
	buf, oob := RecvBuffers()
	defer func() {
		p.close()
		c.Close()
		d.mu.Lock()
		delete(d.conns, c)
		d.exitIfIdle()
		d.mu.Unlock()
	}()
	send := func(m *Msg) error { p.send(m); return nil }
	for {
		m, files, err := Recv(c, buf, oob)
		if err != nil {
			return
		}
		switch m.Op {
		case OpHello:
			err = send(&Msg{Op: OpHello, V: ProtocolVersion, PID: os.Getpid()})
		case OpList:
			// In parts of at most ~64 KiB: every packet stays under MaxMsg.
			d.mu.Lock()
			out, size := &Msg{Op: OpList}, 0
			for pid, key := range d.jobs {
				if size > 64<<10 {
					out.More = true
					_ = send(out)
					out, size = &Msg{Op: OpList}, 0
				}
				out.Jobs = append(out.Jobs, Job{Key: key, PID: pid})
				size += len(key) + 32
			}
			d.mu.Unlock()
			err = send(out)
		case OpStart:
			err = send(d.start(m, files))
		default:
			err = send(&Msg{Op: m.Op, Err: "unknown operation " + strconv.Quote(m.Op)})
		}
		for _, f := range files {
			f.Close()
		}
		if err != nil {
			return
		}
	}
}

// start starts a job: its answer. A job that cannot be executed ends at
// once with 127, as under a per-job supervisor (its error in its stderr).
func (d *daemon) start(m *Msg, files []*os.File) *Msg {
	if len(files) != 2 || m.Key == "" || m.Path == "" || len(m.Argv) == 0 {
		return &Msg{Op: OpStarted, Key: m.Key, Err: "a start needs a key, a path, argv, stdout and stderr"}
	}
	attr := &syscall.ProcAttr{Dir: m.Dir, Env: m.Env, Files: []uintptr{0, files[0].Fd(), files[1].Fd()},
		Sys: &syscall.SysProcAttr{Setpgid: true}}
	if m.Cred != "" {
		c, err := ParseCredential(m.Cred)
		if err != nil {
			return &Msg{Op: OpStarted, Key: m.Key, Err: err.Error()}
		}
		attr.Sys.Credential = c
	}
	d.mu.Lock()
	pid, err := ForkExecIn(m.Cgroups, m.Path, m.Argv, attr)
	if err == nil {
		d.jobs[pid] = m.Key // before the reaper can look it up (it takes d.mu)
	}
	d.mu.Unlock()
	if err != nil {
		fmt.Fprintf(files[1], "lattice: start %s: %v\n", m.Path, err)
		go d.ended(m.Key, 127)
		return &Msg{Op: OpStarted, Key: m.Key}
	}
	guardDaemonJob(pid, m.Key)
	select {
	case d.started <- struct{}{}:
	default:
	}
	return &Msg{Op: OpStarted, Key: m.Key, PID: pid}
}

// reap waits for every child (the jobs, and the orphans left to this
// subreaper) and records how each job ended.
func (d *daemon) reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil { // ECHILD: nothing to wait for until a job starts
			<-d.started
			continue
		}
		if !ws.Exited() && !ws.Signaled() {
			continue
		}
		code := WaitCode(ws)
		d.mu.Lock()
		key, ok := d.jobs[pid]
		d.mu.Unlock()
		if ok {
			unguardDaemonJob(pid)
			d.ended(key, code)
			d.mu.Lock()
			delete(d.jobs, pid)
			d.exitIfIdle()
			d.mu.Unlock()
		}
	}
}

// ended records a job's exit code in its status file (durably), then
// tells every connected agent.
func (d *daemon) ended(key string, code int) {
	if err := WriteStatus(key, code); err != nil {
		fmt.Fprintf(os.Stderr, "%s %s: record exit status %d in %s: %v\n", time.Now().Format(time.RFC3339), BinaryName, code, key, err)
	}
	d.mu.Lock()
	for _, p := range d.conns {
		p.send(&Msg{Op: OpExit, Key: key, Code: code})
	}
	d.mu.Unlock()
}

// peer queues the messages to one agent and writes them in order from its
// own goroutine: an agent that does not read (frozen, stopped) must not
// hold up the reaper, nor the other agents' exits.
type peer struct {
	c    *net.UnixConn
	mu   sync.Mutex
	q    []*Msg
	done bool
	wake chan struct{}
}

func newPeer(c *net.UnixConn) *peer {
	p := &peer{c: c, wake: make(chan struct{}, 1)}
	go p.write()
	return p
}

func (p *peer) send(m *Msg) {
	p.mu.Lock()
	if !p.done {
		p.q = append(p.q, m)
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *peer) close() {
	p.mu.Lock()
	p.done, p.q = true, nil
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *peer) write() {
	for range p.wake {
		for {
			p.mu.Lock()
			if p.done {
				p.mu.Unlock()
				return
			}
			if len(p.q) == 0 {
				p.mu.Unlock()
				break
			}
			m := p.q[0]
			p.q[0] = nil
			p.q = p.q[1:]
			p.mu.Unlock()
			if err := Send(p.c, m); err != nil {
				p.c.Close() // its reader ends, and serve drops it
				p.close()
				return
			}
		}
	}
}

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER (linux/prctl.h; not in package syscall).
const prSetChildSubreaper = 36
