package cli

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/latticehpc/lattice/power"
)

// The replay's defaults, as package replay has them. latticectl does not
// link package replay (see offline.go); cli/offline's tests check that
// these equal replay's.
const (
	ReplayDefaultPolicy         = "lattice" // replay.PolicyLattice
	ReplayDefaultGroupSize      = 32        // replay.DefaultGroupSize
	ReplayDefaultSweepTolerance = 0.01      // replay.DefaultSweepTolerance
)

// replayCommand is `latticectl replay`: offline trace simulation, no server
// needed (docs/replay.md). Its flags and help are here, so that help and
// shell completion need nothing else; the simulation runs in
// latticectl-offline (ReplayAction).
func (r *runner) replayCommand() *cli.Command {
	return &cli.Command{
		Name:      "replay",
		Usage:     "simulate a workload trace offline with the real solver",
		ArgsUsage: "TRACE",
		Description: "Replays an SWF (.swf, .swf.gz) or JSON trace in virtual time under one or more policies\n" +
			"and prints waits, bounded slowdown, utilization, fairness and topology metrics.\n" +
			"See docs/replay.md for the job model, the JSON trace format and the metric definitions.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "policy", Value: ReplayDefaultPolicy, Usage: "policies to compare, comma-separated: lattice, fcfs, easy, conservative, sjbf, easy++ (easy++:reqtime picks its corrector)"},
			&cli.BoolFlag{Name: "fairness", Value: true, Usage: "compare each user's average bounded slowdown (users with at least 20 jobs) with easy's in the same run, which replays easy too when --policy does not name it; --fairness=false skips it"},
			&cli.StringFlag{Name: "predictor", Value: "lattice", Usage: "lattice: runtime predictor for release times and the queue order: lattice (recent runs of the user) or off (walltimes)"},
			&cli.BoolFlag{Name: "predicted-starts", Usage: "lattice: fit starts into holes by predicted runtimes, not only walltimes; default on for backfill vClusters, --predicted-starts=false turns it off", DefaultText: "on for backfill vClusters"},
			&cli.BoolFlag{Name: "service-protect", Usage: "lattice: give a reservation to a job whose bounded slowdown would leave its user above Jain's threshold (Σs²/Σs over the users' slowdowns); default on for backfill vClusters, --service-protect=false turns it off", DefaultText: "on for backfill vClusters"},
			&cli.StringFlag{Name: "running-ends", Usage: "lattice: release times of running work: predicted (start + predicted runtime, corrected at overrun) or walltime (EASY's); default walltime for backfill vClusters, predicted for the others"},
			&cli.StringFlag{Name: "fair-share", Usage: "lattice: f3 rewards tenants behind their share of usage (usage), or behind in usage or in service — their recent average bounded slowdown above everyone's (service), or job by job, each job's wait counted in its tenant's average (job-service); default job-service for backfill vClusters, usage for the others"},
			&cli.StringFlag{Name: "starvation-wait", Value: "72h", Usage: "lattice: past this wait of any pending job, running work is planned with walltimes (a duration, or none)"},
			&cli.StringFlag{Name: "user-guard", Value: "1", Usage: "lattice: a user whose jobs recently started later than conservative backfilling promised them on arrival has its jobs reserved for once they have waited this factor × that promise (a number ≥ 1, or none)"},
			&cli.StringFlag{Name: "job-starvation-factor", Value: "none", Usage: "lattice: once any job has waited this factor × the wait conservative backfilling promised it on arrival, it gets a reservation before the others are decided (a number ≥ 1, or none)"},
			&cli.StringFlag{Name: "starvation-factor", Value: "1.25", Usage: "lattice: once the head has waited this factor × the wait EASY's reservation gave it, running work is planned with walltimes (a number ≥ 1, or none)"},
			&cli.StringFlag{Name: "corrector", Usage: "how a job that outlives its prediction is corrected: tsafrir (step by step) or reqtime (to its requested time); default tsafrir for easy++, reqtime for lattice"},
			&cli.IntFlag{Name: "first", Usage: "replay only the first `N` jobs (in submit order)"},
			&cli.IntFlag{Name: "group-size", Value: ReplayDefaultGroupSize, Usage: "nodes per synthetic dragonfly group"},
			&cli.StringFlag{Name: "weights-profile", Usage: "lattice: weights profile (default: the solver's balanced default)"},
			&cli.GenericFlag{Name: "weight", Value: &repeated{}, Usage: "lattice: override one weight, `fN=W` (repeatable)"},
			&cli.StringFlag{Name: "reservation-depth", Value: "1", Usage: "lattice: protected reservations: N, all or none"},
			&cli.StringFlag{Name: "cycle", Value: "0", Usage: "schedule every `S` seconds (or a duration like 30s) instead of at every arrival and completion"},
			&cli.BoolFlag{Name: "per-event", Usage: "decide after every single arrival and completion, arrivals first at equal times (the order of the SC'15 authors' simulator), instead of once per distinct time; not with --cycle"},
			&cli.BoolFlag{Name: "lenient", Usage: "skip malformed trace lines (counted) instead of failing"},
			&cli.StringFlag{Name: "service-load", Usage: "add a service's instances from `FILE` (SECONDS COUNT per line: how many it wants from then on; docs/services.md); the metrics count only the trace's jobs"},
			&cli.StringFlag{Name: "service-vcluster", Usage: "the vCluster of --service-load's instances (default: the first)"},
			&cli.StringFlag{Name: "plot", Usage: "write PNG charts (queue, utilization, waits over time) into `DIR`"},
			&cli.GenericFlag{Name: "sweep", Value: &repeated{}, Usage: "lattice: replay a grid, e.g. w3=0:0.5:0.1, profile=a,b, reservation-depth=1,2,all (repeat for a product)"},
			&cli.Float64Flag{Name: "sweep-tolerance", Value: ReplayDefaultSweepTolerance, Usage: "sweep: utilization a setting may lose against the best baseline and still win"},
			&cli.BoolFlag{Name: "progress", Usage: "show a progress bar on stderr even when it is not a terminal"},
		}, replayEnergyFlags()...),
		Action: func(c *cli.Context) error {
			if ReplayAction != nil {
				return ReplayAction(c)
			}
			return r.offline(c)
		},
	}
}

