// Package offline is latticectl's offline tools: `latticectl replay` (the
// solver, the predictor and plotting, on a trace, no server), linked only
// into latticectl-offline, which latticectl runs for them (cli/offline.go).
package offline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	latticecli "github.com/latticehpc/lattice/cli"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/replay"
)

// replayRun is one replay to do: a name and a setting.
type replayRun struct {
	name string
	cfg  replay.Config
}

// Replay is `latticectl replay`'s action: the flags are latticectl's
// (cli/replay_flags.go); cmd/latticectl-offline sets cli.ReplayAction to it.
func Replay(c *cli.Context) error {
	if c.NArg() != 1 {
		return latticecli.UsageErrorf("usage: latticectl replay TRACE [flags] (see --help)")
	}
	format, err := latticecli.OutputFormat(c)
	if err != nil {
		return err
	}
	stdout, stderr := replayWriters(c)
	base, policies, err := replayBase(c)
	if err != nil {
		return latticecli.UsageErrorf("%v", err)
	}
	var dims []replay.SweepDim
	for _, s := range latticecli.RepeatedValues(c, "sweep") {
		d, err := replay.ParseSweep(s)
		if err != nil {
			return latticecli.UsageErrorf("%v", err)
		}
		dims = append(dims, d)
	}

	tr, err := replay.ReadFile(c.Args().First(), replay.ReadOptions{Lenient: c.Bool("lenient")})
	if err != nil {
		var se *replay.SyntaxError
		if errors.As(err, &se) {
			return latticecli.UsageErrorf("%v (use --lenient to skip malformed lines)", err)
		}
		return err
	}
	tr = tr.First(c.Int("first"))
	if path := c.String("service-load"); path != "" {
		pts, err := replay.ReadServiceLoadFile(path)
		if err != nil {
			return latticecli.UsageErrorf("--service-load %s: %v", path, err)
		}
		before := len(tr.Jobs)
		if tr, err = tr.WithServiceLoad(pts, c.String("service-vcluster"), 0); err != nil {
			return latticecli.UsageErrorf("--service-load %s: %v", path, err)
		}
		fmt.Fprintf(stderr, "service load %s: %d instance runs added (the metrics count the trace's jobs only; JSON: service_node_hours, service_max_wait_s)\n", path, len(tr.Jobs)-before)
	}
	fmt.Fprintf(stderr, "replay %s: %d jobs on %d nodes", tr.Name, len(tr.Jobs), tr.Capacity)
	if tr.Dropped > 0 {
		fmt.Fprintf(stderr, ", %d dropped by the job model", tr.Dropped)
	}
	if tr.Skipped > 0 {
		fmt.Fprintf(stderr, ", %d malformed lines skipped", tr.Skipped)
	}
	fmt.Fprintln(stderr)
	base.Series = c.String("plot") != ""

	var runs []replayRun
	var baselines []string
	if len(dims) > 0 {
		grid, err := replay.Grid(base, dims)
		if err != nil {
			return latticecli.UsageErrorf("%v", err)
		}
		for _, p := range policies {
			if p != replay.PolicyLattice {
				baselines = append(baselines, p)
			}
		}
		if len(baselines) == 0 {
			baselines = []string{replay.PolicyEASY}
		}
		for _, s := range grid {
			s.Config.Policy = replay.PolicyLattice
			runs = append(runs, replayRun{name: s.Label, cfg: s.Config})
		}
	} else {
		baselines = policies
	}
	for _, p := range baselines {
		cfg := base
		cfg.Policy = p
		runs = append(runs, replayRun{name: p, cfg: cfg})
	}

	// The fairness report compares every policy with easy replayed in the
	// same run: when easy was not asked for, it runs too, unshown.
	fair := c.Bool("fairness") && slices.ContainsFunc(runs, func(r replayRun) bool { return r.cfg.Policy != replay.PolicyEASY })
	hiddenEASY := fair && !slices.Contains(baselines, replay.PolicyEASY)
	if hiddenEASY {
		cfg := base
		cfg.Policy, cfg.Series = replay.PolicyEASY, false
		runs = append(runs, replayRun{name: replay.PolicyEASY, cfg: cfg})
	}

	if os.Getenv("GOGC") == "" {
		// A replay allocates a fresh solver input every decision over a small
		// live heap: collecting less often saves about a third of the CPU
		// time (measured on 10,000 jobs). Only this short-lived process is
		// affected, and GOGC still wins when set.
		debug.SetGCPercent(400)
	}
	results, err := replayAll(c.Context, tr, runs, progressWriter(c, stderr))
	if err != nil {
		return err
	}
	if fair {
		var easy *replay.Result
		if hiddenEASY {
			easy = results[len(results)-1]
			runs, results = runs[:len(runs)-1], results[:len(results)-1]
		} else {
			easy = results[slices.IndexFunc(runs, func(r replayRun) bool { return r.cfg.Policy == replay.PolicyEASY })]
		}
		for i, r := range results {
			if runs[i].cfg.Policy != replay.PolicyEASY {
				r.Fairness = replay.CompareUsers(r.Metrics, easy.Metrics, 0)
			}
		}
	}
	if dir := c.String("plot"); dir != "" {
		named := make([]replay.Named, len(runs))
		for i, r := range runs {
			named[i] = replay.Named{Name: r.name, Result: results[i]}
		}
		files, err := replay.WritePlots(dir, named)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "plots: %s\n", strings.Join(files, ", "))
	}
	if len(dims) > 0 {
		nSet := len(runs) - len(baselines)
		return writeSweep(stdout, format, runs[:nSet], results[:nSet], results[nSet:], c.Float64("sweep-tolerance"))
	}
	ms := make([]replay.Metrics, len(results))
	for i, r := range results {
		ms[i] = r.Metrics
	}
	switch format {
	case "json":
		if len(ms) == 1 {
			return latticecli.WriteJSON(stdout, ms[0])
		}
		return latticecli.WriteJSON(stdout, ms)
	case "yaml":
		if len(ms) == 1 {
			return latticecli.WriteYAML(stdout, ms[0])
		}
		return latticecli.WriteYAML(stdout, ms)
	}
	return replayTable(stdout, ms)
}

