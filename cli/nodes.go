package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"
	"google.golang.org/grpc"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

func (r *runner) nodesCommand() *cli.Command {
	return &cli.Command{
		Name:  "nodes",
		Usage: "list nodes (sinfo-like), show, drain or undrain one",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "vcluster", Aliases: []string{"p", "partition"}, Usage: "only nodes whose current vCluster is this one"},
			&cli.StringFlag{Name: "state", Aliases: []string{"t", "states"}, Usage: "only these states: STATE[,STATE...] (Ready, Draining, Drained, Degraded, NotResponding, Down, Cleanup)"},
			&cli.BoolFlag{Name: "summary", Usage: "sinfo's default view: per vCluster, how many nodes are idle, alloc, drain... with their hostlists"},
		}, listingFlags()...),
		Action: r.nodesList,
		Subcommands: []*cli.Command{
			{
				Name:      "show",
				Usage:     "everything about a node (or each node of a hostlist)",
				ArgsUsage: "NODE|HOSTLIST",
				Action:    r.nodesShow,
			},
			{
				Name:      "drain",
				Usage:     "take no new work on a node (or a hostlist: 'node[010-019]'); it becomes Drained once its allocation ends",
				ArgsUsage: "NODE|HOSTLIST --reason R",
				Flags:     []cli.Flag{&cli.StringFlag{Name: "reason", Usage: "why (shown in nodes and show)"}},
				Action: func(c *cli.Context) error {
					reason := strings.TrimSpace(c.String("reason"))
					if reason == "" {
						return &model.FieldError{Field: "reason", Allowed: "a non-empty reason, e.g. --reason \"bad DIMM\""}
					}
					return r.nodeChange(c, func(ctx context.Context, cl latticev1.NodeServiceClient, name string) (*latticev1.NodeResponse, error) {
						return cl.Drain(ctx, &latticev1.DrainRequest{Name: name, Reason: reason})
					})
				},
			},
			{
				Name:      "undrain",
				Aliases:   []string{"resume"},
				Usage:     "let a drained node (or a hostlist of them) take work again (scontrol's State=RESUME)",
				ArgsUsage: "NODE|HOSTLIST",
				Action: func(c *cli.Context) error {
					return r.nodeChange(c, func(ctx context.Context, cl latticev1.NodeServiceClient, name string) (*latticev1.NodeResponse, error) {
						return cl.Undrain(ctx, &latticev1.UndrainRequest{Name: name})
					})
				},
			},
		},
	}
}

func (r *runner) listNodes(c *cli.Context, req *latticev1.ListNodesRequest) ([]*latticev1.Node, error) {
	cn, err := r.connect(c)
	if err != nil {
		return nil, err
	}
	var resp *latticev1.ListNodesResponse
	err = cn.unary(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		var err error
		resp, err = latticev1.NewNodeServiceClient(cc).List(ctx, req)
		return err
	})
	return resp.GetNodes(), err
}

func (r *runner) nodesList(c *cli.Context) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	if c.Args().Present() {
		word := c.Args().First()
		return usageErrorf("unknown command %q for \"latticectl nodes\"%s; use nodes show NODE, nodes drain NODE --reason R or nodes undrain NODE",
			word, didYouMean(suggest(word, commandNames(c.Command.Subcommands))))
	}
	req := &latticev1.ListNodesRequest{Vcluster: c.String("vcluster")}
	if s := c.String("state"); s != "" {
		for _, part := range strings.Split(s, ",") {
			st, err := model.ParseNodeState(strings.TrimSpace(part))
			if err != nil {
				return err
			}
			req.States = append(req.States, string(st))
		}
	}
	nodes, err := r.listNodes(c, req)
	if err != nil {
		return err
	}
	if c.Bool("summary") {
		return r.nodesSummary(format, nodes)
	}
	views := make([]nodeView, 0, len(nodes))
	for _, n := range nodes {
		views = append(views, nodeOf(n))
	}
	return r.emitAs(format, views, func(w io.Writer, wide bool) error {
		if wide {
			row(w, "NODE", "STATE", "HOME", "CURRENT", "GROUP", "FINGERPRINT", "ALLOC", "POWER", "GPUS", "FEATURES", "IDLE/BUSY", "REASON")
		} else {
			row(w, "NODE", "STATE", "HOME", "CURRENT", "GROUP", "FINGERPRINT", "ALLOC", "POWER")
			// A lent node shows its CURRENT vCluster with a '*', '*!' while its home reclaims it.
		}
		for _, v := range views {
			alloc := "-"
			if v.AllocationDisplayID != nil {
				alloc = *v.AllocationDisplayID
			}
			if wide {
				gpus := "-"
				if v.GPUs > 0 {
					gpus = strings.TrimSpace(fmt.Sprintf("%d %s", v.GPUs, v.GPUType))
				}
				row(w, v.Name, v.State, v.HomeVCluster, currentText(v), v.Group, orDash(v.Fingerprint), alloc,
					watts(int64(v.PowerWatts)), gpus, orDash(strings.Join(v.Features, ",")),
					fmt.Sprintf("%d/%dW", v.IdleWatts, v.BusyWatts), orDash(v.StateReason))
			} else {
				row(w, v.Name, v.State, v.HomeVCluster, currentText(v), v.Group, orDash(shortFingerprint(v.Fingerprint)), alloc, watts(int64(v.PowerWatts)))
			}
		}
		return nil
	})
}

