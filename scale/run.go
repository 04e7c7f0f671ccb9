package scale

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/quorum"
)

// Config is one scale run.
type Config struct {
	Bin       string // the latticed binary the processes run
	Dir       string // work dir: data dirs, logs, report.json
	Nodes     int    // simulated nodes in total
	Agents    int    // agent processes they are split over
	GroupSize int    // nodes per dragonfly group
	// MLNodeFraction of the nodes are ml-training's, the rest hpc-batch's.
	MLNodeFraction float64
	Backlog        int           // allocations submitted (in batches) before measuring
	Rate           float64       // unary submissions per second while measuring
	Duration       time.Duration // measuring time
	// InvariantEvery: a backup is taken from the leader and checked
	// (quorum.VerifySnapshot) this often while measuring, and after each
	// fault.
	InvariantEvery time.Duration
	Downtime       time.Duration // how long the restarted follower stays down
	// Retention and PruneInterval are the members' --retention and
	// --prune-interval: ended allocations leave the replicated state for
	// the archive after Retention, so the state follows live work.
	Retention     time.Duration
	PruneInterval time.Duration
	Mix           Mix
	Seed          uint64
	Log           io.Writer // progress
	// Profile saves the leader's CPU, mutex, block and heap profiles over
	// the measuring window in Dir/profiles (go tool pprof).
	Profile bool
}

// Report is what a run measured.
type Report struct {
	Started time.Time `json:"started"`
	// Measuring is when the measuring window began: submits.csv's sent_ms
	// counts from it (to line the submissions up with members' logs).
	Measuring time.Time `json:"measuring_started"`
	Nodes     int       `json:"nodes"`
	Agents    int       `json:"agents"`
	Backlog   int       `json:"backlog_allocations"`
	Duration  float64   `json:"measured_seconds"`
	Rate      float64   `json:"target_submit_rate"`

	Submitted    int     `json:"submitted"`
	SubmitErrors int     `json:"submit_errors"`
	FirstError   string  `json:"first_submit_error,omitempty"`
	SubmitP50ms  float64 `json:"submit_p50_ms"`
	SubmitP99ms  float64 `json:"submit_p99_ms"`
	SubmitMaxms  float64 `json:"submit_max_ms"`
	// SubmitWindows are the same submissions by 10-second slice of the
	// measuring window, by the time they were sent.
	SubmitWindows []Window `json:"submit_windows"`
	// The same split by the member a submission was sent to: the leader,
	// or a follower that forwarded it; and the leader's own time from
	// proposal to applied result for Submit commands (its
	// lattice_quorum_propose_duration_seconds histogram).
	SubmitLeaderP50ms      float64 `json:"submit_via_leader_p50_ms"`
	SubmitLeaderP99ms      float64 `json:"submit_via_leader_p99_ms"`
	SubmitForwardedP50ms   float64 `json:"submit_via_follower_p50_ms"`
	SubmitForwardedP99ms   float64 `json:"submit_via_follower_p99_ms"`
	ProposeSubmitMeanms    float64 `json:"leader_propose_submit_mean_ms"`
	ProposeSubmitP99Bucket float64 `json:"leader_propose_submit_p99_bucket_ms"`
	// The leader's Raft commits over the window (every command, not only
	// Submit): from an entry's dispatch to its commit by a majority
	// (lattice_raft_commit_duration_seconds), and how many appends each
	// member stored per second (one bolt commit, two fdatasyncs, each).
	RaftCommitMeanms    float64            `json:"leader_raft_commit_mean_ms"`
	RaftCommitP99Bucket float64            `json:"leader_raft_commit_p99_bucket_ms"`
	RaftAppendsPerSec   map[string]float64 `json:"raft_appends_stored_per_second"`
	RaftEntriesPerSec   float64            `json:"leader_entries_applied_per_second"`

	Cycles map[string]CycleFigures `json:"cycles"`

	PlacementsPerSec  float64 `json:"placements_per_second"`
	CompletionsPerSec float64 `json:"completions_per_second"`

	Members []MemberFigures `json:"members"`

	States []StateFigures `json:"states"` // the state's size as it grew

	InvariantChecks    int      `json:"invariant_checks"`
	InvariantFailures  []string `json:"invariant_failures"`
	FollowerCatchUpSec float64  `json:"follower_catch_up_seconds"`
	FailoverSec        float64  `json:"failover_seconds"`
	ElectionSec        float64  `json:"election_seconds"`

	StatusListSec  float64 `json:"status_list_seconds"`
	StatusListed   int     `json:"status_listed"`
	HistoryListSec float64 `json:"history_list_seconds"`
	HistoryListed  int     `json:"history_listed"`
}