// replayBase reads the flags shared by every run of one invocation.
func replayBase(c *cli.Context) (replay.Config, []string, error) {
	var cfg replay.Config
	var policies []string
	for p := range strings.SplitSeq(c.String("policy"), ",") {
		p = strings.ToLower(strings.TrimSpace(p))
		if p == "" {
			continue
		}
		if err := replay.ValidPolicy(p); err != nil {
			return cfg, nil, err
		}
		policies = append(policies, p)
	}
	if len(policies) == 0 {
		return cfg, nil, fmt.Errorf("--policy: allowed %s (comma-separated)", strings.Join(replay.Policies, ", "))
	}
	if c.Int("first") < 0 {
		return cfg, nil, fmt.Errorf("--first %d: allowed N >= 0", c.Int("first"))
	}
	cfg.GroupSize = c.Int("group-size")
	if cfg.GroupSize < 1 {
		return cfg, nil, fmt.Errorf("--group-size %d: allowed G >= 1", cfg.GroupSize)
	}
	if p := c.String("weights-profile"); p != "" {
		if _, err := replay.ProfileWeights(p); err != nil {
			return cfg, nil, err
		}
		cfg.WeightsProfile = p
	}
	for _, w := range latticecli.RepeatedValues(c, "weight") {
		d, err := replay.ParseSweep(w)
		if err != nil || len(d.Values) != 1 || !strings.HasPrefix(d.Name, "w") {
			return cfg, nil, fmt.Errorf("--weight %q: allowed fN=W with N in 1..9 and W in 0..1", w)
		}
		g, err := replay.Grid(cfg, []replay.SweepDim{d})
		if err != nil {
			return cfg, nil, err
		}
		cfg = g[0].Config
	}
	if len(cfg.Weights) > 0 {
		if w, err := replay.ProfileWeights(cfg.WeightsProfile); err == nil {
			for i, v := range cfg.Weights {
				if i >= 0 && i < len(w) {
					w[i] = v
				}
			}
			if _, note, err := replay.NormaliseWeights(w); err != nil {
				return cfg, nil, err
			} else if note != "" {
				fmt.Fprintf(os.Stderr, "latticectl replay: warning: %s\n", note)
			}
		}
	}
	depth, err := replay.ParseReservationDepth(c.String("reservation-depth"))
	if err != nil {
		return cfg, nil, err
	}
	cfg.ReservationDepth = depth
	if cfg.Cycle, err = replay.ParseCycle(c.String("cycle")); err != nil {
		return cfg, nil, err
	}
	if cfg.PerEvent = c.Bool("per-event"); cfg.PerEvent && cfg.Cycle > 0 {
		return cfg, nil, fmt.Errorf("--per-event: not with --cycle %s (a cycle decides on its ticks only)", c.String("cycle"))
	}
	if cr := strings.ToLower(strings.TrimSpace(c.String("corrector"))); cr != "" {
		if !slices.Contains(replay.Correctors, cr) {
			return cfg, nil, fmt.Errorf("--corrector %q: allowed %s", cr, strings.Join(replay.Correctors, ", "))
		}
		cfg.Corrector = cr
	}
	switch p := strings.ToLower(strings.TrimSpace(c.String("predictor"))); p {
	case "lattice", replay.PredictorOff:
		cfg.Predictor = p
	default:
		return cfg, nil, fmt.Errorf("--predictor %q: allowed lattice, off", p)
	}
	if c.IsSet("predicted-starts") {
		p := c.Bool("predicted-starts")
		cfg.PredictedStarts = &p
	}
	if c.IsSet("service-protect") {
		p := c.Bool("service-protect")
		cfg.ServiceProtect = &p
	}
	if re := c.String("running-ends"); re != "" {
		m, err := model.ParseRunningEnds(re)
		if err != nil {
			return cfg, nil, fmt.Errorf("--running-ends %q: allowed predicted, walltime", re)
		}
		cfg.RunningEnds = m
	}
	if fs := c.String("fair-share"); fs != "" {
		m, err := model.ParseFairShare(fs)
		if err != nil {
			return cfg, nil, fmt.Errorf("--fair-share %q: allowed usage, service, job-service", fs)
		}
		cfg.FairShare = m
	}
	if sw := strings.TrimSpace(c.String("starvation-wait")); sw == "none" || sw == "off" {
		cfg.StarvationWait = -1
	} else if d, err := time.ParseDuration(sw); err != nil || d <= 0 {
		return cfg, nil, fmt.Errorf("--starvation-wait %q: allowed a positive duration such as 72h, or none", sw)
	} else {
		cfg.StarvationWait = d
	}
	if sf := strings.TrimSpace(c.String("starvation-factor")); sf == "none" || sf == "off" {
		cfg.StarvationFactor = -1
	} else if f, err := strconv.ParseFloat(sf, 64); err != nil || !(f >= 1) || math.IsInf(f, 1) {
		return cfg, nil, fmt.Errorf("--starvation-factor %q: allowed a number ≥ 1 such as 1.25, or none", sf)
	} else {
		cfg.StarvationFactor = f
	}
	if sf := strings.TrimSpace(c.String("job-starvation-factor")); sf != "none" && sf != "off" {
		f, err := strconv.ParseFloat(sf, 64)
		if err != nil || !(f >= 1) || math.IsInf(f, 1) {
			return cfg, nil, fmt.Errorf("--job-starvation-factor %q: allowed a number ≥ 1 such as 1.25, or none", sf)
		}
		cfg.JobStarvationFactor = f
	}
	if sf := strings.TrimSpace(c.String("user-guard")); sf == "none" || sf == "off" {
		cfg.UserGuardFactor = -1
	} else if sf != "" {
		f, err := strconv.ParseFloat(sf, 64)
		if err != nil || !(f > 0) || math.IsInf(f, 1) {
			return cfg, nil, fmt.Errorf("--user-guard %q: allowed a number > 0 such as 1, or none", sf)
		}
		cfg.UserGuardFactor = f
	}
	if err := applyReplayEnergy(c, &cfg); err != nil {
		return cfg, nil, err
	}
	return cfg, policies, nil
}

