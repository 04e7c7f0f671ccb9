package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/quorum"
)

// previousRelease is the release before feature levels (issue 25): the
// rolling-upgrade test starts a cluster of it and upgrades it to this tree.
const previousRelease = "38e3d33"

// buildRelease builds latticed and lattice-job-supervisor of commit rev
// from this repository's git history into a temporary directory, and
// returns the latticed binary; it skips the test, saying why, when the
// history or the toolchain is not available.
func buildRelease(t *testing.T, rev string) string {
	t.Helper()
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("no git history here (%v): the rolling-upgrade test builds release %s from it", err, rev)
	}
	repo := strings.TrimSpace(string(top))
	if err := exec.Command("git", "-C", repo, "cat-file", "-e", rev+"^{commit}").Run(); err != nil {
		t.Skipf("release %s is not in this clone's history (a shallow clone?): fetch it to run the rolling-upgrade test", rev)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", repo, rev, src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", rev, err, out)
	}
	bin := filepath.Join(dir, "bin")
	build := exec.Command("go", "build", "-buildvcs=false", "-o", bin+string(filepath.Separator), "./cmd/latticed", "./cmd/lattice-job-supervisor")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building release %s: %v\n%s", rev, err, out)
	}
	return filepath.Join(bin, "latticed")
}

