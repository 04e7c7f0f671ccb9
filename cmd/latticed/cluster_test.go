package main

// Multi-process tests of the quorum (issue 3, "Done means"): real
// `latticed server` processes on 127.0.0.1, each with its own data dir, and a
// `latticed agent --simulate`; leader kill -9 in the middle of a submission
// stream, a full restart, a partition through the fault-injecting transport,
// a second server on a busy data dir, and five members losing two. The
// invariant checker runs against the leader's backups throughout.
//
// Together they take about 35 s on two cores (plus building the binary) and
// run in the default `go test`; `go test -short` runs only the data-dir one.
// LATTICED_TEST_LOGS=1 prints the tail of every process's log even when a
// test passes (=all prints whole logs); failures always print the tails.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

func skipShort(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process quorum test; skipped with -short")
	}
}

// stream submits short jobs from workers goroutines, round-robin over
// targets, each retried with its own request id until acknowledged.
type stream struct {
	stop chan struct{}
	wg   sync.WaitGroup
	seq  atomic.Int64
}

func startStream(led *ledger, targets []*member, prefix, workDir string, workers int, pause time.Duration) *stream {
	s := &stream{stop: make(chan struct{})}
	for range workers {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for {
				select {
				case <-s.stop:
					return
				default:
				}
				n := int(s.seq.Add(1))
				rid := fmt.Sprintf("%s-%04d", prefix, n)
				r, err := submit(targets, n, rid, shortJob(rid, workDir), 2*time.Second, 30*time.Second)
				if err != nil {
					led.fail(err.Error())
				} else {
					led.record(r)
				}
				time.Sleep(pause)
			}
		}()
	}
	return s
}

func (s *stream) end() {
	close(s.stop)
	s.wg.Wait()
}

