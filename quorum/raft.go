package quorum

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// Errors a proposal can end with. The server maps them to gRPC codes; none
// of them carries a raw Raft error string to users.
var (
	// ErrNotLeader: this member is not the leader; nothing was applied.
	ErrNotLeader = errors.New("not the quorum leader")
	// ErrUnknownOutcome: leadership was lost while the command was in
	// flight; it may or may not be committed. Retry with the same request id.
	ErrUnknownOutcome = errors.New("leadership lost while applying; outcome unknown, retry with the same request id")
	// ErrShutdown: the member is shutting down.
	ErrShutdown = errors.New("quorum member is shutting down")
	// ErrDataDirLocked: another process holds the data dir.
	ErrDataDirLocked = errors.New("data dir is in use by another latticed process")
)

// Config configures one quorum member.
type Config struct {
	ID      string // unique member id
	DataDir string // holds raft/raft.db and snapshots/
	// RaftAddr is the address to bind and advertise for Raft traffic.
	RaftAddr string
	// InMemTransport uses an in-process transport (single member, dev mode).
	InMemTransport bool
	// Bootstrap makes this member form a new cluster of itself, only when it
	// has no Raft state yet.
	Bootstrap bool
	Logger    *slog.Logger

	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	// CommitTimeout is how long the leader's replication to a follower
	// waits without new entries before it sends one carrying only the
	// commit index (hashicorp/raft's CommitTimeout, staggered up to twice
	// that). New entries are sent at once whatever it is, so it bounds
	// only how late an idle follower learns of the last commit; default
	// 50 ms, hashicorp/raft's own (5 ms sent ~130 empty appends a second
	// to each follower, each waking both ends on a loaded machine).
	CommitTimeout     time.Duration
	SnapshotInterval  time.Duration
	SnapshotThreshold uint64
	TrailingLogs      uint64
	// ApplyTimeout bounds how long a proposal may wait to be enqueued.
	ApplyTimeout time.Duration
	// NoSync skips fsync of the log (benchmarks and tests of logic only).
	NoSync bool
	// LockTimeout bounds the wait for the bolt file lock.
	LockTimeout time.Duration
	// FaultInjection wraps the transport so tests can cut links (Partition).
	FaultInjection bool
	// RaftLogLevel is the level of hashicorp/raft's own log lines on
	// stderr: trace, debug, info, warn (default), error or off.
	RaftLogLevel string
	// TLS, when set, carries Raft traffic over TLS with this configuration
	// (pki.Peer: member certificates required at both ends).
	TLS *tls.Config
	// ClusterSecret, when set, must be proven by every Raft connection
	// (secret.go); without it and without TLS the Raft address must be
	// loopback.
	ClusterSecret string
	// Entropy is the randomness of the cluster-secret handshake's
	// challenges (crypto/rand.Reader; this package draws none itself).
	Entropy io.Reader
	// PinLevel, when set, caps the feature level this member advertises
	// and proposes at (gate.go, AdvertisedLevel): while a rolling upgrade
	// may still be rolled back, members pinned to the previous release's
	// level never commit an entry that release cannot read.
	PinLevel *Level
}

