package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/scale"
)

// benchCommand is the scale harness (docs/scale.md).
func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "scale harness: three members and simulated agents on this machine, loaded and measured (docs/scale.md)",
		Subcommands: []*cli.Command{
			{
				Name:  "scale",
				Usage: "N simulated nodes (virtual runs), a backlog, submissions at a rate, a follower restart and a failover",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "dir", Usage: "work dir (data dirs, logs, report.json); default a new temp dir", EnvVars: env("bench-dir")},
					&cli.IntFlag{Name: "nodes", Value: 10000, Usage: "simulated nodes", EnvVars: env("bench-nodes")},
					&cli.IntFlag{Name: "agents", Value: 4, Usage: "agent processes the nodes are split over", EnvVars: env("bench-agents")},
					&cli.IntFlag{Name: "group-size", Value: 16, Usage: "nodes per dragonfly group", EnvVars: env("bench-group-size")},
					&cli.Float64Flag{Name: "ml-nodes", Value: 0.3, Usage: "fraction of the nodes in ml-training (the rest hpc-batch)", EnvVars: env("bench-ml-nodes")},
					&cli.IntFlag{Name: "backlog", Value: 100000, Usage: "allocations submitted (batched) before measuring", EnvVars: env("bench-backlog")},
					&cli.Float64Flag{Name: "rate", Value: 200, Usage: "unary submissions per second while measuring", EnvVars: env("bench-rate")},
					&cli.DurationFlag{Name: "duration", Value: 60e9, Usage: "measuring time", EnvVars: env("bench-duration")},
					&cli.DurationFlag{Name: "check-every", Value: 0, Usage: "also take a backup and check every invariant this often while measuring (it loads the leader and skews the latency figures; by default the state is checked after the backlog, after measuring, after the follower restart and after the failover)", EnvVars: env("bench-check-every")},
					&cli.DurationFlag{Name: "retention", Value: 120e9, Usage: "members' --retention: ended allocations move to the archive after this", EnvVars: env("bench-retention")},
					&cli.DurationFlag{Name: "prune-interval", Value: 30e9, Usage: "members' --prune-interval", EnvVars: env("bench-prune-interval")},
					&cli.DurationFlag{Name: "downtime", Value: 5e9, Usage: "how long the restarted follower stays down", EnvVars: env("bench-downtime")},
					&cli.StringFlag{Name: "sizes", Value: "1:60,2:15,4:10,8:8,32:5,128:2", Usage: "nodes per job, NODES:WEIGHT,...", EnvVars: env("bench-sizes")},
					&cli.StringFlag{Name: "runtimes", Value: "30:30,120:40,600:30", Usage: "seconds a job runs, SECONDS:WEIGHT,... (walltime is twice that)", EnvVars: env("bench-runtimes")},
					&cli.Float64Flag{Name: "arrays", Value: 0.05, Usage: "fraction of backlog submissions that are arrays", EnvVars: env("bench-arrays")},
					&cli.IntFlag{Name: "array-tasks", Value: 100, Usage: "tasks per array", EnvVars: env("bench-array-tasks")},
					&cli.Float64Flag{Name: "ml-jobs", Value: 0.3, Usage: "fraction of submissions to ml-training", EnvVars: env("bench-ml-jobs")},
					&cli.Float64Flag{Name: "borrow", Value: 0.5, Usage: "fraction of ml-training jobs that are checkpointable (may borrow hpc-batch nodes)", EnvVars: env("bench-borrow")},
					&cli.StringFlag{Name: "tenants", Value: "default,physics,bio", Usage: "tenants submissions are spread over", EnvVars: env("bench-tenants")},
					&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the job mix", EnvVars: env("bench-seed")},
					&cli.BoolFlag{Name: "json", Usage: "print the report as JSON (it is also written to DIR/report.json)"},
					&cli.BoolFlag{Name: "profile", Usage: "save the leader's CPU, mutex, block and heap profiles over the measuring window in DIR/profiles (go tool pprof)", EnvVars: env("bench-profile")},
				},
				Action: runBenchScale,
			},
			{
				Name:  "throughput",
				Usage: "the Lattice side of ../shared/peers/slurm/throughput.sh: trivial one-node jobs by concurrent CLI loops, or queued first and released at once",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "dir", Usage: "work dir; default a new temp dir", EnvVars: env("bench-dir")},
					&cli.IntFlag{Name: "nodes", Value: 64, Usage: "simulated nodes (jobs run as real processes)", EnvVars: env("bench-nodes")},
					&cli.IntFlag{Name: "jobs", Value: 2000, Usage: "trivial one-node jobs (true)", EnvVars: env("bench-jobs")},
					&cli.IntFlag{Name: "loops", Value: 4, Usage: "concurrent latticectl submit loops (SUBMIT_PAR)", EnvVars: env("bench-loops")},
					&cli.BoolFlag{Name: "phased", Usage: "hold every node, submit the jobs as one array, then release the nodes at once (PHASED=1)", EnvVars: env("bench-phased")},
					&cli.StringFlag{Name: "latticectl", Usage: "latticectl binary (default: next to latticed, else on PATH)", EnvVars: env("latticectl")},
					&cli.DurationFlag{Name: "max-wait", Value: 600e9, Usage: "give up waiting for completion after this long (MAX_WAIT)", EnvVars: env("bench-max-wait")},
					&cli.BoolFlag{Name: "json", Usage: "print the report as JSON"},
				},
				Action: runBenchThroughput,
			},
		},
	}
}