// TestClusterLeaderKillMidStream: three members and an agent; a stream of
// submissions to all three addresses; SIGKILL the leader mid-stream. A new
// leader serves within 3 s, nothing acknowledged is lost or duplicated, all
// the work completes, and the killed member rejoins from its data dir.
func TestClusterLeaderKillMidStream(t *testing.T) {
	skipShort(t)
	start := time.Now()
	c := newCluster(t)
	c.startMembers(3)
	c.startAgent(16, 8)
	t.Logf("cluster of 3 with 16 nodes ready in %s", time.Since(start).Round(time.Millisecond))
	watch := c.watchInvariants(500 * time.Millisecond)

	led := newLedger()
	targets := append([]*member(nil), c.members...)
	st := startStream(led, targets, "kill", c.dir, 3, 60*time.Millisecond)
	c.waitFor(20*time.Second, "30 acknowledged submissions before the kill", func() (bool, string) {
		return led.count() >= 30, fmt.Sprint(led.count())
	})
	old := c.mustLeader(2 * time.Second)
	ackedBefore := led.count()
	killAt := time.Now()
	old.proc().kill()
	t.Logf("SIGKILLed leader %s after %d acknowledged submissions", old.id, ackedBefore)

	// One probe measures when a survivor says it leads, another when the
	// quorum serves writes again.
	survivors := c.alive()
	elected := make(chan time.Duration, 1)
	go func() {
		if l := c.leader(10 * time.Second); l != nil {
			elected <- time.Since(killAt)
		}
		close(elected)
	}()
	probe, err := submit(survivors, 0, "kill-probe", shortJob("kill-probe", c.dir), time.Second, 30*time.Second)
	if err != nil {
		t.Fatalf("probe after the kill: %v", err)
	}
	led.record(probe)
	serving := probe.ackAt.Sub(killAt)
	newLeader := c.mustLeader(5 * time.Second)
	t.Logf("new leader %s elected %s after the kill; first write acknowledged %s after the kill (%d attempts)",
		newLeader.id, (<-elected).Round(time.Millisecond), serving.Round(time.Millisecond), probe.attempts)
	if serving > 3*time.Second {
		t.Errorf("a new leader served %s after the kill, want within 3s", serving)
	}
	if newLeader == old {
		t.Fatal("the killed member still leads")
	}

	// Keep streaming until 30 more submissions were acknowledged after it.
	c.waitFor(30*time.Second, "30 submissions acknowledged after the kill", func() (bool, string) {
		n := 0
		for _, r := range led.snapshot() {
			if r.ackAt.After(killAt) {
				n++
			}
		}
		return n >= 30, fmt.Sprint(n)
	})
	st.end()
	retried, maxAttempts := 0, 0
	for _, r := range led.snapshot() {
		if r.attempts > 1 {
			retried++
		}
		maxAttempts = max(maxAttempts, r.attempts)
	}
	t.Logf("stream ended: %d acknowledged, %d of them after retries (at most %d attempts)", led.count(), retried, maxAttempts)

	c.checkAcked(led, "kill-")
	took := c.waitCompleted(led, 90*time.Second)
	t.Logf("all %d submissions COMPLETED %s after the stream ended", led.count(), took.Round(time.Millisecond))
	c.checkAcked(led, "kill-")

	// The killed member comes back from its data dir with the same flags.
	lst, err := selfStatus(c.mustLeader(2*time.Second), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.start(old)
	catchUp := c.waitFor(30*time.Second, old.id+" to catch up", func() (bool, string) {
		s, err := selfStatus(old, 500*time.Millisecond)
		if err != nil {
			return false, err.Error()
		}
		return s.AppliedIndex >= lst.CommitIndex, fmt.Sprintf("applied %d of %d", s.AppliedIndex, lst.CommitIndex)
	})
	t.Logf("%s restarted (%v) and applied up to the leader's commit index %d in %s", old.id, old.role, lst.CommitIndex, catchUp.Round(time.Millisecond))
	qs := c.waitHealthy(3, 20*time.Second)
	t.Logf("quorum after rejoin: %s", describeStatus(qs))
	c.waitFor(10*time.Second, old.id+" applied index to reach the leader's", func() (bool, string) {
		l := c.leader(time.Second)
		if l == nil {
			return false, "no leader"
		}
		ls, err1 := selfStatus(l, 500*time.Millisecond)
		ms, err2 := selfStatus(old, 500*time.Millisecond)
		if err1 != nil || err2 != nil {
			return false, fmt.Sprint(err1, err2)
		}
		return ms.AppliedIndex >= ls.AppliedIndex && ms.StateVersion == ls.StateVersion,
			fmt.Sprintf("%s applied %d version %d, leader applied %d version %d", old.id, ms.AppliedIndex, ms.StateVersion, ls.AppliedIndex, ls.StateVersion)
	})
	watch.finish()
	t.Logf("scenario took %s", time.Since(start).Round(time.Millisecond))
}

// TestClusterRestartAll: after work completes, SIGTERM all three members
// and start them again from their data dirs: the state is the same.
func TestClusterRestartAll(t *testing.T) {
	skipShort(t)
	start := time.Now()
	c := newCluster(t)
	c.startMembers(3)
	c.startAgent(8, 4)
	watch := c.watchInvariants(500 * time.Millisecond)

	led := newLedger()
	st := startStream(led, c.members, "restart", c.dir, 2, 20*time.Millisecond)
	c.waitFor(20*time.Second, "24 acknowledged submissions", func() (bool, string) { return led.count() >= 24, fmt.Sprint(led.count()) })
	st.end()
	c.waitCompleted(led, 60*time.Second)
	c.checkAcked(led, "restart-")

	allocsBefore, err := c.listAllocations()
	if err != nil {
		t.Fatal(err)
	}
	nodesBefore, err := c.listNodes()
	if err != nil {
		t.Fatal(err)
	}
	backupBefore, _, err := c.backupAny(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	watch.finish()

	var wg sync.WaitGroup
	for _, m := range c.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !m.proc().stop(15 * time.Second) {
				t.Errorf("%s did not stop within 15s of SIGTERM", m.id)
			} else if code := m.proc().cmd.ProcessState.ExitCode(); code != 0 {
				t.Errorf("%s exited %d after SIGTERM", m.id, code)
			}
		}()
	}
	wg.Wait()
	t.Logf("all three stopped on SIGTERM")
	restartAt := time.Now()
	for _, m := range c.members {
		c.start(m)
	}
	c.waitHealthy(3, 30*time.Second)
	t.Logf("all three restarted and healthy in %s", time.Since(restartAt).Round(time.Millisecond))
	watch = c.watchInvariants(500 * time.Millisecond)

	allocsAfter, err := c.listAllocations()
	if err != nil {
		t.Fatal(err)
	}
	if len(allocsAfter) != len(allocsBefore) {
		t.Fatalf("%d allocations after the restart, %d before", len(allocsAfter), len(allocsBefore))
	}
	for i := range allocsBefore {
		if !proto.Equal(allocsBefore[i], allocsAfter[i]) {
			t.Errorf("allocation %s changed across the restart:\nbefore %v\nafter  %v", allocsBefore[i].DisplayId, allocsBefore[i], allocsAfter[i])
		}
	}
	nodesAfter, err := c.listNodes()
	if err != nil {
		t.Fatal(err)
	}
	if len(nodesAfter) != len(nodesBefore) {
		t.Fatalf("%d nodes after the restart, %d before", len(nodesAfter), len(nodesBefore))
	}
	for i := range nodesBefore {
		// The last heartbeat lives in the leader's memory, not in the log.
		b, a := proto.Clone(nodesBefore[i]).(*latticev1.Node), proto.Clone(nodesAfter[i]).(*latticev1.Node)
		b.LastHeartbeatUnixMs, a.LastHeartbeatUnixMs = 0, 0
		if !proto.Equal(b, a) {
			t.Errorf("node %s changed across the restart:\nbefore %v\nafter  %v", b.Name, b, a)
		}
	}
	backupAfter, _, err := c.backupAny(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diffStates(readState(t, backupBefore), readState(t, backupAfter)) {
		t.Errorf("committed state differs across the restart: %s", d)
	}

	// And the restarted cluster schedules: the agent reconnects, a new job
	// runs and gets the next id.
	c.waitNodesReady(8, 20*time.Second)
	after := newLedger()
	r, err := submit(c.members, 0, "restart-after", shortJob("restart-after", c.dir), 2*time.Second, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	after.record(r)
	var maxID uint64
	for _, a := range allocsBefore {
		maxID = max(maxID, a.Id)
	}
	if r.id != maxID+1 {
		t.Errorf("first id after the restart is %d, want %d", r.id, maxID+1)
	}
	c.waitCompleted(after, 30*time.Second)
	watch.finish()
	t.Logf("scenario took %s", time.Since(start).Round(time.Millisecond))
}

// TestClusterCrashAll: SIGKILL all three members at once in the middle of
// a submission stream, then start them again: every acknowledged
// submission survived (the log is fsynced before a commit is acknowledged),
// and all the work, including what ran while the quorum was down, completes.
func TestClusterCrashAll(t *testing.T) {
	skipShort(t)
	start := time.Now()
	c := newCluster(t)
	c.startMembers(3)
	c.startAgent(16, 8)
	led := newLedger()
	st := startStream(led, append([]*member(nil), c.members...), "crash", c.dir, 3, 20*time.Millisecond)
	c.waitFor(20*time.Second, "40 acknowledged submissions", func() (bool, string) { return led.count() >= 40, fmt.Sprint(led.count()) })
	var wg sync.WaitGroup
	for _, m := range c.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.proc().kill()
		}()
	}
	wg.Wait()
	acked := led.count()
	restartAt := time.Now()
	for _, m := range c.members {
		c.start(m)
	}
	c.waitHealthy(3, 30*time.Second)
	t.Logf("SIGKILLed all three with %d acknowledged; restarted and healthy in %s", acked, time.Since(restartAt).Round(time.Millisecond))
	watch := c.watchInvariants(500 * time.Millisecond)
	c.waitFor(20*time.Second, "10 more acknowledged submissions", func() (bool, string) { return led.count() >= acked+10, fmt.Sprint(led.count()) })
	st.end()
	c.checkAcked(led, "crash-")
	c.waitCompleted(led, 60*time.Second)
	c.checkAcked(led, "crash-")
	watch.finish()
	t.Logf("scenario took %s", time.Since(start).Round(time.Millisecond))
}