func (c *Config) defaults() {
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = 500 * time.Millisecond
	}
	if c.ElectionTimeout == 0 {
		c.ElectionTimeout = 500 * time.Millisecond
	}
	if c.LeaderLeaseTimeout == 0 {
		c.LeaderLeaseTimeout = 250 * time.Millisecond
	}
	if c.CommitTimeout == 0 {
		c.CommitTimeout = 50 * time.Millisecond
	}
	if c.SnapshotInterval == 0 {
		c.SnapshotInterval = 2 * time.Minute
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = 8192
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = 10240
	}
	if c.ApplyTimeout == 0 {
		c.ApplyTimeout = 5 * time.Second
	}
	if c.LockTimeout == 0 {
		c.LockTimeout = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Quorum is one member: Raft over a bolt log, with the FSM.
type Quorum struct {
	cfg       Config
	fsm       *FSM
	raft      *raft.Raft
	store     *raftboltdb.BoltStore
	transport raft.Transport
	snapshots raft.SnapshotStore
	faults    *FaultTransport
	// diskFaults wraps the log store with fault injection (nil otherwise).
	diskFaults *faultLogStore
	log        *slog.Logger

	levelsMu sync.Mutex
	levels   MemberLevels // SetMemberLevels; gate.go
}

// Open starts a member. It bootstraps a single-member cluster when asked
// and the data dir holds no Raft state yet.
func Open(cfg Config, fsm *FSM) (*Quorum, error) {
	cfg.defaults()
	if cfg.ID == "" {
		return nil, errors.New("quorum: member id is required")
	}
	if err := os.MkdirAll(filepath.Join(cfg.DataDir, "raft"), 0o755); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.TrailingLogs = cfg.TrailingLogs
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 256
	level := hclog.LevelFromString(cfg.RaftLogLevel)
	if level == hclog.NoLevel {
		level = hclog.Warn
	}
	rc.Logger = hclog.New(&hclog.LoggerOptions{Name: "raft", Level: level, Output: os.Stderr})
	rc.NoSnapshotRestoreOnStart = false

	store, err := raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(cfg.DataDir, "raft", "raft.db"),
		BoltOptions: &bbolt.Options{Timeout: cfg.LockTimeout, NoFreelistSync: true},
		NoSync:      cfg.NoSync,
	})
	if err != nil {
		if errors.Is(err, bbolt.ErrTimeout) {
			return nil, fmt.Errorf("%w: %s (bolt lock timeout after %s)", ErrDataDirLocked, cfg.DataDir, cfg.LockTimeout)
		}
		return nil, fmt.Errorf("open raft log in %s: %w", cfg.DataDir, err)
	}
	q := &Quorum{cfg: cfg, fsm: fsm, store: store, log: cfg.Logger}
	fail := func(err error) (*Quorum, error) {
		_ = store.Close()
		if q.transport != nil {
			if c, ok := q.transport.(io.Closer); ok {
				_ = c.Close()
			}
		}
		return nil, err
	}
	q.snapshots, err = raft.NewFileSnapshotStore(cfg.DataDir, 3, io.Discard)
	if err != nil {
		return fail(fmt.Errorf("snapshot store in %s: %w", cfg.DataDir, err))
	}
	var advertise raft.ServerAddress
	if cfg.InMemTransport {
		addr, tr := raft.NewInmemTransport(raft.ServerAddress("inmem:" + cfg.ID))
		q.transport, advertise = tr, addr
	} else {
		tr, terr := newRaftTransport(&cfg, q.log)
		if terr != nil {
			return fail(fmt.Errorf("listen for raft on %s: %w", cfg.RaftAddr, terr))
		}
		q.transport, advertise = tr, tr.LocalAddr()
	}
	if cfg.FaultInjection {
		q.faults = NewFaultTransport(q.transport)
		q.transport = q.faults
	}
	if cfg.Bootstrap {
		has, herr := raft.HasExistingState(store, store, q.snapshots)
		if herr != nil {
			return fail(fmt.Errorf("inspect raft state: %w", herr))
		}
		if !has {
			conf := raft.Configuration{Servers: []raft.Server{{ID: rc.LocalID, Address: advertise, Suffrage: raft.Voter}}}
			if berr := raft.BootstrapCluster(rc, store, store, q.snapshots, q.transport, conf); berr != nil {
				return fail(fmt.Errorf("bootstrap: %w", berr))
			}
			q.log.Info("quorum bootstrapped", "id", cfg.ID, "raft_addr", advertise)
		}
	}
	var logs raft.LogStore = store
	if cfg.FaultInjection {
		q.diskFaults = &faultLogStore{LogStore: store}
		logs = q.diskFaults
	}
	// The last entries stay in memory too: the leader's replication reads
	// each entry it sends, and without the cache every read is a bolt
	// transaction. The cache is filled only after a successful store.
	logs, err = raft.NewLogCache(logCacheEntries, logs)
	if err != nil {
		return fail(fmt.Errorf("raft log cache: %w", err))
	}
	if err := checkDataFormat(cfg.DataDir, q.snapshots, store); err != nil {
		return fail(err)
	}
	r, err := raft.NewRaft(rc, fsm, logs, store, q.snapshots, q.transport)
	if err != nil {
		return fail(fmt.Errorf("start raft: %w", err))
	}
	q.raft = r
	return q, nil
}

// Partition cuts Raft traffic to and from the given members (empty heals).
// It fails unless the member runs with fault injection.
func (q *Quorum) Partition(ids []string) error {
	if q.faults == nil {
		return errors.New("fault injection is off on this member (start it with --fault-injection)")
	}
	q.faults.Block(ids)
	return nil
}

// PartitionedFrom reports whether the link to member id is cut.
func (q *Quorum) PartitionedFrom(id string) bool {
	return q.faults != nil && q.faults.Blocked(id)
}

// FSM returns the member's state machine.
func (q *Quorum) FSM() *FSM { return q.fsm }

// ID is this member's id.
func (q *Quorum) ID() string { return q.cfg.ID }

// RaftAddr is the address other members reach this one at.
func (q *Quorum) RaftAddr() string { return string(q.transport.LocalAddr()) }

// View gives read access to the committed state.
func (q *Quorum) View(fn func(*State)) { q.fsm.View(fn) }

// IsLeader reports whether this member leads now.
func (q *Quorum) IsLeader() bool { return q.raft.State() == raft.Leader }

// Leader returns the current leader's id and Raft address, empty if unknown.
func (q *Quorum) Leader() (id, addr string) {
	a, i := q.raft.LeaderWithID()
	return string(i), string(a)
}

// LeaderCh reports leadership gained (true) and lost (false). Only one
// consumer may read it.
func (q *Quorum) LeaderCh() <-chan bool { return q.raft.LeaderCh() }