func (r *runner) nodesShow(c *cli.Context) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	if err := needArgs(c, 1, 1, "NODE"); err != nil {
		return err
	}
	name := c.Args().First()
	names, err := model.ExpandHostlist(name)
	if err != nil {
		return &model.FieldError{Field: "node", Value: name, Allowed: "a node name or a Slurm hostlist such as node[010-019],gpu01"}
	}
	nodes, err := r.listNodes(c, &latticev1.ListNodesRequest{Names: names})
	if err != nil {
		return err
	}
	if len(names) > 1 {
		if format == formatJSON || format == formatYAML {
			views := make([]nodeView, 0, len(nodes))
			for _, n := range nodes {
				views = append(views, nodeOf(n))
			}
			return r.emitAs(format, views, nil)
		}
		for i, n := range nodes {
			if i > 0 {
				fmt.Fprintln(r.Stdout)
			}
			if err := r.printNode(format, n); err != nil {
				return err
			}
		}
		return nil
	}
	for _, n := range nodes {
		if n.GetName() == name {
			return r.printNode(format, n)
		}
	}
	return notFoundf("node %q not found", name)
}

func (r *runner) printNode(format string, n *latticev1.Node) error {
	v := nodeOf(n)
	return r.emitAs(format, v, func(w io.Writer, _ bool) error {
		kv(w, "Node", v.Name)
		kv(w, "State", v.State)
		kv(w, "Reason", orDash(v.StateReason))
		kv(w, "Home vCluster", v.HomeVCluster)
		switch {
		case v.ReturnRequested:
			kv(w, "Current vCluster", v.CurrentVCluster+" (borrowed; reclaimed by its home, returns when its allocation ends)")
		case v.Borrowed:
			kv(w, "Current vCluster", v.CurrentVCluster+" (borrowed)")
		default:
			kv(w, "Current vCluster", v.CurrentVCluster)
		}
		if v.ReservedFor != nil {
			kv(w, "Held for", fmt.Sprintf("allocation %d until %s", *v.ReservedFor, r.tableTime(n.GetReservedUntilUnixMs())))
		}
		if v.ReclaimedFrom != "" {
			kv(w, "Reclaimed from", fmt.Sprintf("%s at %s", v.ReclaimedFrom, r.tableTime(n.GetReclaimedAtUnixMs())))
		}
		kv(w, "Dragonfly group", v.Group)
		kv(w, "Fingerprint", orDash(v.Fingerprint))
		alloc := "-"
		if v.AllocationDisplayID != nil {
			alloc = *v.AllocationDisplayID
		}
		kv(w, "Allocation", alloc)
		pw := fmt.Sprintf("%s (idle %dW, busy %dW)", watts(int64(v.PowerWatts)), v.IdleWatts, v.BusyWatts)
		if v.MeasuredWatts > 0 {
			pw = fmt.Sprintf("%s (measured at %s; configured idle %dW, busy %dW)", watts(int64(v.PowerWatts)),
				r.tableTime(n.GetMeasuredAtUnixMs()), v.IdleWatts, v.BusyWatts)
		}
		kv(w, "Power", pw)
		if v.CPUs > 0 || v.MemoryMB > 0 { // detected by the agent of a real node
			kv(w, "CPUs", countOrDash(int64(v.CPUs), ""))
			kv(w, "Memory", countOrDash(v.MemoryMB, " MiB"))
		}
		if v.GPUs > 0 || v.GPUType != "" {
			kv(w, "GPUs", strings.TrimSpace(fmt.Sprintf("%d %s", v.GPUs, v.GPUType)))
		}
		kv(w, "Features", orDash(strings.Join(v.Features, ",")))
		kv(w, "Agent", orDash(v.Agent))
		kv(w, "Last heartbeat", r.tableTime(n.GetLastHeartbeatUnixMs()))
		return nil
	})
}