// TestClusterPartition cuts one member off from the other two, both sides
// blocking each other's Raft traffic through the fault-injecting transport:
// first the leader, then a follower. The isolated member cannot commit (a
// leader steps down), writes sent to it fail Unavailable, the majority keeps
// committing and scheduling; after healing it catches up and holds the same
// state as the majority.
func TestClusterPartition(t *testing.T) {
	skipShort(t)
	start := time.Now()
	c := newCluster(t)
	c.startMembers(3)
	c.startAgent(8, 4)
	watch := c.watchInvariants(500 * time.Millisecond)

	led := newLedger()
	for i := range 8 {
		rid := fmt.Sprintf("part-pre-%02d", i)
		r, err := submit(c.members, i, rid, shortJob(rid, c.dir), 2*time.Second, 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		led.record(r)
	}
	c.waitCompleted(led, 30*time.Second)

	l := c.mustLeader(2 * time.Second)
	partitionRound(t, c, led, "leader", l)
	l = c.mustLeader(2 * time.Second)
	for _, m := range c.members {
		if m != l {
			partitionRound(t, c, led, "follower", m)
			break
		}
	}
	c.checkAcked(led, "part-")
	watch.finish()
	t.Logf("scenario took %s", time.Since(start).Round(time.Millisecond))
}

// partitionRound isolates iso, checks both sides, heals and compares.
func partitionRound(t *testing.T, c *cluster, led *ledger, what string, iso *member) {
	t.Helper()
	wasLeader := c.leader(time.Second) == iso
	var majority []*member
	var majorityIDs []string
	for _, m := range c.members {
		if m != iso {
			majority = append(majority, m)
			majorityIDs = append(majorityIDs, m.id)
		}
	}
	inject := func(m *member, block []string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if _, err := m.admin.InjectFault(ctx, &latticev1.InjectFaultRequest{BlockMemberIds: block}); err != nil {
			t.Fatalf("InjectFault on %s: %v", m.id, err)
		}
	}
	cutAt := time.Now()
	inject(iso, majorityIDs)
	for _, m := range majority {
		inject(m, []string{iso.id})
	}
	t.Logf("[%s] cut %s off from %v", what, iso.id, majorityIDs)

	if wasLeader {
		stepDown := c.waitFor(5*time.Second, iso.id+" to step down", func() (bool, string) {
			s, err := selfStatus(iso, 500*time.Millisecond)
			if err != nil {
				return false, err.Error()
			}
			return s.Members[0].Role != "leader", s.Members[0].Role
		})
		t.Logf("[%s] %s stepped down %s after the cut", what, iso.id, stepDown.Round(time.Millisecond))
	}
	var leader *member
	c.waitFor(10*time.Second, "a leader on the majority side", func() (bool, string) {
		for _, m := range majority {
			if s, err := selfStatus(m, 500*time.Millisecond); err == nil && s.Members[0].Role == "leader" {
				leader = m
				return true, ""
			}
		}
		return false, "none"
	})
	t.Logf("[%s] %s leads the majority, %s after the cut", what, leader.id, time.Since(cutAt).Round(time.Millisecond))
	isoBefore, err := selfStatus(iso, time.Second)
	if err != nil {
		t.Fatal(err)
	}

	// Writes sent to the isolated member are refused as Unavailable (or, had
	// it forwarded them, committed by the majority). A client then retries
	// them on the majority with the same request id.
	for i := range 3 {
		rid := fmt.Sprintf("part-%s-iso-%d", what, i)
		sent := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		resp, err := iso.allocs.Submit(ctx, &latticev1.SubmitRequest{Request: shortJob(rid, c.dir), ClientRequestId: rid})
		cancel()
		switch {
		case err == nil:
			t.Logf("[%s] isolated %s acknowledged %s as id %d; the majority must hold it", what, iso.id, rid, resp.Ids[0])
			led.record(submitResult{requestID: rid, id: resp.Ids[0], ackAt: time.Now()})
		case status.Code(err) != codes.Unavailable:
			t.Errorf("[%s] a write to isolated %s failed with %v, want Unavailable: %v", what, iso.id, status.Code(err), err)
		case i == 0:
			t.Logf("[%s] a write to isolated %s failed in %s: %v", what, iso.id, time.Since(sent).Round(time.Millisecond), err)
		}
		r, err := submit(majority, i, rid, shortJob(rid, c.dir), 2*time.Second, 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		led.record(r)
	}
	// The majority keeps committing and scheduling.
	for i := range 16 {
		rid := fmt.Sprintf("part-%s-maj-%02d", what, i)
		r, err := submit(majority, i, rid, shortJob(rid, c.dir), 2*time.Second, 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		led.record(r)
	}
	c.waitCompleted(led, 60*time.Second)
	isoAfter, err := selfStatus(iso, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	majStatus, err := selfStatus(leader, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if isoAfter.CommitIndex != isoBefore.CommitIndex || isoAfter.StateVersion != isoBefore.StateVersion {
		t.Errorf("[%s] isolated %s committed: commit index %d -> %d, state version %d -> %d", what, iso.id,
			isoBefore.CommitIndex, isoAfter.CommitIndex, isoBefore.StateVersion, isoAfter.StateVersion)
	}
	if isoAfter.Members[0].Role == "leader" {
		t.Errorf("[%s] isolated %s claims to lead", what, iso.id)
	}
	if majStatus.CommitIndex <= isoAfter.CommitIndex {
		t.Errorf("[%s] the majority did not commit past the isolated member: %d vs %d", what, majStatus.CommitIndex, isoAfter.CommitIndex)
	}
	t.Logf("[%s] during the partition: isolated %s stayed at commit %d (version %d, role %s); majority leader %s reached commit %d (version %d)",
		what, iso.id, isoAfter.CommitIndex, isoAfter.StateVersion, isoAfter.Members[0].Role, leader.id, majStatus.CommitIndex, majStatus.StateVersion)
	// Not asserted, documented: with no reachable leader a member answers
	// reads from its own committed state (forward.go), so the isolated one
	// serves a stale list; and QuorumStatus health is API reachability.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	stale, err := iso.allocs.List(ctx, &latticev1.ListAllocationsRequest{})
	cancel()
	if fresh, ferr := c.listAllocations(); err == nil && ferr == nil {
		t.Logf("[%s] reads during the partition: isolated %s lists %d allocations, the majority %d", what, iso.id, len(stale.Allocations), len(fresh))
	}
	ctx, cancel = context.WithTimeout(context.Background(), 3*time.Second)
	if qs, err := leader.admin.QuorumStatus(ctx, &latticev1.QuorumStatusRequest{}); err == nil {
		t.Logf("[%s] quorum status during the partition: %s", what, describeStatus(qs))
	}
	cancel()

	// Heal: empty block lists everywhere.
	for _, m := range c.members {
		inject(m, nil)
	}
	target := majStatus.CommitIndex
	catchUp := c.waitFor(20*time.Second, iso.id+" to catch up", func() (bool, string) {
		s, err := selfStatus(iso, 500*time.Millisecond)
		if err != nil {
			return false, err.Error()
		}
		return s.AppliedIndex >= target, fmt.Sprintf("applied %d of %d", s.AppliedIndex, target)
	})
	t.Logf("[%s] healed: %s applied up to %d %s after healing", what, iso.id, target, catchUp.Round(time.Millisecond))
	c.waitHealthy(3, 20*time.Second)

	// Same state: wait until both hold the same state version, back up from
	// the leader, hand leadership to the healed member and back up from it.
	c.waitFor(10*time.Second, iso.id+" to hold the leader's state version", func() (bool, string) {
		l := c.leader(time.Second)
		if l == nil || l == iso {
			return false, fmt.Sprintf("leader %v", l != nil)
		}
		ls, err1 := selfStatus(l, 500*time.Millisecond)
		is, err2 := selfStatus(iso, 500*time.Millisecond)
		if err1 != nil || err2 != nil {
			return false, fmt.Sprint(err1, err2)
		}
		return is.StateVersion == ls.StateVersion, fmt.Sprintf("version %d vs %d", is.StateVersion, ls.StateVersion)
	})
	majorityBackup, from, err := c.backupAny(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	tr, err := c.mustLeader(time.Second).admin.QuorumTransferLeadership(ctx, &latticev1.QuorumTransferRequest{Id: iso.id})
	cancel()
	if err != nil {
		t.Fatalf("transfer leadership to %s: %v", iso.id, err)
	}
	if tr.NewLeaderId != iso.id {
		t.Fatalf("leadership went to %q, asked %s", tr.NewLeaderId, iso.id)
	}
	var isoBackup []byte
	c.waitFor(10*time.Second, "a backup from "+iso.id, func() (bool, string) {
		if l := c.leader(time.Second); l != iso {
			return false, "not leading yet"
		}
		b, err := backup(iso, 5*time.Second)
		if err != nil {
			return false, err.Error()
		}
		isoBackup = b
		return true, ""
	})
	for _, d := range diffStates(readState(t, majorityBackup), readState(t, isoBackup)) {
		t.Errorf("[%s] healed %s holds a different state than %s: %s", what, iso.id, from, d)
	}
	// Every acknowledged submission, read from the healed member (now the
	// leader, answering from its own state).
	for rid, r := range led.snapshot() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		a, err := iso.allocs.Get(ctx, &latticev1.GetAllocationRequest{Id: fmt.Sprint(r.id)})
		cancel()
		if err != nil || a.Request.GetName() != rid || a.State != "COMPLETED" {
			t.Errorf("[%s] %s (id %d) on healed %s: %v %v", what, rid, r.id, iso.id, a, err)
		}
	}
}

// TestClusterDataDirInUse: a second server on a running member's data dir
// fails fast with a clear message.
func TestClusterDataDirInUse(t *testing.T) {
	c := newCluster(t)
	c.startMembers(1)
	s1 := c.members[0]
	path := c.dir + "/dup.log"
	c.logs = append(c.logs, path)
	startAt := time.Now()
	dup := startProc(t, path, "dup", "server", "--id", "s1", "--data-dir", s1.dataDir,
		"--raft-addr", freeAddr(t), "--api-addr", freeAddr(t), "--metrics-addr", "")
	c.track(dup)
	if !dup.wait(5 * time.Second) {
		t.Fatalf("a second server on %s still runs after 5s", s1.dataDir)
	}
	took := time.Since(startAt)
	code := dup.cmd.ProcessState.ExitCode()
	out, _ := os.ReadFile(path)
	t.Logf("second server exited %d after %s: %s", code, took.Round(time.Millisecond), strings.TrimSpace(tail(path, 1)))
	if code == 0 {
		t.Errorf("a second server on a busy data dir exited 0")
	}
	msg := string(out)
	if !strings.Contains(msg, s1.dataDir) || !strings.Contains(msg, "in use") {
		t.Errorf("the message does not say the data dir is in use:\n%s", msg)
	}
	// The running member is unharmed.
	if _, err := submit(c.members, 0, "dup-after", shortJob("dup-after", c.dir), 2*time.Second, 10*time.Second); err != nil {
		t.Errorf("the running member stopped serving: %v", err)
	}
}

// TestClusterFiveMembersLoseTwo: five members; kill -9 the leader and one
// follower at once; the other three elect a leader and keep committing.
// Then both come back from their data dirs with no --bootstrap or --join.
func TestClusterFiveMembersLoseTwo(t *testing.T) {
	skipShort(t)
	start := time.Now()
	c := newCluster(t)
	c.startMembers(5)
	t.Logf("five members healthy in %s", time.Since(start).Round(time.Millisecond))
	watch := c.watchInvariants(500 * time.Millisecond)

	led := newLedger()
	for i := range 10 {
		rid := fmt.Sprintf("five-pre-%02d", i)
		r, err := submit(c.members, i, rid, shortJob(rid, c.dir), 2*time.Second, 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		led.record(r)
	}
	l := c.mustLeader(2 * time.Second)
	var victim *member
	for _, m := range c.members {
		if m != l {
			victim = m
			break
		}
	}
	killAt := time.Now()
	var wg sync.WaitGroup
	for _, m := range []*member{l, victim} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.proc().kill()
		}()
	}
	wg.Wait()
	survivors := c.alive()
	probe, err := submit(survivors, 0, "five-probe", shortJob("five-probe", c.dir), time.Second, 30*time.Second)
	if err != nil {
		t.Fatalf("probe after killing %s and %s: %v", l.id, victim.id, err)
	}
	led.record(probe)
	newLeader := c.mustLeader(5 * time.Second)
	t.Logf("killed leader %s and %s; %s leads, first write acknowledged %s after the kill", l.id, victim.id, newLeader.id,
		probe.ackAt.Sub(killAt).Round(time.Millisecond))
	if d := probe.ackAt.Sub(killAt); d > 3*time.Second {
		t.Errorf("writes resumed %s after the kill, want within 3s", d)
	}
	before, err := selfStatus(newLeader, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		rid := fmt.Sprintf("five-post-%02d", i)
		r, err := submit(survivors, i, rid, shortJob(rid, c.dir), 2*time.Second, 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		led.record(r)
	}
	after, err := selfStatus(newLeader, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if after.CommitIndex < before.CommitIndex+20 {
		t.Errorf("commit index went %d -> %d over 20 submissions", before.CommitIndex, after.CommitIndex)
	}
	// Every survivor applies what was committed.
	c.waitFor(10*time.Second, "the survivors to apply the leader's commits", func() (bool, string) {
		var seen []string
		ok := true
		for _, m := range survivors {
			s, err := selfStatus(m, 500*time.Millisecond)
			if err != nil {
				return false, err.Error()
			}
			seen = append(seen, fmt.Sprintf("%s:%d", m.id, s.AppliedIndex))
			ok = ok && s.AppliedIndex >= after.CommitIndex
		}
		return ok, strings.Join(seen, " ")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	qs, err := newLeader.admin.QuorumStatus(ctx, &latticev1.QuorumStatusRequest{})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	healthy := 0
	for _, m := range qs.Members {
		if m.Healthy {
			healthy++
		}
	}
	if len(qs.Members) != 5 || healthy != 3 {
		t.Errorf("quorum status after losing two: %s", describeStatus(qs))
	}
	t.Logf("quorum status: %s", describeStatus(qs))
	c.checkAcked(led, "five-")

	// Both come back from their data dirs without --bootstrap or --join.
	restartAt := time.Now()
	for _, m := range []*member{l, victim} {
		m.role = nil
		c.start(m)
	}
	c.waitHealthy(5, 30*time.Second)
	c.waitFor(10*time.Second, "the restarted members to catch up", func() (bool, string) {
		var seen []string
		ok := true
		for _, m := range []*member{l, victim} {
			s, err := selfStatus(m, 500*time.Millisecond)
			if err != nil {
				return false, err.Error()
			}
			seen = append(seen, fmt.Sprintf("%s:%d", m.id, s.AppliedIndex))
			ok = ok && s.AppliedIndex >= after.CommitIndex
		}
		return ok, strings.Join(seen, " ")
	})
	t.Logf("%s and %s restarted without --bootstrap/--join; five healthy and caught up %s later", l.id, victim.id,
		time.Since(restartAt).Round(time.Millisecond))
	watch.finish()
	t.Logf("scenario took %s", time.Since(start).Round(time.Millisecond))
}