// CycleFigures is one vCluster's scheduling cycles while measuring.
type CycleFigures struct {
	Cycles      int     `json:"cycles"`
	MeanMs      float64 `json:"mean_ms"`
	P99BucketMs float64 `json:"p99_bucket_ms"` // upper bound of the histogram bucket of the 99th percentile
	SolveMeanMs float64 `json:"solve_mean_ms"`
}

// MemberFigures is one member's resources.
type MemberFigures struct {
	ID            string  `json:"id"`
	Role          string  `json:"role"` // while measuring
	CPUPercent    float64 `json:"cpu_percent"`
	RSSMiB        float64 `json:"rss_mib"`
	PeakRSSMiB    float64 `json:"peak_rss_mib"`
	RaftLogMiB    float64 `json:"raft_log_mib"`
	SnapshotMiB   float64 `json:"latest_snapshot_mib"`
	ArchiveMiB    float64 `json:"archive_mib"`
	SnapshotCount float64 `json:"raft_snapshots_taken"`
}

// StateFigures is the replicated state at one moment: its size as a
// snapshot stream (a backup is the same stream) and what it holds.
type StateFigures struct {
	When        string  `json:"when"`
	Allocations int     `json:"allocations"`
	Live        int     `json:"live"` // pending or holding nodes
	StreamMiB   float64 `json:"snapshot_stream_mib"`
	StreamSec   float64 `json:"snapshot_stream_seconds"` // taking it through the leader (backup), including transfer
	CheckSec    float64 `json:"invariant_check_seconds"`
	LeaderRSS   float64 `json:"leader_rss_mib"`
}

