package quorum

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/latticehpc/lattice/model"
)

// Benchmarks of issue 3: a three-member quorum in one process, over real
// TCP on loopback, raft-boltdb on disk with fsync on (as in production).
//
//	go test -run '^$' -bench 'ThreeMembers|SubmitLatency' -count 5 ./quorum/
//
// BenchmarkPlacementsThreeMembers and BenchmarkRawRaftNoopThreeMembers run
// the same workload shape — benchSchedulers goroutines, each one cycle after
// another proposing an AssignBatch-sized entry and then an
// UpdateAllocs-sized entry — through our FSM and through a no-op FSM, so
// placements/s of the one compares with items/s of the other. An op is one
// placement (one assignment item).
//
// Everything heavy is set up inside the benchmark functions, so
// `go test ./...` (which runs no benchmarks) never pays for it.

const (
	benchSchedulers      = 4     // vCluster scheduler goroutines, one vCluster and node set each
	benchNodes           = 20000 // nodes in the cluster, split evenly over the vClusters
	benchNodesPerCommand = 1000  // nodes per RegisterNodes command when preloading
	benchSubmitClients   = 8     // concurrent submitters in BenchmarkSubmitLatency
)

// benchBatchSizes are the AssignBatch sizes reported as sub-benchmarks.
var benchBatchSizes = []int{64, 256, 1024}

// benchFreeAddr returns a free 127.0.0.1 port. Raft advertises the address
// it binds, so ":0" will not do.
func benchFreeAddr(b testing.TB) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func benchWait(b testing.TB, timeout time.Duration, what string, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// processCPU is the CPU time (user + system) this process has used.
func processCPU(b testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// --- our quorum ---------------------------------------------------------------------

// benchTrio is three quorum members in this process. members[0] was
// bootstrapped; any may lead later.
type benchTrio struct {
	members []*Quorum
	now     time.Time // last minted command time, strictly increasing
	mu      sync.Mutex
	// leaderChanges counts proposals that met a leader change; benchmarks
	// report it, as such a run measures an election too.
	leaderChanges atomic.Int64
	seq           int // request ids of setup submissions
}

func startBenchTrio(b *testing.B) *benchTrio {
	b.Helper()
	dir := b.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	t := &benchTrio{}
	for i := range 3 {
		id := fmt.Sprintf("m%d", i+1)
		q, err := Open(Config{ID: id, DataDir: filepath.Join(dir, id), RaftAddr: benchFreeAddr(b),
			Bootstrap: i == 0, Logger: log, RaftLogLevel: "off"}, NewFSM())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = q.Shutdown() })
		t.members = append(t.members, q)
		if i == 0 {
			benchWait(b, 10*time.Second, "the bootstrapped member to lead", q.IsLeader)
		}
	}
	for _, q := range t.members[1:] {
		if err := t.members[0].AddVoter(q.ID(), q.RaftAddr(), 10*time.Second); err != nil {
			b.Fatalf("add voter %s: %v", q.ID(), err)
		}
	}
	t.waitApplied(b)
	return t
}