// A rolling upgrade from the previous release to this tree, and back for
// one member: three members under load (submissions through every member,
// jobs running on an agent), replaced one at a time by the new binary,
// then one replaced by the old binary again. Pass: every acknowledged job
// completes (none fails), no member panics, and every member's state
// digest (the SHA-256 of its backup, taken while it leads) is the same.
//
// It builds the previous release from git (minutes on a loaded machine),
// so it runs with LATTICE_UPGRADE_TESTS=1 (.ci/run sets it).
func TestRollingUpgrade(t *testing.T) {
	if os.Getenv("LATTICE_UPGRADE_TESTS") == "" {
		t.Skip("builds release " + previousRelease + " from git and rolls a 3-member cluster through an upgrade (minutes): set LATTICE_UPGRADE_TESTS=1")
	}
	oldBin := buildRelease(t, previousRelease)
	c := newCluster(t)
	c.bin = oldBin
	c.startMembers(3)
	c.startAgent(4, 2) // the agent stays on the previous release: servers are upgraded first
	workDir := t.TempDir()

	// Load: short jobs through every member, and a few that run for
	// seconds, so that some run while members are replaced.
	l := newLedger()
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				name := fmt.Sprintf("up-%d-%d", w, i)
				req := shortJob(name, workDir)
				if i%5 == 0 {
					req.Command = []string{"sleep 3"}
				}
				r, err := submit(c.alive(), i, name, req, 3*time.Second, 60*time.Second)
				if err != nil {
					l.fail(err.Error())
					return
				}
				l.record(r)
				time.Sleep(150 * time.Millisecond)
			}
		}()
	}
	settle := func(what string) {
		c.t.Helper()
		n := l.count()
		c.waitFor(60*time.Second, "submissions to flow "+what, func() (bool, string) {
			return l.count() >= n+5, fmt.Sprintf("%d acknowledged", l.count())
		})
	}
	settle("on the previous release")

	// Each member's own answer (a member of the previous release, asked
	// about the others, does not pass their levels on).
	levels := func() map[string]uint32 {
		c.waitHealthy(3, 60*time.Second)
		out := map[string]uint32{}
		for _, m := range c.members {
			st, err := selfStatus(m, 3*time.Second)
			if err != nil {
				t.Fatalf("status of %s: %v", m.id, err)
			}
			out[m.id] = st.Members[0].FeatureLevel
		}
		return out
	}
	replace := func(m *member, bin, what string) {
		c.t.Helper()
		t.Logf("%s: %s", m.id, what)
		if !m.proc().stop(15 * time.Second) {
			t.Logf("%s did not stop on SIGTERM; killed", m.id)
		}
		m.bin = bin
		c.start(m)
		c.waitHealthy(3, 60*time.Second)
		settle("after " + m.id + " " + what)
	}

	// Followers first, the leader last (it hands leadership over as it stops).
	order := c.alive()
	if l := c.mustLeader(10 * time.Second); l != nil {
		for i, m := range order {
			if m == l {
				order = append(append(order[:i:i], order[i+1:]...), l)
				break
			}
		}
	}
	// Upgraded members are pinned to the previous release's level while
	// the upgrade may still be rolled back: none proposes an entry that
	// release cannot read (the leader's own loops included).
	pinned := []string{"--feature-level", "0"}
	for i, m := range order {
		m.extra = pinned
		replace(m, latticedBin, "upgraded, pinned to level 0")
		lv := levels()
		if lv[m.id] != 0 {
			t.Errorf("upgraded %s pinned to level 0 advertises feature level %d (%v)", m.id, lv[m.id], lv)
		}
		if i < len(order)-1 {
			// Mixed: a vcluster change still works (the whole definition,
			// which the old members know) — and keeps every field.
			setDepth(t, c, int32(2+i))
		}
	}
	// Roll one member back to the previous release.
	// Roll a follower back, as the upgrade goes (followers first): the
	// previous release answers a call forwarded to it from its own state
	// even when it no longer leads (fixed since), so rolling the leader
	// back can briefly refuse work there.
	back := order[0]
	if l := c.mustLeader(10 * time.Second); l == back {
		back = order[1]
	}
	back.extra = nil // the previous release has no --feature-level
	replace(back, oldBin, "rolled back")
	if lv := levels(); lv[back.id] != 0 {
		t.Errorf("rolled-back %s advertises feature level %d, want 0", back.id, lv[back.id])
	}
	setDepth(t, c, 7) // mixed again: proposed as the old members know it
	settle("after the roll-back")

	// Forward again, to stay: every member on this tree, unpinned, one at a
	// time; then the new level is in use (a vcluster change goes as a patch,
	// the leader names the cluster).
	back.extra = nil
	replace(back, latticedBin, "upgraded again")
	for _, m := range order {
		if m != back {
			m.extra = nil
			replace(m, latticedBin, "unpinned")
		}
	}
	for id, lv := range levels() {
		if lv != uint32(quorum.FeatureLevel) {
			t.Errorf("%s advertises feature level %d after the upgrade, want %d", id, lv, quorum.FeatureLevel)
		}
	}
	setDepth(t, c, 8)
	c.waitFor(60*time.Second, "the leader to name the cluster (a level-1 command)", func() (bool, string) {
		st := c.waitHealthy(3, 30*time.Second)
		return st.GetClusterId() != "", fmt.Sprintf("cluster id %q", st.GetClusterId())
	})
	settle("after the upgrade")
	stop.Store(true)
	wg.Wait()

	c.checkAcked(l, "up-")
	c.waitCompleted(l, 3*time.Minute) // fails at once on a FAILED or CANCELLED job
	t.Logf("%d submissions acknowledged, all COMPLETED", l.count())

	for _, m := range c.members {
		if b, err := os.ReadFile(m.proc().logPath); err == nil && strings.Contains(string(b), "panic:") {
			t.Errorf("%s panicked:\n%s", m.id, tail(m.proc().logPath, 40))
		}
		if !m.alive() {
			t.Errorf("%s is not running:\n%s", m.id, tail(m.proc().logPath, 40))
		}
	}
	c.compareDigests()
}