func replayWriters(c *cli.Context) (stdout, stderr io.Writer) {
	stdout, stderr = os.Stdout, os.Stderr
	if c.App != nil && c.App.Writer != nil {
		stdout = c.App.Writer
	}
	if c.App != nil && c.App.ErrWriter != nil {
		stderr = c.App.ErrWriter
	}
	return stdout, stderr
}

// progressWriter is where the progress bar goes: stderr when it is a
// terminal or --progress asks for it; nil for none.
func progressWriter(c *cli.Context, stderr io.Writer) io.Writer {
	if c.Bool("progress") {
		return stderr
	}
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return stderr
	}
	return nil
}

// replayAll runs the replays on up to GOMAXPROCS cores, in order of runs;
// an interrupt (ctx done) stops them all.
func replayAll(ctx context.Context, tr *replay.Trace, runs []replayRun, progress io.Writer) ([]*replay.Result, error) {
	var bar *progressbar.ProgressBar
	if progress != nil {
		bar = progressbar.NewOptions64(int64(len(tr.Jobs))*int64(len(runs)),
			progressbar.OptionSetWriter(progress),
			progressbar.OptionSetDescription(fmt.Sprintf("replaying %d run(s)", len(runs))),
			progressbar.OptionShowCount(),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
	}
	results := make([]*replay.Result, len(runs))
	errs := make([]error, len(runs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(runs)) {
		wg.Go(func() {
			for i := range next {
				cfg := runs[i].cfg
				if bar != nil {
					last := 0
					cfg.Progress = func(done, _ int) {
						bar.Add(done - last)
						last = done
					}
				}
				results[i], errs[i] = replay.RunContext(ctx, tr, cfg)
			}
		})
	}
	for i := range runs {
		next <- i
	}
	close(next)
	wg.Wait()
	if bar != nil {
		bar.Finish()
	}
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("%s: %w", runs[i].name, err)
		}
	}
	return results, nil
}