// leader returns the member leading now, waiting for an election if none
// does (three members sharing two busy cores can lose the 250 ms lease).
func (t *benchTrio) leader() *Quorum {
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, q := range t.members {
			if q.IsLeader() {
				return q
			}
		}
		if time.Now().After(deadline) {
			return t.members[0] // its Propose answers ErrNotLeader
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stamp mints a command time on the "leader", as the server does.
func (t *benchTrio) stamp(c Command) Command {
	t.mu.Lock()
	now := time.Now().UTC()
	if !now.After(t.now) {
		now = t.now.Add(time.Nanosecond)
	}
	t.now = now
	t.mu.Unlock()
	c.CommandHeader().Time = now
	return c
}

// propose proposes c to the current leader. ErrNotLeader means nothing was
// enqueued, so it tries again on the next leader; ErrUnknownOutcome goes to
// the caller, who knows whether c may be repeated. Every failed attempt
// counts as a leader change.
func (t *benchTrio) propose(c Command) (*Result, error) {
	for attempt := 0; ; attempt++ {
		r, err := t.leader().Propose(context.Background(), t.stamp(c))
		if errors.Is(err, ErrNotLeader) && attempt < 100 {
			t.leaderChanges.Add(1)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if err != nil {
			if errors.Is(err, ErrUnknownOutcome) {
				t.leaderChanges.Add(1)
			}
			return nil, fmt.Errorf("%s: %w", c.Type(), err)
		}
		if r.Rejection != nil {
			return r, fmt.Errorf("%s rejected: %s", c.Type(), r.Rejection.Message)
		}
		return r, nil
	}
}

// mustPropose proposes a setup command, repeating it after an ambiguous
// failure: setup commands are idempotent or carry a request id.
func (t *benchTrio) mustPropose(b *testing.B, c Command) *Result {
	b.Helper()
	for attempt := 0; ; attempt++ {
		r, err := t.propose(c)
		if errors.Is(err, ErrUnknownOutcome) && attempt < 10 {
			continue
		}
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
}

// waitApplied waits until every member applied everything the leader has.
func (t *benchTrio) waitApplied(b *testing.B) {
	b.Helper()
	for attempt := 0; ; attempt++ {
		err := t.leader().Barrier(30 * time.Second)
		if err == nil {
			break
		}
		if attempt == 10 {
			b.Fatalf("barrier: %v", err)
		}
	}
	want := t.leader().AppliedIndex()
	benchWait(b, 60*time.Second, "all three members to apply the log", func() bool {
		for _, q := range t.members {
			if q.AppliedIndex() < want {
				return false
			}
			if s, err := q.Servers(); err != nil || len(s) != 3 {
				return false
			}
		}
		return true
	})
}

func benchVClusterName(w int) string { return fmt.Sprintf("vc%d", w) }

func benchNodeName(w, i int) string { return fmt.Sprintf("%s-n%05d", benchVClusterName(w), i) }

// preload creates benchSchedulers vClusters and benchNodes nodes, as the
// quorum would receive them: through commands.
func (t *benchTrio) preload(b *testing.B) {
	b.Helper()
	for w := range benchSchedulers {
		t.mustPropose(b, &SetVCluster{VCluster: model.VCluster{Name: benchVClusterName(w), Type: model.TypeHPCBatch, ReservationDepth: 1}})
	}
	perVC := benchNodes / benchSchedulers
	for w := range benchSchedulers {
		for from := 0; from < perVC; from += benchNodesPerCommand {
			var nodes []model.Node
			for i := from; i < min(perVC, from+benchNodesPerCommand); i++ {
				nodes = append(nodes, model.Node{Name: benchNodeName(w, i), HomeVCluster: benchVClusterName(w),
					Group: i / 512, Fingerprint: "fp1", Features: []string{"sim"}, IdleWatts: 100, BusyWatts: 400})
			}
			t.mustPropose(b, &RegisterNodes{Agent: fmt.Sprintf("agent-%d-%d", w, from), Nodes: nodes})
		}
	}
	t.waitApplied(b)
}

// submitPending submits n pending one-node allocations to vCluster vc as
// job arrays (one command per MaxArrayTasks) and returns their ids.
func (t *benchTrio) submitPending(b *testing.B, vc string, n int) []uint64 {
	b.Helper()
	var ids []uint64
	for n > 0 {
		k := min(n, model.MaxArrayTasks)
		t.seq++
		r := t.mustPropose(b, &Submit{Header: Header{RequestID: fmt.Sprintf("bench-setup-%d", t.seq)}, Items: []SubmitItem{{Request: model.Request{VCluster: vc, Command: []string{"true"},
			NodesMin: 1, Walltime: time.Hour, Array: &model.ArraySpec{Start: 0, End: k - 1, Step: 1}}}}})
		ids = append(ids, r.IDs...)
		n -= k
	}
	return ids
}

// pruneEnded drops every ended allocation so the next run starts from the
// same state size.
func (t *benchTrio) pruneEnded(b *testing.B) {
	b.Helper()
	t.mustPropose(b, &Prune{Before: time.Now().Add(time.Hour)})
}

// assignBatch is what a vCluster scheduler proposes in one cycle: ids[i]
// onto nodes[i], computed from version.
func assignBatch(vc string, ids []uint64, nodes []string, version uint64) *AssignBatch {
	c := &AssignBatch{VCluster: vc, Items: make([]AssignItem, len(ids))}
	for i, id := range ids {
		c.Items[i] = AssignItem{AllocID: id, Nodes: []string{nodes[i]}, Version: version}
	}
	return c
}

// completeBatch reports the allocations of one cycle as completed, which
// frees their nodes.
func completeBatch(ids []uint64) *UpdateAllocs {
	zero := 0
	c := &UpdateAllocs{Updates: make([]AllocUpdate, len(ids))}
	for i, id := range ids {
		c.Updates[i] = AllocUpdate{AllocID: id, State: model.StateCompleted, ExitCode: &zero}
	}
	return c
}

// place is one scheduling cycle of one vCluster: it proposes one
// AssignBatch of ids onto nodes (one node each) computed from the current
// version, then completes them with one UpdateAllocs, and returns how many
// were placed. After an ambiguous failure (leadership lost mid-apply) it
// proposes the batch again from a fresh version; the items the lost attempt
// had committed then come back rejected and are found staging on their node.
func (t *benchTrio) place(vc string, ids []uint64, nodes []string) (int, error) {
	var r *Result
	for attempt := 0; ; attempt++ {
		leader := t.leader()
		if attempt > 0 {
			_ = leader.Barrier(10 * time.Second)
		}
		var version uint64
		leader.View(func(s *State) { version = s.Version })
		var err error
		r, err = t.propose(assignBatch(vc, ids, nodes, version))
		if errors.Is(err, ErrUnknownOutcome) && attempt < 10 {
			continue
		}
		if err != nil {
			return 0, err
		}
		break
	}
	placed, notPlaced := 0, ""
	t.leader().View(func(s *State) {
		for i, it := range r.Items {
			if a := s.Allocation(it.ID); it.Committed || (a != nil && a.State == model.StateStaging && slices.Equal(a.Nodes, nodes[i:i+1])) {
				placed++
			} else if notPlaced == "" {
				notPlaced = fmt.Sprintf("allocation %d not placed: %s", it.ID, it.Rejection.Message)
			}
		}
	})
	if notPlaced != "" {
		return placed, errors.New(notPlaced)
	}
	for attempt := 0; ; attempt++ {
		u, err := t.propose(completeBatch(ids)) // a repeated report is idempotent
		if errors.Is(err, ErrUnknownOutcome) && attempt < 10 {
			continue
		}
		if err != nil {
			return placed, err
		}
		for _, it := range u.Items {
			if !it.Committed {
				return placed, fmt.Errorf("allocation %d not completed: %s", it.ID, it.Rejection.Message)
			}
		}
		return placed, nil
	}
}

// shares splits n ops over benchSchedulers workers.
func shares(n int) []int {
	out := make([]int, benchSchedulers)
	for w := range out {
		out[w] = n / benchSchedulers
		if w < n%benchSchedulers {
			out[w]++
		}
	}
	return out
}

// BenchmarkPlacementsThreeMembers measures committed placements per second
// through a three-member quorum when vCluster schedulers batch: each of
// benchSchedulers goroutines owns one vCluster (5,000 of the 20,000 nodes)
// and, cycle after cycle, reads the current state version, proposes one
// AssignBatch of B one-node items computed from it, then completes the
// batch with one UpdateAllocs (to keep the state bounded). Only committed
// assignment items count. Pending allocations are submitted before the
// timer starts and pruned after it stops.
func BenchmarkPlacementsThreeMembers(b *testing.B) {
	trio := startBenchTrio(b)
	trio.preload(b)
	for _, batch := range benchBatchSizes {
		b.Run(fmt.Sprintf("B=%d", batch), func(b *testing.B) {
			b.ReportAllocs()
			share := shares(b.N)
			pending := make([][]uint64, benchSchedulers)
			for w := range benchSchedulers {
				pending[w] = trio.submitPending(b, benchVClusterName(w), share[w])
			}
			trio.waitApplied(b)
			var committed, entries atomic.Int64
			errs := make(chan error, benchSchedulers)
			changes0 := trio.leaderChanges.Load()
			b.ResetTimer()
			start, cpu0 := time.Now(), processCPU(b)
			var wg sync.WaitGroup
			for w := range benchSchedulers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					vc := benchVClusterName(w)
					nodes := make([]string, benchNodes/benchSchedulers)
					for i := range nodes {
						nodes[i] = benchNodeName(w, i)
					}
					ids := pending[w]
					for off := 0; len(ids) > 0; off = (off + batch) % (len(nodes) - batch) {
						cycle := ids[:min(batch, len(ids))]
						ids = ids[len(cycle):]
						placed, err := trio.place(vc, cycle, nodes[off:off+len(cycle)])
						committed.Add(int64(placed))
						if err != nil {
							errs <- err
							return
						}
						entries.Add(2)
					}
				}()
			}
			wg.Wait()
			elapsed, cpu := time.Since(start), processCPU(b)-cpu0
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			if int(committed.Load()) != b.N {
				b.Fatalf("%d placements committed, want %d", committed.Load(), b.N)
			}
			b.ReportMetric(float64(committed.Load())/elapsed.Seconds(), "placements/s")
			b.ReportMetric(float64(entries.Load())/elapsed.Seconds(), "entries/s")
			b.ReportMetric(cpu.Seconds()/elapsed.Seconds(), "cpu_cores")
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu_us/placement")
			b.ReportMetric(float64(trio.leaderChanges.Load()-changes0), "leader_changes")
			trio.pruneEnded(b)
			trio.waitApplied(b)
		})
	}
}

// --- raw hashicorp/raft -------------------------------------------------------------

// noopFSM is the baseline: Apply does nothing.
type noopFSM struct{}

func (noopFSM) Apply(*raft.Log) any                 { return nil }
func (noopFSM) Snapshot() (raft.FSMSnapshot, error) { return noopSnapshot{}, nil }
func (noopFSM) Restore(rc io.ReadCloser) error      { return rc.Close() }

type noopSnapshot struct{}

func (noopSnapshot) Persist(sink raft.SnapshotSink) error { return sink.Close() }
func (noopSnapshot) Release()                             {}

// rawMember is a hashicorp/raft member set up as Open sets up ours (same
// timeouts, BatchApplyCh, MaxAppendEntries, bolt options with fsync, TCP
// transport pool) but over a no-op FSM and without Open's log cache.
type rawMember struct {
	raft  *raft.Raft
	store *raftboltdb.BoltStore
	tr    *raft.NetworkTransport
}

func openRawMember(b *testing.B, id, dir string, bootstrap bool) *rawMember {
	b.Helper()
	var cfg Config
	cfg.defaults()
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(id)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.TrailingLogs = cfg.TrailingLogs
	rc.BatchApplyCh = true    // as Open
	rc.MaxAppendEntries = 256 // as Open
	rc.Logger = hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Off, Output: io.Discard})
	if err := os.MkdirAll(filepath.Join(dir, "raft"), 0o755); err != nil {
		b.Fatal(err)
	}
	store, err := raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(dir, "raft", "raft.db"),
		BoltOptions: &bbolt.Options{Timeout: cfg.LockTimeout, NoFreelistSync: true},
		NoSync:      false,
	})
	if err != nil {
		b.Fatal(err)
	}
	snaps, err := raft.NewFileSnapshotStore(dir, 3, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	addr := benchFreeAddr(b)
	tcpAddr, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	tr, err := raft.NewTCPTransport(addr, tcpAddr, 5, 10*time.Second, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	if bootstrap {
		conf := raft.Configuration{Servers: []raft.Server{{ID: rc.LocalID, Address: tr.LocalAddr(), Suffrage: raft.Voter}}}
		if err := raft.BootstrapCluster(rc, store, store, snaps, tr, conf); err != nil {
			b.Fatal(err)
		}
	}
	r, err := raft.NewRaft(rc, noopFSM{}, store, store, snaps, tr)
	if err != nil {
		b.Fatal(err)
	}
	m := &rawMember{raft: r, store: store, tr: tr}
	b.Cleanup(func() {
		_ = r.Shutdown().Error()
		_ = tr.Close()
		_ = store.Close()
	})
	return m
}

func startRawTrio(b *testing.B) []*rawMember {
	b.Helper()
	dir := b.TempDir()
	var ms []*rawMember
	for i := range 3 {
		id := fmt.Sprintf("r%d", i+1)
		ms = append(ms, openRawMember(b, id, filepath.Join(dir, id), i == 0))
		if i == 0 {
			benchWait(b, 10*time.Second, "the bootstrapped raw member to lead", func() bool { return ms[0].raft.State() == raft.Leader })
		}
	}
	for i, m := range ms[1:] {
		id := raft.ServerID(fmt.Sprintf("r%d", i+2))
		if err := ms[0].raft.AddVoter(id, m.tr.LocalAddr(), 0, 10*time.Second).Error(); err != nil {
			b.Fatal(err)
		}
	}
	rawWaitApplied(b, ms)
	return ms
}

// rawLeader returns the raw member leading now, waiting for an election if
// none does.
func rawLeader(ms []*rawMember) *raft.Raft {
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, m := range ms {
			if m.raft.State() == raft.Leader {
				return m.raft
			}
		}
		if time.Now().After(deadline) {
			return ms[0].raft
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// rawApply applies data on the current leader, again on the next leader
// after a leader change (a no-op entry may well be applied twice); each
// retry counts in changes.
func rawApply(ms []*rawMember, data []byte, changes *atomic.Int64) error {
	for attempt := 0; ; attempt++ {
		err := rawLeader(ms).Apply(data, 5*time.Second).Error()
		switch {
		case err == nil:
			return nil
		case attempt < 100 && (errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrEnqueueTimeout) ||
			errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrLeadershipTransferInProgress)):
			changes.Add(1)
			time.Sleep(10 * time.Millisecond)
		default:
			return err
		}
	}
}

func rawWaitApplied(b *testing.B, ms []*rawMember) {
	b.Helper()
	for attempt := 0; ; attempt++ {
		err := rawLeader(ms).Barrier(30 * time.Second).Error()
		if err == nil {
			break
		}
		if attempt == 10 {
			b.Fatal(err)
		}
	}
	want := rawLeader(ms).AppliedIndex()
	benchWait(b, 60*time.Second, "all three raw members to apply the log", func() bool {
		for _, m := range ms {
			if m.raft.AppliedIndex() < want {
				return false
			}
		}
		return true
	})
}

// cyclePayloads returns entries byte-for-byte the size of one cycle's
// encoded AssignBatch and UpdateAllocs of n items, with ids, node names and
// versions of the magnitude the placements benchmark uses.
func cyclePayloads(b *testing.B, w, n int) (assign, update []byte) {
	b.Helper()
	ids := make([]uint64, n)
	nodes := make([]string, n)
	for i := range ids {
		ids[i] = 1_000_000 + uint64(i)
		nodes[i] = benchNodeName(w, 1000+i%4000)
	}
	stamp := func(c Command) Command { c.CommandHeader().Time = time.Now().UTC(); return c }
	assign, err := Encode(stamp(assignBatch(benchVClusterName(w), ids, nodes, 100_000)))
	if err != nil {
		b.Fatal(err)
	}
	update, err = Encode(stamp(completeBatch(ids)))
	if err != nil {
		b.Fatal(err)
	}
	return assign, update
}

// BenchmarkRawRaftNoopThreeMembers is the baseline of
// BenchmarkPlacementsThreeMembers: the same three-member TCP + raft-boltdb
// (fsync on) setup and raft settings, the same benchSchedulers goroutines,
// the same entries per cycle with the same byte sizes — but a no-op FSM.
// An op is one item of an AssignBatch-sized entry; items/s compares with
// placements/s.
func BenchmarkRawRaftNoopThreeMembers(b *testing.B) {
	ms := startRawTrio(b)
	for _, batch := range benchBatchSizes {
		b.Run(fmt.Sprintf("B=%d", batch), func(b *testing.B) {
			b.ReportAllocs()
			share := shares(b.N)
			var items, entries, changes atomic.Int64
			var bytes int
			errs := make(chan error, benchSchedulers)
			payloads := make([][2][]byte, benchSchedulers)
			for w := range benchSchedulers {
				a, u := cyclePayloads(b, w, batch)
				payloads[w] = [2][]byte{a, u}
				bytes = len(a) + len(u)
			}
			b.ResetTimer()
			start, cpu0 := time.Now(), processCPU(b)
			var wg sync.WaitGroup
			for w := range benchSchedulers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					full := payloads[w]
					for left := share[w]; left > 0; {
						n := min(batch, left)
						assign, update := full[0], full[1]
						if n < batch { // the last, partial cycle
							assign, update = cyclePayloads(b, w, n)
						}
						if err := rawApply(ms, assign, &changes); err != nil {
							errs <- err
							return
						}
						if err := rawApply(ms, update, &changes); err != nil {
							errs <- err
							return
						}
						items.Add(int64(n))
						entries.Add(2)
						left -= n
					}
				}()
			}
			wg.Wait()
			elapsed, cpu := time.Since(start), processCPU(b)-cpu0
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			b.ReportMetric(float64(items.Load())/elapsed.Seconds(), "items/s")
			b.ReportMetric(float64(entries.Load())/elapsed.Seconds(), "entries/s")
			b.ReportMetric(float64(bytes), "cycle_bytes")
			b.ReportMetric(cpu.Seconds()/elapsed.Seconds(), "cpu_cores")
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu_us/item")
			b.ReportMetric(float64(changes.Load()), "leader_changes")
			rawWaitApplied(b, ms)
		})
	}
}