// setDepth sets the batch vCluster's reservation depth through the
// leader and checks that the vCluster kept its other settings.
func setDepth(t *testing.T, c *cluster, depth int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l := c.mustLeader(10 * time.Second)
	before, err := l.admin.ListVClusters(ctx, &latticev1.ListVClustersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var name string
	var was *latticev1.VClusterInfo
	for _, v := range before.Vclusters {
		if name == "" || v.Name == "batch" {
			name, was = v.Name, v
		}
	}
	info, err := l.admin.SetVCluster(ctx, &latticev1.SetVClusterRequest{Name: name, SetReservationDepth: true, ReservationDepth: depth})
	if err != nil {
		t.Fatalf("vcluster set %s --reservation-depth %d via %s: %v", name, depth, l.id, err)
	}
	if info.ReservationDepth != depth || info.RunningEnds != was.RunningEnds || info.PredictedStarts != was.PredictedStarts || info.Algorithm != was.Algorithm {
		t.Errorf("vcluster set changed more than the depth:\nbefore %v\nafter  %v", was, info)
	}
}

// compareDigests stops the agent, waits until the state stops changing,
// then makes every member lead in turn and takes its backup: the SHA-256
// of each must be the same (the same state, written the same way).
func (c *cluster) compareDigests() {
	t := c.t
	t.Helper()
	c.agent.stop(10 * time.Second)
	version := func() (uint64, error) {
		l := c.leader(5 * time.Second)
		if l == nil {
			return 0, fmt.Errorf("no leader")
		}
		st, err := selfStatus(l, 2*time.Second)
		if err != nil {
			return 0, err
		}
		return st.StateVersion, nil
	}
	// The agent's nodes go silent, then down; wait for the state to rest.
	last, since := uint64(0), time.Now()
	c.waitFor(2*time.Minute, "the state to stop changing", func() (bool, string) {
		v, err := version()
		if err != nil {
			return false, err.Error()
		}
		if v != last {
			last, since = v, time.Now()
		}
		return time.Since(since) > 12*time.Second, fmt.Sprintf("version %d", v)
	})
	// A leader change may still commit something (a node's state): a
	// round whose backups are not all of the same state version is taken
	// again.
	for round := 1; ; round++ {
		digests, versions := map[string]string{}, map[uint64]bool{}
		var problems []string
		for _, m := range c.members {
			b := c.backupWhileLeading(m)
			sum := sha256.Sum256(b)
			digests[m.id] = hex.EncodeToString(sum[:8])
			st := readState(t, b)
			versions[st.Version] = true
			t.Logf("round %d: %s (binary in %s): state version %d, digest %s", round, m.id, filepath.Base(filepath.Dir(cmpBin(m, c))), st.Version, digests[m.id])
			if _, v := checkBackup(b); len(v) > 0 {
				problems = append(problems, fmt.Sprintf("%s's state breaks invariants: %v", m.id, v))
			}
			if first := c.members[0]; digests[m.id] != digests[first.id] {
				problems = append(problems, fmt.Sprintf("%s's state digest %s differs from %s's %s", m.id, digests[m.id], first.id, digests[first.id]))
			}
		}
		if len(versions) > 1 && round < 3 {
			continue
		}
		for _, p := range problems {
			t.Error(p)
		}
		return
	}
}

// backupWhileLeading makes m the leader and takes its backup (a backup is
// the leader's state).
func (c *cluster) backupWhileLeading(m *member) []byte {
	c.t.Helper()
	c.waitFor(60*time.Second, m.id+" to lead", func() (bool, string) {
		if st, err := selfStatus(m, time.Second); err == nil && st.Members[0].Role == "leader" {
			return true, ""
		}
		l := c.leader(5 * time.Second)
		if l == nil {
			return false, "no leader"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := l.admin.QuorumTransferLeadership(ctx, &latticev1.QuorumTransferRequest{Id: m.id})
		return false, fmt.Sprint(err)
	})
	var b []byte
	c.waitFor(30*time.Second, "a backup from "+m.id, func() (bool, string) {
		var err error
		b, err = backup(m, 10*time.Second)
		return err == nil, fmt.Sprint(err)
	})
	return b
}

func cmpBin(m *member, c *cluster) string {
	switch {
	case m.bin != "":
		return m.bin
	case c.bin != "":
		return c.bin
	}
	return latticedBin
}