// replayEnergyFlags are replay's power model: a time-of-use price schedule,
// the rule that holds flexible work for cheap hours, node watts and a budget.
func replayEnergyFlags() []cli.Flag {
	d := power.DefaultShift()
	return []cli.Flag{
		&cli.StringFlag{Name: "energy-prices", Usage: "price schedule `FILE` (daily/weekly table or CSV TIME,PRICE, docs/operations.md); its start is trace time 0"},
		&cli.DurationFlag{Name: "energy-max-delay", Value: d.MaxDelay, Usage: "lattice: longest wait of flexible work for cheaper energy (0 = price it, shift nothing)"},
		&cli.Float64Flag{Name: "energy-min-saving", Value: d.MinSaving, Usage: "lattice: drop of the mean normalised price (0..1) worth waiting for"},
		&cli.IntFlag{Name: "energy-max-class", Value: d.MaxClass, Usage: "lattice: priority classes 0..N are flexible (-1: checkpointable work only)"},
		&cli.Float64Flag{Name: "energy-max-stretch", Value: d.MaxStretch, Usage: "lattice: a job waits for a price at most this multiple of its walltime (0 = only --energy-max-delay)"},
		&cli.StringFlag{Name: "node-watts", Usage: "`IDLE:BUSY` watts per node (default 100:400 with a schedule or a budget)"},
		&cli.StringFlag{Name: "power-budget-kw", Usage: "system power budget in kW the lattice policy keeps (0 = none)"},
	}
}

// repeated is a repeatable string flag that, unlike cli.StringSliceFlag,
// keeps commas inside a value ("--sweep profile=a,b").
type repeated struct{ values []string }

func (r *repeated) Set(v string) error { r.values = append(r.values, v); return nil }
func (r *repeated) String() string {
	if r == nil {
		return ""
	}
	return strings.Join(r.values, " ")
}

// RepeatedValues are the values given to a repeatable flag of replay
// (--weight, --sweep), in order.
func RepeatedValues(c *cli.Context, name string) []string {
	if r, ok := c.Generic(name).(*repeated); ok && r != nil {
		return r.values
	}
	return nil
}