// --- submission latency -------------------------------------------------------------

// BenchmarkSubmitLatency measures how long one submission (one Submit
// command of one allocation, with a client request id as latticectl sends)
// takes to commit through the three-member quorum, with
// benchSubmitClients clients submitting concurrently, one proposal per
// submission. It reports p50, p99 and max in milliseconds.
func BenchmarkSubmitLatency(b *testing.B) {
	trio := startBenchTrio(b)
	trio.preload(b)
	var run atomic.Int64
	b.Run(fmt.Sprintf("clients=%d", benchSubmitClients), func(b *testing.B) {
		b.ReportAllocs()
		runID := run.Add(1)
		var next atomic.Int64
		lat := make([][]time.Duration, benchSubmitClients)
		errs := make(chan error, benchSubmitClients)
		changes0 := trio.leaderChanges.Load()
		b.ResetTimer()
		start := time.Now()
		var wg sync.WaitGroup
		for c := range benchSubmitClients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				vc := benchVClusterName(c % benchSchedulers)
				for {
					i := next.Add(1)
					if i > int64(b.N) {
						return
					}
					cmd := &Submit{Header: Header{RequestID: fmt.Sprintf("bench-%d-%d", runID, i)},
						Items: []SubmitItem{{Request: model.Request{Name: "lat", VCluster: vc, Command: []string{"sleep", "60"},
							NodesMin: 1, Walltime: time.Hour}}}}
					t0 := time.Now()
					for attempt := 0; ; attempt++ {
						_, err := trio.propose(cmd) // a retry after an unknown outcome keeps the request id
						if errors.Is(err, ErrUnknownOutcome) && attempt < 10 {
							continue
						}
						if err != nil {
							errs <- err
							return
						}
						break
					}
					lat[c] = append(lat[c], time.Since(t0))
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		b.StopTimer()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		all := slices.Concat(lat...)
		slices.Sort(all)
		ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
		b.ReportMetric(ms(percentile(all, 0.50)), "p50_ms")
		b.ReportMetric(ms(percentile(all, 0.99)), "p99_ms")
		b.ReportMetric(ms(all[len(all)-1]), "max_ms")
		b.ReportMetric(float64(len(all))/elapsed.Seconds(), "submits/s")
		b.ReportMetric(float64(trio.leaderChanges.Load()-changes0), "leader_changes")
	})
}

// percentile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// BenchmarkApplyPlacementCycle is the FSM's share of one placement, without
// Raft: decode and apply one cycle's AssignBatch and its UpdateAllocs on one
// state of benchNodes nodes, as each member does for every entry. An op is
// one placement; three members in one process pay it three times.
func BenchmarkApplyPlacementCycle(b *testing.B) {
	for _, batch := range benchBatchSizes {
		b.Run(fmt.Sprintf("B=%d", batch), func(b *testing.B) {
			f := NewFSM()
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			index := uint64(0)
			apply := func(c Command) *Result {
				now = now.Add(time.Millisecond)
				c.CommandHeader().Time = now
				data, err := Encode(c)
				if err != nil {
					b.Fatal(err)
				}
				index++
				r := f.ApplyBatch([]*raft.Log{{Index: index, Type: raft.LogCommand, Data: data}})[0].(*Result)
				if r.Rejection != nil {
					b.Fatalf("%s rejected: %s", c.Type(), r.Rejection.Message)
				}
				return r
			}
			apply(&SetVCluster{VCluster: model.VCluster{Name: "vc0", Type: model.TypeHPCBatch, ReservationDepth: 1}})
			nodes := make([]string, benchNodes)
			for from := 0; from < benchNodes; from += benchNodesPerCommand {
				var ns []model.Node
				for i := from; i < from+benchNodesPerCommand; i++ {
					nodes[i] = benchNodeName(0, i)
					ns = append(ns, model.Node{Name: nodes[i], HomeVCluster: "vc0", Group: i / 512, Fingerprint: "fp1",
						Features: []string{"sim"}, IdleWatts: 100, BusyWatts: 400})
				}
				apply(&RegisterNodes{Agent: fmt.Sprintf("agent-%d", from), Nodes: ns})
			}
			var ids []uint64
			for left := b.N; left > 0; left -= model.MaxArrayTasks {
				k := min(left, model.MaxArrayTasks)
				ids = append(ids, apply(&Submit{Items: []SubmitItem{{Request: model.Request{VCluster: "vc0", Command: []string{"true"},
					NodesMin: 1, Walltime: time.Hour, Array: &model.ArraySpec{Start: 0, End: k - 1, Step: 1}}}}}).IDs...)
			}
			// Encode outside the timer: the leader encodes, every member decodes.
			var entries [][]byte
			for off := 0; off < len(ids); off += batch {
				cycle := ids[off:min(off+batch, len(ids))]
				// Versions are known only when applying; use a version no item can be newer than.
				a, err := Encode(&AssignBatch{Header: Header{Time: now}, VCluster: "vc0", Items: assignBatch("vc0", cycle, nodes[off%(benchNodes-batch):], 1<<40).Items})
				if err != nil {
					b.Fatal(err)
				}
				u, err := Encode(&UpdateAllocs{Header: Header{Time: now}, Updates: completeBatch(cycle).Updates})
				if err != nil {
					b.Fatal(err)
				}
				entries = append(entries, a, u)
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU(b)
			for _, data := range entries {
				index++
				r := f.ApplyBatch([]*raft.Log{{Index: index, Type: raft.LogCommand, Data: data}})[0].(*Result)
				if r.Rejection != nil {
					b.Fatal(r.Rejection.Message)
				}
				for _, it := range r.Items {
					if !it.Committed {
						b.Fatalf("item %d: %s", it.ID, it.Rejection.Message)
					}
				}
			}
			b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(b.N), "cpu_ns/op")
		})
	}
}

// BenchmarkApplySubmitFullRequestTable is the FSM's cost of one submission
// carrying a client request id (latticectl always sends one) once the
// idempotency table holds MaxRememberedRequests ids — the steady state of
// a cluster that has taken that many requests. An op is one Submit applied
// on one member.
func BenchmarkApplySubmitFullRequestTable(b *testing.B) {
	s := NewState()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.apply(&SetVCluster{Header: Header{Time: now}, VCluster: model.VCluster{Name: "vc0", Type: model.TypeHPCBatch, ReservationDepth: 1}})
	for i := range MaxRememberedRequests {
		s.remember(fmt.Sprintf("earlier-%d", i), &Result{})
	}
	cmds := make([]*Submit, b.N)
	for i := range cmds {
		cmds[i] = &Submit{Header: Header{Time: now, RequestID: fmt.Sprintf("bench-%d", i)},
			Items: []SubmitItem{{Request: model.Request{VCluster: "vc0", Command: []string{"true"}, NodesMin: 1, Walltime: time.Hour}}}}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for _, c := range cmds {
		if r := s.apply(c); r.Rejection != nil {
			b.Fatal(r.Rejection.Message)
		}
	}
}