// nodeChange runs drain or undrain on NODE and prints the node after. A
// Slurm hostlist (node[010-019],gpu01) names several: each is changed in
// turn, one line each on stderr (a JSON list of the nodes with -o json).
func (r *runner) nodeChange(c *cli.Context, call func(context.Context, latticev1.NodeServiceClient, string) (*latticev1.NodeResponse, error)) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	if err := needArgs(c, 1, 1, c.Command.ArgsUsage); err != nil {
		return err
	}
	cn, err := r.connect(c)
	if err != nil {
		return err
	}
	names, err := model.ExpandHostlist(c.Args().First())
	if err != nil {
		return &model.FieldError{Field: "node", Value: c.Args().First(), Allowed: "a node name or a Slurm hostlist such as node[010-019],gpu01"}
	}
	if len(names) > 1 {
		return r.nodesChange(c, cn, format, names, call)
	}
	var resp *latticev1.NodeResponse
	err = cn.unary(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		var err error
		resp, err = call(ctx, latticev1.NewNodeServiceClient(cc), c.Args().First())
		return err
	})
	if err != nil {
		return err
	}
	if resp.GetNode() == nil {
		fmt.Fprintf(r.Stderr, "%s: done\n", c.Args().First())
		return nil
	}
	return r.printNode(format, resp.GetNode())
}

// countOrDash prints a detected figure, "-" when it was not detected.
func countOrDash(n int64, unit string) string {
	if n <= 0 {
		return "-"
	}
	return fmt.Sprintf("%d%s", n, unit)
}

// shortFingerprint is the first 12 characters of a fingerprint, like a
// short git hash; wide and show print it whole.
func shortFingerprint(f string) string {
	if len(f) > 12 {
		return f[:12]
	}
	return f
}

// watts prints a power figure: 850W, 12.5kW, 1.20MW.
func watts(w int64) string {
	switch {
	case w >= 1_000_000:
		return fmt.Sprintf("%.2fMW", float64(w)/1e6)
	case w >= 10_000:
		return fmt.Sprintf("%.1fkW", float64(w)/1e3)
	}
	return fmt.Sprintf("%dW", w)
}

// currentText is the CURRENT column: the vCluster using the node, marked
// '*' when it is borrowed and '*!' while its home reclaims it.
func currentText(v nodeView) string {
	switch {
	case v.ReturnRequested:
		return v.CurrentVCluster + "*!"
	case v.Borrowed:
		return v.CurrentVCluster + "*"
	}
	return v.CurrentVCluster
}

// nodesChange is nodeChange for several nodes: every one is tried; the
// exit code is the worst.
func (r *runner) nodesChange(c *cli.Context, cn *conn, format string, names []string,
	call func(context.Context, latticev1.NodeServiceClient, string) (*latticev1.NodeResponse, error)) error {
	views := []nodeView{}
	var firstErr error
	failed := 0
	for _, name := range names {
		var resp *latticev1.NodeResponse
		err := cn.unary(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
			var err error
			resp, err = call(ctx, latticev1.NewNodeServiceClient(cc), name)
			return err
		})
		if err != nil {
			failed++
			if firstErr == nil {
				firstErr = err
			}
			fmt.Fprintf(r.Stderr, "latticectl: %s: %v\n", name, err)
			continue
		}
		if n := resp.GetNode(); n != nil {
			views = append(views, nodeOf(n))
			if format != formatJSON && format != formatYAML {
				fmt.Fprintf(r.Stderr, "%s: %s\n", name, n.GetState())
			}
		}
	}
	if format == formatJSON || format == formatYAML {
		if err := r.emitAs(format, views, nil); err != nil {
			return err
		}
	}
	if failed > 0 {
		return withCode(ExitCode(firstErr), fmt.Errorf("%d of %d nodes not changed", failed, len(names)))
	}
	return nil
}