// replayRows are the table's rows: label and value of one metric.
var replayRows = []struct {
	label string
	value func(m replay.Metrics) string
}{
	{"jobs", func(m replay.Metrics) string { return strconv.Itoa(m.Jobs) }},
	{"capacity (nodes)", func(m replay.Metrics) string { return strconv.Itoa(m.Capacity) }},
	{"avg wait (s)", func(m replay.Metrics) string { return fmtF(m.AvgWait, 1) }},
	{"p50 wait (s)", func(m replay.Metrics) string { return fmtF(m.P50Wait, 1) }},
	{"p95 wait (s)", func(m replay.Metrics) string { return fmtF(m.P95Wait, 1) }},
	{"p99 wait (s)", func(m replay.Metrics) string { return fmtF(m.P99Wait, 1) }},
	{"max wait (s)", func(m replay.Metrics) string { return fmtF(m.MaxWait, 1) }},
	{"avg bounded slowdown", func(m replay.Metrics) string { return fmtF(m.AvgBoundedSlowdown, 2) }},
	{"utilization", func(m replay.Metrics) string { return fmtF(m.Utilization, 3) }},
	{"makespan (s)", func(m replay.Metrics) string { return fmtF(m.Makespan, 0) }},
	{"idle: nothing fits", func(m replay.Metrics) string { return fmtF(m.Idle.NoFit, 3) }},
	{"idle: held back", func(m replay.Metrics) string { return fmtF(m.Idle.Held, 3) }},
	{"idle: queue empty", func(m replay.Metrics) string { return fmtF(m.Idle.Empty, 3) }},
	{"jain fairness", func(m replay.Metrics) string { return fmtF(m.JainFairness, 3) }},
	{"multi-group jobs", func(m replay.Metrics) string { return fmtF(m.MultiGroupJobs, 3) }},
	{"prediction accuracy", func(m replay.Metrics) string {
		if m.Prediction == nil {
			return "-"
		}
		return fmtF(m.Prediction.Accuracy, 3)
	}},
	{"walltime accuracy", func(m replay.Metrics) string {
		if m.Prediction == nil {
			return "-"
		}
		return fmtF(m.Prediction.WalltimeAccuracy, 3)
	}},
	{"underpredicted", func(m replay.Metrics) string {
		if m.Prediction == nil {
			return "-"
		}
		return fmtF(m.Prediction.Under, 3)
	}},
	{"wall seconds", func(m replay.Metrics) string { return fmtF(m.WallSeconds, 2) }},
}

// replayUsers is how many users the table's slowdown section shows.
const replayUsers = 10

