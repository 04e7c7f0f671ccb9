package scale

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// member is one `latticed server` process of the harness's quorum.
type member struct {
	id                 string
	dir                string
	raft, api, metrics string
	args               []string
	cmd                *exec.Cmd
	conn               *grpc.ClientConn
	allocs             latticev1.AllocationServiceClient
	admin              latticev1.AdminServiceClient
	nodes              latticev1.NodeServiceClient
	done               chan struct{}
}

// cluster is the harness's processes: three members and the agents.
type cluster struct {
	bin     string
	dir     string
	log     func(format string, args ...any)
	members []*member
	agents  []*exec.Cmd
	// agentDirs are the agents' data dirs (their job supervisor daemons'
	// pid files).
	agentDirs []string
	// agentPprof: every agent serves Go profiles on a free loopback port
	// (--pprof-addr; ps shows it).
	agentPprof bool
	mu         sync.Mutex
}

// freePorts returns n distinct free loopback ports.
func freePorts(n int) ([]string, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	out := make([]string, n)
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		out[i] = l.Addr().String()
	}
	return out, nil
}

// startQuorum starts three members: m1 bootstraps, m2 and m3 join.
func (c *cluster) startQuorum(ctx context.Context, extra []string) error {
	ports, err := freePorts(9)
	if err != nil {
		return err
	}
	for i := range 3 {
		m := &member{id: fmt.Sprintf("m%d", i+1), dir: filepath.Join(c.dir, fmt.Sprintf("m%d", i+1)),
			raft: ports[3*i], api: ports[3*i+1], metrics: ports[3*i+2]}
		m.args = append([]string{"--log-level", "warn", "server", "--id", m.id, "--data-dir", m.dir,
			"--raft-addr", m.raft, "--api-addr", m.api, "--metrics-addr", m.metrics}, extra...)
		if i == 0 {
			m.args = append(m.args, "--bootstrap")
		} else {
			m.args = append(m.args, "--join", c.members[0].api)
		}
		c.members = append(c.members, m)
		if err := c.start(m); err != nil {
			return err
		}
		if err := c.waitReady(ctx, m, 60*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// start runs a member's process (again, after a kill).
func (c *cluster) start(m *member) error {
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(c.dir, m.id+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.bin, m.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", m.id, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	c.mu.Lock()
	m.cmd, m.done = cmd, done
	c.mu.Unlock()
	if m.conn == nil {
		conn, err := grpc.NewClient(m.api, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
		if err != nil {
			return err
		}
		m.conn = conn
		m.allocs = latticev1.NewAllocationServiceClient(conn)
		m.admin = latticev1.NewAdminServiceClient(conn)
		m.nodes = latticev1.NewNodeServiceClient(conn)
	}
	return nil
}

// kill stops a member at once (SIGKILL), as a crash would.
func (c *cluster) kill(m *member) {
	c.mu.Lock()
	cmd, done := m.cmd, m.done
	c.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// pid of a member's process (0 when not running).
func (m *member) pid() int {
	if m.cmd == nil || m.cmd.Process == nil {
		return 0
	}
	select {
	case <-m.done:
		return 0
	default:
	}
	return m.cmd.Process.Pid
}

// status asks one member about itself.
func (m *member) status(ctx context.Context) (*latticev1.QuorumStatusResponse, error) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return m.admin.QuorumStatus(cctx, &latticev1.QuorumStatusRequest{})
}

// waitReady waits until m answers and knows a leader.
func (c *cluster) waitReady(ctx context.Context, m *member, within time.Duration) error {
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		st, err := m.status(ctx)
		if err == nil && st.LeaderId != "" {
			return nil
		}
		if m.pid() == 0 {
			b, _ := os.ReadFile(filepath.Join(c.dir, m.id+".log"))
			return fmt.Errorf("member %s exited: %s", m.id, strings.TrimSpace(string(b[max(0, len(b)-2000):])))
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("member %s not ready after %s (last error: %v; see %s)", m.id, within, last, filepath.Join(c.dir, m.id+".log"))
}

// leader finds the leading member, asking the running ones.
func (c *cluster) leader(ctx context.Context) (*member, error) {
	for _, m := range c.members {
		if m.pid() == 0 {
			continue
		}
		st, err := m.status(ctx)
		if err != nil || st.LeaderId == "" {
			continue
		}
		for _, l := range c.members {
			if l.id == st.LeaderId && l.pid() != 0 {
				return l, nil
			}
		}
	}
	return nil, fmt.Errorf("no leader")
}

// startAgents starts n agent processes simulating nodes in total, split as
// evenly as they go, each with its own groups and node names.
func (c *cluster) startAgents(nodes, n, groupSize int, split func(k int) string, virtual bool) error {
	servers := make([]string, len(c.members))
	for i, m := range c.members {
		servers[i] = m.api
	}
	firstGroup := 0
	for i := range n {
		k := nodes / n
		if i < nodes%n {
			k++
		}
		if k == 0 {
			continue
		}
		id := fmt.Sprintf("agent%d", i+1)
		args := []string{"--log-level", "warn", "agent", "--server", strings.Join(servers, ","), "--id", id,
			"--data-dir", filepath.Join(c.dir, id), "--simulate", strconv.Itoa(k), "--group-size", strconv.Itoa(groupSize),
			"--first-group", strconv.Itoa(firstGroup), "--name", fmt.Sprintf("a%02dn", i+1), "--vcluster", split(k),
			"--heartbeat", "10s"}
		if virtual {
			args = append(args, "--virtual-runs")
		}
		if c.agentPprof {
			port, err := freePorts(1)
			if err != nil {
				return err
			}
			args = append(args, "--pprof-addr", port[0])
		}
		firstGroup += (k + groupSize - 1) / groupSize
		logf, err := os.Create(filepath.Join(c.dir, id+".log"))
		if err != nil {
			return err
		}
		cmd := exec.Command(c.bin, args...)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start %s: %w", id, err)
		}
		go func() { _ = cmd.Wait(); logf.Close() }()
		c.agents = append(c.agents, cmd)
		c.agentDirs = append(c.agentDirs, filepath.Join(c.dir, id))
	}
	return nil
}

// stop ends every process the harness started (its own, by pid).
func (c *cluster) stop() {
	for _, a := range c.agents {
		if a.Process != nil {
			_ = syscall.Kill(-a.Process.Pid, syscall.SIGTERM)
		}
	}
	for _, m := range c.members {
		if pid := m.pid(); pid != 0 {
			_ = m.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-m.done:
			case <-time.After(10 * time.Second):
				_ = m.cmd.Process.Signal(syscall.SIGKILL)
			}
		}
		if m.conn != nil {
			m.conn.Close()
		}
	}
	time.Sleep(500 * time.Millisecond)
	for _, a := range c.agents {
		if a.Process != nil && a.ProcessState == nil {
			_ = syscall.Kill(-a.Process.Pid, syscall.SIGKILL)
		}
	}
}

// waitNodes waits until want nodes are Ready, as the leader sees them.
func (c *cluster) waitNodes(ctx context.Context, want int, within time.Duration) error {
	deadline := time.Now().Add(within)
	got := 0
	for time.Now().Before(deadline) {
		if l, err := c.leader(ctx); err == nil {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			resp, err := l.nodes.List(cctx, &latticev1.ListNodesRequest{States: []string{"Ready"}})
			cancel()
			if err == nil {
				got = len(resp.Nodes)
				if got >= want {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return fmt.Errorf("only %d of %d nodes Ready after %s (agent logs in %s)", got, want, within, c.dir)
}