// Barrier waits until every entry committed before it is applied here.
func (q *Quorum) Barrier(timeout time.Duration) error {
	return q.mapErr(q.raft.Barrier(timeout).Error())
}

// Propose submits a command through Raft and returns its result. The
// command's header time must be set by the caller (the leader mints it).
func (q *Quorum) Propose(ctx context.Context, c Command) (*Result, error) {
	if c.CommandHeader().Time.IsZero() {
		return nil, fmt.Errorf("quorum: %s proposed without a time", c.Type())
	}
	if q.raft.State() != raft.Leader {
		return nil, ErrNotLeader
	}
	if err := q.RequireLevel(ctx, NeededLevel(c), c.Type().String()); err != nil {
		return nil, err
	}
	data, err := Encode(c)
	if err != nil {
		return nil, err
	}
	// The timeout bounds only the wait to enqueue; once enqueued the entry
	// commits or leadership is lost.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f := q.raft.Apply(data, q.cfg.ApplyTimeout)
	if err := q.mapErr(f.Error()); err != nil {
		return nil, err
	}
	r, ok := f.Response().(*Result)
	if !ok {
		return nil, fmt.Errorf("quorum: %s returned %T", c.Type(), f.Response())
	}
	return r, nil
}

func (q *Quorum) mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrEnqueueTimeout), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return ErrNotLeader
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrAbortedByRestore):
		return ErrUnknownOutcome
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrShutdown
	}
	return fmt.Errorf("quorum: %w", err)
}

// ServerInfo is one member as Raft's configuration lists it.
type ServerInfo struct {
	ID       string
	RaftAddr string
	Voter    bool
}

// Servers lists the Raft configuration.
func (q *Quorum) Servers() ([]ServerInfo, error) {
	f := q.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, q.mapErr(err)
	}
	var out []ServerInfo
	for _, s := range f.Configuration().Servers {
		out = append(out, ServerInfo{ID: string(s.ID), RaftAddr: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	return out, nil
}

// AddVoter adds (or updates) a voting member. Leader only.
func (q *Quorum) AddVoter(id, raftAddr string, timeout time.Duration) error {
	return q.mapErr(q.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, timeout).Error())
}

// AddNonvoter adds a member that replicates but does not vote.
func (q *Quorum) AddNonvoter(id, raftAddr string, timeout time.Duration) error {
	return q.mapErr(q.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, timeout).Error())
}

// RemoveServer removes a member. Leader only.
func (q *Quorum) RemoveServer(id string, timeout time.Duration) error {
	return q.mapErr(q.raft.RemoveServer(raft.ServerID(id), 0, timeout).Error())
}

// TransferLeadership hands leadership to id (any member when empty).
func (q *Quorum) TransferLeadership(id string) error {
	if id == "" {
		return q.mapErr(q.raft.LeadershipTransfer().Error())
	}
	var addr raft.ServerAddress
	servers, err := q.Servers()
	if err != nil {
		return err
	}
	for _, s := range servers {
		if s.ID == id {
			addr = raft.ServerAddress(s.RaftAddr)
		}
	}
	if addr == "" {
		return fmt.Errorf("no quorum member %q", id)
	}
	return q.mapErr(q.raft.LeadershipTransferToServer(raft.ServerID(id), addr).Error())
}

// Stats returns Raft's counters (term, commit index, ...).
func (q *Quorum) Stats() map[string]string { return q.raft.Stats() }

// Term is the current Raft term.
func (q *Quorum) Term() uint64 { return q.raft.CurrentTerm() }

// CommitIndex is the highest committed log index known here.
func (q *Quorum) CommitIndex() uint64 { return q.raft.CommitIndex() }

// AppliedIndex is the highest index applied to the FSM.
func (q *Quorum) AppliedIndex() uint64 { return q.raft.AppliedIndex() }

// State is the member's Raft role: leader, follower, candidate or shutdown.
func (q *Quorum) State() string { return strings.ToLower(q.raft.State().String()) }

// LastContact is when this member last heard from the leader.
func (q *Quorum) LastContact() time.Time { return q.raft.LastContact() }

// Snapshot forces a Raft snapshot now.
func (q *Quorum) Snapshot() error {
	err := q.raft.Snapshot().Error()
	if err != nil && strings.Contains(err.Error(), "nothing new to snapshot") {
		return nil
	}
	return q.mapErr(err)
}

// Shutdown stops Raft and closes the log.
func (q *Quorum) Shutdown() error {
	err := q.raft.Shutdown().Error()
	if c, ok := q.transport.(io.Closer); ok {
		_ = c.Close()
	}
	if cerr := q.store.Close(); err == nil {
		err = cerr
	}
	return err
}

// logCacheEntries is how many of the newest log entries the member keeps in
// memory in front of bolt (a few seconds of entries at the scale harness's
// load; each entry is a command of a few hundred bytes to a few MiB).
const logCacheEntries = 512