// replayUserTable prints the average bounded slowdown of the users with the
// most jobs (in the first policy), one row per user, policies side by side.
func replayUserTable(tw io.Writer, ms []replay.Metrics, width int) {
	if len(ms) == 0 || len(ms[0].Users) < 2 {
		return
	}
	fmt.Fprintf(tw, "%-*s\t", width, "")
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "%-*s\t", width, "USER (JOBS): AVG BSLD")
	for _, m := range ms {
		fmt.Fprintf(tw, "%s\t", strings.ToUpper(m.Policy))
	}
	fmt.Fprintln(tw)
	for _, u := range ms[0].Users[:min(replayUsers, len(ms[0].Users))] {
		fmt.Fprintf(tw, "%-*s\t", width, fmt.Sprintf("%s (%d)", u.Tenant, u.Jobs))
		for _, m := range ms {
			v := "-"
			for _, x := range m.Users {
				if x.Tenant == u.Tenant {
					v = fmtF(x.AvgBoundedSlowdown, 2)
					break
				}
			}
			fmt.Fprintf(tw, "%s\t", v)
		}
		fmt.Fprintln(tw)
	}
}

func fmtF(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }

// replayTable prints the policies side by side, one metric per row.
func replayTable(w io.Writer, ms []replay.Metrics) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	width := 0
	for _, r := range replayRows {
		width = max(width, len(r.label))
	}
	width = max(width, replayEnergyWidth(ms), replayFairnessWidth(ms))
	// Right-aligned numbers, left-aligned labels: pad the labels ourselves.
	fmt.Fprintf(tw, "%-*s\t", width, "METRIC")
	for _, m := range ms {
		fmt.Fprintf(tw, "%s\t", strings.ToUpper(m.Policy))
	}
	fmt.Fprintln(tw)
	for _, r := range replayRows {
		fmt.Fprintf(tw, "%-*s\t", width, r.label)
		for _, m := range ms {
			fmt.Fprintf(tw, "%s\t", r.value(m))
		}
		fmt.Fprintln(tw)
	}
	replayEnergyTable(tw, ms, width)
	replayUserTable(tw, ms, width)
	replayFairnessTable(tw, ms, width)
	return tw.Flush()
}

// sweepRow is one sweep setting in JSON and YAML.
type sweepRow struct {
	Setting string `json:"setting"`
	replay.Metrics
}

// sweepReport is the sweep's JSON and YAML shape.
type sweepReport struct {
	Settings  []sweepRow       `json:"settings"`
	Baselines []replay.Metrics `json:"baselines"`
	// Best is the chosen setting (null when none keeps the utilization).
	Best      *string `json:"best"`
	Rule      string  `json:"rule"`
	Tolerance float64 `json:"utilization_tolerance"`
}

func writeSweep(w io.Writer, format string, runs []replayRun, settings, baselines []*replay.Result, tol float64) error {
	rep := sweepReport{Tolerance: tol,
		Rule: "lowest avg_bounded_slowdown among settings with utilization >= best baseline utilization - tolerance"}
	sm := make([]replay.Metrics, len(settings))
	for i, r := range settings {
		sm[i] = r.Metrics
		rep.Settings = append(rep.Settings, sweepRow{Setting: runs[i].name, Metrics: r.Metrics})
	}
	for _, b := range baselines {
		rep.Baselines = append(rep.Baselines, b.Metrics)
	}
	best := replay.Best(sm, rep.Baselines, tol)
	if best >= 0 {
		rep.Best = &runs[best].name
	}
	switch format {
	case "json":
		return latticecli.WriteJSON(w, rep)
	case "yaml":
		return latticecli.WriteYAML(w, rep)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SETTING\tAVG_BSLD\tUTIL\tAVG_WAIT_S\tP95_WAIT_S\tJAIN\tMULTI_GROUP\t")
	line := func(mark, name string, m replay.Metrics) {
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", mark, name, fmtF(m.AvgBoundedSlowdown, 2), fmtF(m.Utilization, 3),
			fmtF(m.AvgWait, 1), fmtF(m.P95Wait, 1), fmtF(m.JainFairness, 3), fmtF(m.MultiGroupJobs, 3))
	}
	for i, m := range sm {
		mark := "  "
		if i == best {
			mark = "* "
		}
		line(mark, runs[i].name, m)
	}
	for _, b := range rep.Baselines {
		line("  ", "baseline "+b.Policy, b)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if best < 0 {
		_, err := fmt.Fprintf(w, "best: none — every setting loses more than %.3f utilization against the best baseline\n", tol)
		return err
	}
	_, err := fmt.Fprintf(w, "best: %s (avg bounded slowdown %.2f, utilization %.3f; rule: %s, tolerance %.3f)\n",
		runs[best].name, sm[best].AvgBoundedSlowdown, sm[best].Utilization, rep.Rule, tol)
	return err
}