func benchDir(c *cli.Context, prefix string) (string, error) {
	if d := c.String("dir"); d != "" {
		return d, nil
	}
	return os.MkdirTemp("", prefix)
}

func runBenchScale(c *cli.Context) error {
	sizes, err := scale.ParseWeighted("sizes", c.String("sizes"))
	if err != nil {
		return usageError{err}
	}
	runtimes, err := scale.ParseWeighted("runtimes", c.String("runtimes"))
	if err != nil {
		return usageError{err}
	}
	for _, f := range []string{"ml-nodes", "arrays", "ml-jobs", "borrow"} {
		if v := c.Float64(f); v < 0 || v > 1 {
			return usageError{&model.FieldError{Field: f, Value: fmt.Sprint(v), Allowed: "a fraction between 0 and 1"}}
		}
	}
	for _, f := range []string{"nodes", "agents", "group-size", "array-tasks"} {
		if c.Int(f) < 1 {
			return usageError{&model.FieldError{Field: f, Value: fmt.Sprint(c.Int(f)), Allowed: "an integer >= 1"}}
		}
	}
	if c.Float64("rate") <= 0 || c.Duration("duration") <= 0 || c.Int("backlog") < 0 {
		return usageError{&model.FieldError{Field: "rate/duration/backlog", Value: fmt.Sprint(c.Float64("rate"), c.Duration("duration"), c.Int("backlog")),
			Allowed: "rate > 0, duration > 0, backlog >= 0"}}
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := benchDir(c, "lattice-bench-")
	if err != nil {
		return err
	}
	var tenants []string
	for _, t := range strings.Split(c.String("tenants"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			tenants = append(tenants, t)
		}
	}
	if len(tenants) == 0 {
		return usageError{&model.FieldError{Field: "tenants", Value: c.String("tenants"), Allowed: "one or more tenant names, comma-separated"}}
	}
	ctx, stop := signalContext()
	defer stop()
	rep, err := scale.Run(ctx, scale.Config{
		Bin: bin, Dir: dir, Nodes: c.Int("nodes"), Agents: c.Int("agents"), GroupSize: c.Int("group-size"),
		MLNodeFraction: c.Float64("ml-nodes"), Backlog: c.Int("backlog"), Rate: c.Float64("rate"),
		Duration: c.Duration("duration"), InvariantEvery: c.Duration("check-every"), Downtime: c.Duration("downtime"),
		Retention: c.Duration("retention"), PruneInterval: c.Duration("prune-interval"),
		Mix: scale.Mix{Sizes: sizes, Runtimes: runtimes, ArrayFraction: c.Float64("arrays"), ArrayTasks: c.Int("array-tasks"),
			MLFraction: c.Float64("ml-jobs"), BorrowFraction: c.Float64("borrow"), Tenants: tenants},
		Seed: c.Uint64("seed"), Log: os.Stderr, Profile: c.Bool("profile"),
	})
	if rep != nil {
		if c.Bool("json") {
			b, _ := json.MarshalIndent(rep, "", "  ")
			fmt.Println(string(b))
		} else {
			rep.WriteText(os.Stdout)
		}
		fmt.Fprintf(os.Stderr, "work dir (logs, data, report.json): %s\n", dir)
	}
	if err != nil {
		return err
	}
	if len(rep.InvariantFailures) > 0 {
		return fmt.Errorf("%d invariant checks failed", len(rep.InvariantFailures))
	}
	return nil
}

func runBenchThroughput(c *cli.Context) error {
	for _, f := range []string{"nodes", "jobs", "loops"} {
		if c.Int(f) < 1 {
			return usageError{&model.FieldError{Field: f, Value: fmt.Sprint(c.Int(f)), Allowed: "an integer >= 1"}}
		}
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	ctl := c.String("latticectl")
	if ctl == "" {
		ctl = filepath.Join(filepath.Dir(bin), "latticectl")
		if _, err := os.Stat(ctl); err != nil {
			ctl = "latticectl"
		}
	}
	dir, err := benchDir(c, "lattice-throughput-")
	if err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	rep, err := scale.Throughput(ctx, scale.ThroughputConfig{Bin: bin, Latticectl: ctl, Dir: dir, Nodes: c.Int("nodes"),
		Jobs: c.Int("jobs"), Loops: c.Int("loops"), Phased: c.Bool("phased"), MaxWait: c.Duration("max-wait"), Log: os.Stderr})
	if err != nil {
		return err
	}
	if c.Bool("json") {
		b, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Println(string(b))
	} else {
		fmt.Println(rep.String())
	}
	return nil
}