func (cfg *Config) logf(format string, args ...any) {
	if cfg.Log != nil {
		fmt.Fprintf(cfg.Log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
}

// Run starts the processes, loads them, measures, injects the faults and
// stops everything it started.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Nodes < 1 || cfg.Agents < 1 || cfg.Rate <= 0 || cfg.Duration <= 0 {
		return nil, errors.New("scale: nodes, agents, rate and duration must be positive")
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	rep := &Report{Started: time.Now().UTC(), Nodes: cfg.Nodes, Agents: cfg.Agents, Rate: cfg.Rate, Cycles: map[string]CycleFigures{}}
	c := &cluster{bin: cfg.Bin, dir: cfg.Dir}
	defer c.stop()

	cfg.logf("starting three members in %s", cfg.Dir)
	if err := c.startQuorum(ctx, []string{"--vclusters", "hpc-batch,ml-training", "--tenants", strings.Join(cfg.Mix.Tenants, ","),
		"--max-array-size", "100000", "--node-timeout", "10m", "--degraded-after", "5m", "--raft-heartbeat-timeout", "1s",
		"--retention", cfg.Retention.String(), "--prune-interval", cfg.PruneInterval.String(), "--pprof"}); err != nil {
		return rep, err
	}
	split := func(k int) string {
		m := min(k-1, int(float64(k)*cfg.MLNodeFraction))
		if m <= 0 {
			return fmt.Sprintf("hpc-batch:%d", k)
		}
		return fmt.Sprintf("hpc-batch:%d,ml-training:%d", k-m, m)
	}
	cfg.logf("starting %d agents simulating %d nodes (virtual runs)", cfg.Agents, cfg.Nodes)
	if err := c.startAgents(cfg.Nodes, cfg.Agents, cfg.GroupSize, split, true); err != nil {
		return rep, err
	}
	if err := c.waitNodes(ctx, cfg.Nodes, 5*time.Minute); err != nil {
		return rep, err
	}
	cfg.logf("all %d nodes Ready; submitting a backlog of %d allocations", cfg.Nodes, cfg.Backlog)
	created, err := submitBacklog(ctx, c, cfg.Backlog, 500, &cfg.Mix, cfg.Seed)
	rep.Backlog = created
	if err != nil {
		return rep, err
	}
	rep.States = append(rep.States, checkState(ctx, c, "after the backlog", rep))

	// Measure.
	leader, err := c.leader(ctx)
	if err != nil {
		return rep, err
	}
	before := map[string]sample{}
	cpu0 := map[string]procStat{}
	for _, m := range c.members {
		if s, err := scrape(ctx, m.metrics); err == nil {
			before[m.id] = s
		}
		cpu0[m.id], _ = readProc(m.pid())
	}
	cfg.logf("measuring for %s at %.0f submissions/s through the three members", cfg.Duration, cfg.Rate)
	lat, direct, forwarded := &latencies{log: []submission{}}, &latencies{}, &latencies{}
	mctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	began := time.Now()
	rep.Measuring = began.UTC()
	var wg sync.WaitGroup
	profiles := &sync.WaitGroup{}
	if cfg.Profile {
		// Two seconds short of the window, so the profiles cover
		// submissions at the rate only.
		profiles = profileLeader(ctx, leader.metrics, filepath.Join(cfg.Dir, "profiles"), cfg.Duration-2*time.Second, cfg.logf)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		rep.Submitted = submitAtRate(mctx, c.members, leader, cfg.Rate, &cfg.Mix, cfg.Seed+1, lat, direct, forwarded)
	}()
	if cfg.InvariantEvery <= 0 {
		<-mctx.Done()
	} else {
		tick := time.NewTicker(cfg.InvariantEvery)
	loop:
		for {
			select {
			case <-mctx.Done():
				break loop
			case <-tick.C:
				rep.States = append(rep.States, checkState(ctx, c, fmt.Sprintf("measuring, %.0f s", time.Since(began).Seconds()), rep))
			}
		}
		tick.Stop()
	}
	wg.Wait()
	cancel()
	elapsed := time.Since(began).Seconds()
	profiles.Wait()
	rep.Duration = elapsed
	p50, p99, mx, _ := lat.quantiles()
	rep.SubmitP50ms, rep.SubmitP99ms, rep.SubmitMaxms = ms(p50), ms(p99), ms(mx)
	p50, p99, _, _ = direct.quantiles()
	rep.SubmitLeaderP50ms, rep.SubmitLeaderP99ms = ms(p50), ms(p99)
	p50, p99, _, _ = forwarded.quantiles()
	rep.SubmitForwardedP50ms, rep.SubmitForwardedP99ms = ms(p50), ms(p99)
	rep.SubmitErrors, rep.FirstError = lat.errors, lat.first
	rep.SubmitWindows = lat.windows(began, 10*time.Second)
	if err := lat.writeSeries(filepath.Join(cfg.Dir, "submits.csv"), began); err != nil {
		cfg.logf("writing the submissions' time series: %v", err)
	}
	after := map[string]sample{}
	for _, m := range c.members {
		if s, err := scrape(ctx, m.metrics); err == nil {
			after[m.id] = s
		}
		ps, _ := readProc(m.pid())
		role := "follower"
		if m == leader {
			role = "leader"
		}
		rep.Members = append(rep.Members, MemberFigures{ID: m.id, Role: role,
			CPUPercent: 100 * (ps.CPU - cpu0[m.id].CPU).Seconds() / elapsed,
			RSSMiB:     float64(ps.RSS) / (1 << 20), PeakRSSMiB: float64(ps.PeakRSS) / (1 << 20)})
	}
	lb, la := before[leader.id], after[leader.id]
	for _, vc := range la.labelValues("lattice_scheduler_cycle_duration_seconds_count", "vcluster") {
		lab := `vcluster="` + vc + `"`
		h := histDelta(lb, la, "lattice_scheduler_cycle_duration_seconds", lab)
		sh := histDelta(lb, la, "lattice_scheduler_solve_duration_seconds", lab)
		rep.Cycles[vc] = CycleFigures{Cycles: int(h.Count), MeanMs: 1000 * h.mean(), P99BucketMs: 1000 * h.quantile(0.99), SolveMeanMs: 1000 * sh.mean()}
	}
	ph := histDelta(lb, la, "lattice_quorum_propose_duration_seconds", `command="submit"`)
	rep.ProposeSubmitMeanms, rep.ProposeSubmitP99Bucket = 1000*ph.mean(), 1000*ph.quantile(0.99)
	ch := histDelta(lb, la, "lattice_raft_commit_duration_seconds")
	rep.RaftCommitMeanms, rep.RaftCommitP99Bucket = 1000*ch.mean(), 1000*ch.quantile(0.99)
	rep.RaftEntriesPerSec = (la.sum("lattice_quorum_commands_applied_total") - lb.sum("lattice_quorum_commands_applied_total")) / elapsed
	rep.RaftAppendsPerSec = map[string]float64{}
	for _, m := range c.members {
		if b, ok := before[m.id]; ok {
			rep.RaftAppendsPerSec[m.id] = (after[m.id].sum("lattice_raft_boltdb_storeLogs_count") - b.sum("lattice_raft_boltdb_storeLogs_count")) / elapsed
		}
	}
	rep.PlacementsPerSec = (la.sum("lattice_scheduler_allocations_started_total") - lb.sum("lattice_scheduler_allocations_started_total")) / elapsed
	rep.CompletionsPerSec = (la.sum("lattice_allocations", `state="COMPLETED"`) - lb.sum("lattice_allocations", `state="COMPLETED"`)) / elapsed
	rep.States = append(rep.States, checkState(ctx, c, "after measuring", rep))

	// A follower stops, misses work, restarts and catches up.
	var follower *member
	for _, m := range c.members {
		if m != leader {
			follower = m
			break
		}
	}
	bg, stopBG := context.WithCancel(ctx)
	bgLat := &latencies{}
	go submitAtRate(bg, []*member{leader}, leader, cfg.Rate, &cfg.Mix, cfg.Seed+2, bgLat, &latencies{}, &latencies{})
	cfg.logf("killing follower %s for %s under load", follower.id, cfg.Downtime)
	c.kill(follower)
	time.Sleep(cfg.Downtime)
	target := uint64(0)
	if st, err := leader.status(ctx); err == nil {
		target = st.CommitIndex
	}
	restarted := time.Now()
	if err := c.start(follower); err != nil {
		stopBG()
		return rep, err
	}
	for time.Since(restarted) < 2*time.Minute {
		if st, err := follower.status(ctx); err == nil && st.AppliedIndex >= target && target > 0 {
			rep.FollowerCatchUpSec = time.Since(restarted).Seconds()
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cfg.logf("follower %s caught up with index %d in %.2f s", follower.id, target, rep.FollowerCatchUpSec)
	stopBG()
	rep.States = append(rep.States, checkState(ctx, c, "after the follower restart", rep))

	// The leader crashes; a surviving member takes submissions again.
	cfg.logf("killing the leader %s", leader.id)
	c.kill(leader)
	killed := time.Now()
	probe := &latticev1.AllocationRequest{Name: "failover-probe", NodesMin: 1, WalltimeSeconds: 60, Command: []string{"true"}, Tenant: cfg.Mix.Tenants[0]}
	for n := 0; time.Since(killed) < time.Minute; n++ {
		if rep.ElectionSec == 0 {
			if l, err := c.leader(ctx); err == nil && l != leader {
				rep.ElectionSec = time.Since(killed).Seconds()
			}
		}
		m := c.members[n%3]
		if m == leader {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err := m.allocs.Submit(cctx, &latticev1.SubmitRequest{Request: probe, ClientRequestId: "failover-probe"})
		cancel()
		if err == nil {
			rep.FailoverSec = time.Since(killed).Seconds()
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cfg.logf("submissions accepted again %.2f s after the leader died (election %.2f s)", rep.FailoverSec, rep.ElectionSec)
	if err := c.start(leader); err != nil {
		return rep, err
	}
	_ = c.waitReady(ctx, leader, time.Minute)
	rep.States = append(rep.States, checkState(ctx, c, "after failover", rep))

	// What users see with the whole state listed.
	if l, err := c.leader(ctx); err == nil {
		rep.StatusListSec, rep.StatusListed = listAll(ctx, l, nil)
		rep.HistoryListSec, rep.HistoryListed = listAll(ctx, l, []string{"COMPLETED", "FAILED", "CANCELLED"})
	}
	for _, m := range c.members {
		fig := memberFigures(rep, m.id)
		fig.RaftLogMiB = float64(dirSize(filepath.Join(m.dir, "raft"))) / (1 << 20)
		fig.SnapshotMiB = float64(latestSnapshot(m.dir)) / (1 << 20)
		fig.ArchiveMiB = float64(dirSize(filepath.Join(m.dir, "archive"))) / (1 << 20)
		if s, err := scrape(ctx, m.metrics); err == nil {
			fig.SnapshotCount = s.sum("lattice_raft_snapshot_persist_count") + s.sum("lattice_raft_snapshot_create_count")
		}
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	_ = os.WriteFile(filepath.Join(cfg.Dir, "report.json"), b, 0o644)
	return rep, nil
}

func memberFigures(rep *Report, id string) *MemberFigures {
	for i := range rep.Members {
		if rep.Members[i].ID == id {
			return &rep.Members[i]
		}
	}
	rep.Members = append(rep.Members, MemberFigures{ID: id})
	return &rep.Members[len(rep.Members)-1]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// checkState takes the state from the leader as a backup stream (the same
// bytes as a Raft snapshot), times it, checks every invariant on it and
// records its size against what it holds.
func checkState(ctx context.Context, c *cluster, when string, rep *Report) StateFigures {
	f := StateFigures{When: when}
	l, err := c.leader(ctx)
	if err != nil {
		rep.InvariantFailures = append(rep.InvariantFailures, when+": "+err.Error())
		return f
	}
	began := time.Now()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	stream, err := l.admin.Backup(cctx, &latticev1.BackupRequest{})
	var buf bytes.Buffer
	for err == nil {
		var chunk *latticev1.BackupChunk
		chunk, err = stream.Recv()
		if chunk != nil {
			buf.Write(chunk.Data)
		}
	}
	if !errors.Is(err, io.EOF) {
		rep.InvariantFailures = append(rep.InvariantFailures, when+": backup: "+err.Error())
		return f
	}
	f.StreamSec = time.Since(began).Seconds()
	f.StreamMiB = float64(buf.Len()) / (1 << 20)
	checked := time.Now()
	s, err := quorum.ReadSnapshot(bytes.NewReader(buf.Bytes()))
	rep.InvariantChecks++
	if err != nil {
		rep.InvariantFailures = append(rep.InvariantFailures, when+": "+err.Error())
		return f
	}
	if v := quorum.CheckInvariants(s); len(v) > 0 {
		sort.Strings(v)
		rep.InvariantFailures = append(rep.InvariantFailures, fmt.Sprintf("%s: %d violations, first: %s", when, len(v), v[0]))
	}
	f.CheckSec = time.Since(checked).Seconds()
	f.Allocations = s.AllocationCount()
	for _, a := range s.Allocations() {
		if !a.State.Terminal() {
			f.Live++
		}
	}
	if ps, err := readProc(l.pid()); err == nil {
		f.LeaderRSS = float64(ps.RSS) / (1 << 20)
	}
	return f
}

// listAll reads every page of a listing, as `latticectl status` does.
func listAll(ctx context.Context, m *member, states []string) (float64, int) {
	began := time.Now()
	n := 0
	req := &latticev1.ListAllocationsRequest{States: states}
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		page, err := m.allocs.List(cctx, req)
		cancel()
		if err != nil {
			return time.Since(began).Seconds(), -n
		}
		n += len(page.Allocations)
		if page.NextPageToken == "" {
			break
		}
		req.PageToken = page.NextPageToken
	}
	return time.Since(began).Seconds(), n
}

// WriteText prints a report for people.
func (r *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "Lattice scale run %s: %d simulated nodes in %d agents, three members, backlog %d allocations\n",
		r.Started.Format(time.RFC3339), r.Nodes, r.Agents, r.Backlog)
	fmt.Fprintf(w, "submit (unary, round-robin over the members, target %.0f/s for %.0f s): %d sent, %d errors; p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
		r.Rate, r.Duration, r.Submitted, r.SubmitErrors, r.SubmitP50ms, r.SubmitP99ms, r.SubmitMaxms)
	if len(r.SubmitWindows) > 0 {
		fmt.Fprintf(w, "  by 10 s of sending (p50 / p99 ms, %% over 10 ms):")
		for _, win := range r.SubmitWindows {
			fmt.Fprintf(w, " %.0f-%.0f s %.1f / %.1f, %.0f%%;", win.FromS, win.ToS, win.P50ms, win.P99ms, win.Over10pct)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "  sent to the leader p50 %.2f ms, p99 %.2f ms; forwarded by a follower p50 %.2f ms, p99 %.2f ms; leader's propose-to-apply of Submit mean %.2f ms, p99 bucket <= %.1f ms\n",
		r.SubmitLeaderP50ms, r.SubmitLeaderP99ms, r.SubmitForwardedP50ms, r.SubmitForwardedP99ms, r.ProposeSubmitMeanms, r.ProposeSubmitP99Bucket)
	if len(r.RaftAppendsPerSec) > 0 {
		ids := make([]string, 0, len(r.RaftAppendsPerSec))
		for id := range r.RaftAppendsPerSec {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		var per []string
		for _, id := range ids {
			per = append(per, fmt.Sprintf("%s %.0f", id, r.RaftAppendsPerSec[id]))
		}
		fmt.Fprintf(w, "  leader's Raft commit (every command) mean %.2f ms, p99 bucket <= %.1f ms; %.0f entries/s applied, appends stored per second: %s; each submission's time in DIR/submits.csv\n",
			r.RaftCommitMeanms, r.RaftCommitP99Bucket, r.RaftEntriesPerSec, strings.Join(per, ", "))
	}
	if r.FirstError != "" {
		fmt.Fprintf(w, "  first submit error: %s\n", r.FirstError)
	}
	vcs := make([]string, 0, len(r.Cycles))
	for vc := range r.Cycles {
		vcs = append(vcs, vc)
	}
	sort.Strings(vcs)
	for _, vc := range vcs {
		c := r.Cycles[vc]
		fmt.Fprintf(w, "scheduler cycle %-12s %5d cycles, mean %.1f ms (solve %.1f ms), p99 bucket <= %.0f ms\n", vc, c.Cycles, c.MeanMs, c.SolveMeanMs, c.P99BucketMs)
	}
	fmt.Fprintf(w, "placements %.1f/s, completions %.1f/s\n", r.PlacementsPerSec, r.CompletionsPerSec)
	for _, m := range r.Members {
		fmt.Fprintf(w, "member %s (%s): CPU %.0f%%, RSS %.0f MiB (peak %.0f), raft log %.1f MiB, latest snapshot %.1f MiB, archive %.1f MiB\n",
			m.ID, m.Role, m.CPUPercent, m.RSSMiB, m.PeakRSSMiB, m.RaftLogMiB, m.SnapshotMiB, m.ArchiveMiB)
	}
	for _, s := range r.States {
		per := 0.0
		if s.Allocations > 0 {
			per = s.StreamMiB * (1 << 20) / float64(s.Allocations)
		}
		fmt.Fprintf(w, "state %-22s %7d allocations (%d live): snapshot stream %.1f MiB (%.0f B/allocation) in %.2f s, invariants checked in %.2f s, leader RSS %.0f MiB\n",
			s.When, s.Allocations, s.Live, s.StreamMiB, per, s.StreamSec, s.CheckSec, s.LeaderRSS)
	}
	fmt.Fprintf(w, "restarted follower caught up in %.2f s; failover: election %.2f s, submissions accepted again after %.2f s\n",
		r.FollowerCatchUpSec, r.ElectionSec, r.FailoverSec)
	fmt.Fprintf(w, "listing: status %d allocations in %.2f s, history %d in %.2f s\n", r.StatusListed, r.StatusListSec, r.HistoryListed, r.HistoryListSec)
	fmt.Fprintf(w, "invariants: %d checks, %d failures\n", r.InvariantChecks, len(r.InvariantFailures))
	for _, f := range r.InvariantFailures {
		fmt.Fprintf(w, "  %s\n", f)
	}
}
