package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"google.golang.org/grpc"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// admin runs one unary AdminService call through the connection.
func (r *runner) admin(c *cli.Context, call func(context.Context, latticev1.AdminServiceClient) error) error {
	cn, err := r.connect(c)
	if err != nil {
		return err
	}
	return cn.unary(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		return call(ctx, latticev1.NewAdminServiceClient(cc))
	})
}

// ---- vcluster ----

func (r *runner) vclusterCommand() *cli.Command {
	return &cli.Command{
		Name:  "vcluster",
		Usage: "vClusters: their weights, cycle, borrowing policy and usage",
		Subcommands: []*cli.Command{
			{Name: "list", Usage: "list vClusters", Flags: listingFlags(), Action: r.vclusterList},
			{Name: "show", Usage: "everything about one vCluster", ArgsUsage: "NAME", Action: r.vclusterShow},
			{
				Name:      "set",
				Usage:     "change a vCluster's scheduling policy",
				ArgsUsage: "NAME [--weights-profile P] [--weight f3=0.3 ...] [--reservation-depth N|all] [--cycle 10s] [--allow-lending BOOL] [--allow-borrowing BOOL] [--power-cap-kw X] [--algorithm A] [--max-lend-fraction F] [--reclaim-grace D] [--reclaim-backoff D] [--preemption BOOL] [--preempt-mode M] [--preempt-horizon D] [--checkpointable-only-on-borrowed BOOL] [--fair-share M] [--service-protect BOOL] [--running-ends M] [--predicted-starts BOOL]",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "weights-profile", Usage: "weights profile to start from"},
					&cli.StringSliceFlag{Name: "weight", Usage: "override one weight, FACTOR=W with FACTOR f1..f9 and 0 <= W <= 1 (repeatable, or comma-separated)"},
					&cli.StringFlag{Name: "reservation-depth", Usage: "how many blocked jobs the backfill protects: 0, N or all"},
					&cli.StringFlag{Name: "cycle", Usage: "scheduler cycle, e.g. 10s"},
					&cli.StringFlag{Name: "allow-lending", Usage: "let other vClusters borrow idle nodes: true or false"},
					&cli.StringFlag{Name: "allow-borrowing", Usage: "borrow other vClusters' idle nodes: true or false"},
					&cli.StringFlag{Name: "power-cap-kw", Usage: "power cap in kW (0 = none)"},
					&cli.StringFlag{Name: "algorithm", Usage: "placement: backfill, fifo (strict order), binpack (fill busy groups first) or sensitive (one conformance group, never lends or borrows)"},
					&cli.StringFlag{Name: "max-lend-fraction", Usage: "share of its nodes that may be lent at once, 0 < F <= 1"},
					&cli.StringFlag{Name: "reclaim-grace", Usage: "how long a reclaimed or preempted job has to checkpoint before it is stopped, e.g. 60s"},
					&cli.StringFlag{Name: "reclaim-backoff", Usage: "how long a vCluster may not borrow back a node reclaimed from it, e.g. 5m"},
					&cli.StringFlag{Name: "preemption", Usage: "let higher priority classes preempt strictly lower ones: true or false"},
					&cli.StringFlag{Name: "preempt-mode", Usage: "what higher-class work does to lower-class work that cannot checkpoint (Slurm's PreemptMode): checkpoint (never preempts it; the default), requeue, cancel, suspend (frozen until the preemptor ends), or off (no preemption at all); work that can checkpoint is checkpointed and requeued"},
					&cli.StringFlag{Name: "preempt-horizon", Usage: "no preemption for work expected to start within this long anyway, e.g. 2m"},
					&cli.StringFlag{Name: "checkpointable-only-on-borrowed", Usage: "run only checkpointable work on borrowed nodes: true or false"},
					&cli.StringFlag{Name: "fair-share", Usage: "what the fair-share factor f3 ranks tenants by: usage (decayed node-seconds), service (also a tenant's recent average bounded slowdown above everyone's) or job-service (also each job's wait, counted in its tenant's average)"},
					&cli.StringFlag{Name: "service-protect", Usage: "give a reservation to a job whose wait would take its tenant's recent slowdown above Jain's threshold: true or false"},
					&cli.StringFlag{Name: "running-ends", Usage: "when the plan expects running work to end: walltime (start + walltime, like EASY and Slurm) or predicted (start + the runtime predicted from the user's recent runs)"},
					&cli.StringFlag{Name: "predicted-starts", Usage: "let a pending job start in a hole its predicted runtime fits, not only its walltime: true or false"},
					&cli.BoolFlag{Name: "create", Usage: "create the vCluster if it does not exist"},
					&cli.StringFlag{Name: "type", Usage: "type of a new vCluster: hpc-batch, ml-training, interactive, service, sensitive"},
				},
				Action: r.vclusterSet,
			},
		},
	}
}

func (r *runner) listVClusters(c *cli.Context) ([]*latticev1.VClusterInfo, error) {
	var resp *latticev1.ListVClustersResponse
	err := r.admin(c, func(ctx context.Context, cl latticev1.AdminServiceClient) error {
		var err error
		resp, err = cl.ListVClusters(ctx, &latticev1.ListVClustersRequest{})
		return err
	})
	return resp.GetVclusters(), err
}

func (r *runner) vclusterList(c *cli.Context) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	vcs, err := r.listVClusters(c)
	if err != nil {
		return err
	}
	views := make([]vclusterView, 0, len(vcs))
	for _, v := range vcs {
		views = append(views, vclusterOf(v))
	}
	return r.emitAs(format, views, func(w io.Writer, wide bool) error {
		head := []any{"NAME", "TYPE", "ALGORITHM", "PROFILE", "CYCLE", "DEPTH", "LEND", "BORROW", "NODES", "BUSY", "IDLE", "LENT", "BORROWED", "PENDING", "RUNNING", "POWER", "PREEMPT"}
		if wide {
			head = append(head, "GRACE", "CAP", "PARTITIONS", "WEIGHTS")
		}
		row(w, head...)
		for _, v := range views {
			cols := []any{v.Name, v.Type, v.Algorithm, orDash(v.WeightsProfile), secondsText(v.CycleSeconds), depthText(v.ReservationDepth),
				yesNo(v.AllowLending), yesNo(v.AllowBorrowing), v.Usage.CurrentNodes, v.Usage.BusyNodes, v.Usage.IdleNodes,
				v.Usage.LentNodes, v.Usage.BorrowedNodes, v.Usage.Pending, v.Usage.Running, watts(v.Usage.PowerWatts), v.PreemptMode}
			if wide {
				cols = append(cols, secondsText(v.ReclaimGraceSeconds), capText(v.PowerCapWatts), orDash(strings.Join(v.Partitions, ",")), weightsText(v.Weights))
			}
			row(w, cols...)
		}
		return nil
	})
}

func (r *runner) vclusterShow(c *cli.Context) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	if err := needArgs(c, 1, 1, "NAME"); err != nil {
		return err
	}
	name := c.Args().First()
	vcs, err := r.listVClusters(c)
	if err != nil {
		return err
	}
	for _, v := range vcs {
		if v.GetName() == name {
			return r.printVCluster(format, v)
		}
	}
	return notFoundf("vCluster %q not found", name)
}

func (r *runner) printVCluster(format string, info *latticev1.VClusterInfo) error {
	v := vclusterOf(info)
	return r.emitAs(format, v, func(w io.Writer, _ bool) error {
		kv(w, "Name", v.Name)
		kv(w, "Type", v.Type)
		kv(w, "Weights profile", orDash(v.WeightsProfile))
		kv(w, "Cycle", fmt.Sprintf("%s (min interval %s)", secondsText(v.CycleSeconds), secondsText(v.MinIntervalSecs)))
		kv(w, "Reservation depth", depthText(v.ReservationDepth))
		kv(w, "Allow lending", yesNo(v.AllowLending))
		kv(w, "Allow borrowing", yesNo(v.AllowBorrowing))
		kv(w, "Power cap", capText(v.PowerCapWatts))
		kv(w, "Algorithm", v.Algorithm)
		kv(w, "Max lend fraction", fmt.Sprintf("%.2f", v.MaxLendFraction))
		kv(w, "Reclaim grace", secondsText(v.ReclaimGraceSeconds))
		kv(w, "Reclaim back-off", secondsText(v.ReclaimBackoffSeconds))
		kv(w, "Preemption", fmt.Sprintf("%s (horizon %s)", yesNo(v.Preemption), secondsText(v.PreemptHorizonSeconds)))
		kv(w, "Preempt mode", preemptModeText(v.PreemptMode))
		kv(w, "Checkpointable only on borrowed", yesNo(v.CheckpointableOnlyOnBorrowed))
		kv(w, "Fair share", v.FairShare)
		kv(w, "Service protection", yesNo(v.ServiceProtect))
		kv(w, "Running work ends", v.RunningEnds)
		kv(w, "Predicted starts", yesNo(v.PredictedStarts))
		if p := info.GetPartitions(); len(p) > 0 {
			kv(w, "Partitions", strings.Join(p, ", "))
		}
		if v.LoopPanics > 0 {
			kv(w, "Recovered loop panics", v.LoopPanics)
		}
		u := v.Usage
		kv(w, "Nodes", fmt.Sprintf("%d home, %d current (%d busy, %d idle), %d lent, %d borrowed",
			u.HomeNodes, u.CurrentNodes, u.BusyNodes, u.IdleNodes, u.LentNodes, u.BorrowedNodes))
		kv(w, "Allocations", fmt.Sprintf("%d pending, %d running", u.Pending, u.Running))
		kv(w, "Power", watts(u.PowerWatts))
		if v.LastCycle != nil {
			kv(w, "Last cycle", fmt.Sprintf("%s (%.3fs)", r.tableTime(info.GetLastCycleUnixMs()), v.LastCycleSeconds))
		}
		if len(v.Weights) > 0 {
			fmt.Fprintln(w)
			row(w, "FACTOR", "WEIGHT")
			for _, k := range sortedWeights(v.Weights) {
				row(w, k, fmt.Sprintf("%.3f", v.Weights[k]))
			}
		}
		return nil
	})
}

func (r *runner) vclusterSet(c *cli.Context) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	if err := needArgs(c, 1, 1, "NAME [flags]"); err != nil {
		return err
	}
	req, err := vclusterSetRequest(c.Args().First(), func(name string) (string, bool) {
		if !c.IsSet(name) {
			return "", false
		}
		if name == "weight" {
			return strings.Join(c.StringSlice(name), ","), true
		}
		return c.String(name), true
	}, c.Bool("create"))
	if err != nil {
		return err
	}
	req.ClientRequestId = r.reqID()
	var info *latticev1.VClusterInfo
	if err := r.admin(c, func(ctx context.Context, cl latticev1.AdminServiceClient) error {
		var err error
		info, err = cl.SetVCluster(ctx, req)
		return err
	}); err != nil {
		return err
	}
	for _, w := range info.GetWarnings() {
		fmt.Fprintf(r.Stderr, "warning: %s\n", w)
	}
	return r.printVCluster(format, info)
}

// vclusterSetRequest builds SetVCluster from the flags that were given.
func vclusterSetRequest(name string, flag func(string) (string, bool), create bool) (*latticev1.SetVClusterRequest, error) {
	req := &latticev1.SetVClusterRequest{Name: name, Create: create}
	changed := create
	if v, ok := flag("weights-profile"); ok {
		req.WeightsProfile, changed = strings.TrimSpace(v), true
	}
	if v, ok := flag("weight"); ok {
		ws, err := parseWeights(v)
		if err != nil {
			return nil, err
		}
		req.Weights, changed = ws, true
	}
	if v, ok := flag("reservation-depth"); ok {
		d, err := parseDepth(v)
		if err != nil {
			return nil, err
		}
		req.SetReservationDepth, req.ReservationDepth, changed = true, d, true
	}
	if v, ok := flag("cycle"); ok {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d <= 0 || d > time.Hour {
			return nil, &model.FieldError{Field: "cycle", Value: v, Allowed: "a duration > 0 and at most 1h, e.g. 10s"}
		}
		req.CycleMs, changed = d.Milliseconds(), true
	}
	if v, ok := flag("power-cap-kw"); ok {
		w, err := model.ParseKilowatts("power-cap-kw", v)
		if err != nil {
			return nil, err
		}
		req.SetPowerCap, req.PowerCapWatts, changed = true, w, true
	}
	if v, ok := flag("max-lend-fraction"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(f > 0 && f <= 1) {
			return nil, &model.FieldError{Field: "max-lend-fraction", Value: v, Allowed: "a fraction 0 < F <= 1 (turn lending off with --allow-lending false)"}
		}
		req.SetMaxLendFraction, req.MaxLendFraction, changed = true, f, true
	}
	for _, d := range []struct {
		name string
		dst  *int64
	}{{"reclaim-grace", &req.ReclaimGraceMs}, {"reclaim-backoff", &req.ReclaimBackoffMs}, {"preempt-horizon", &req.PreemptHorizonMs}} {
		if v, ok := flag(d.name); ok {
			dur, err := time.ParseDuration(strings.TrimSpace(v))
			if err != nil || dur < time.Second || dur > 24*time.Hour {
				return nil, &model.FieldError{Field: d.name, Value: v, Allowed: "a duration between 1s and 24h, e.g. 90s or 5m"}
			}
			*d.dst, changed = dur.Milliseconds(), true
		}
	}
	// Switches: true or false, each with the flag that says it was given.
	for _, b := range []struct {
		name     string
		set, dst *bool
	}{
		{"allow-lending", &req.SetLending, &req.AllowLending},
		{"allow-borrowing", &req.SetBorrowing, &req.AllowBorrowing},
		{"preemption", &req.SetPreemption, &req.Preemption},
		{"checkpointable-only-on-borrowed", &req.SetCheckpointableOnlyOnBorrowed, &req.CheckpointableOnlyOnBorrowed},
		{"service-protect", &req.SetServiceProtect, &req.ServiceProtect},
		{"predicted-starts", &req.SetPredictedStarts, &req.PredictedStarts},
	} {
		if v, ok := flag(b.name); ok {
			x, err := parseBool(b.name, v)
			if err != nil {
				return nil, err
			}
			*b.set, *b.dst, changed = true, x, true
		}
	}
	// Modes: one of a list of names (empty in the request = unchanged).
	for _, m := range []struct {
		name  string
		parse func(string) (string, error)
		dst   *string
	}{
		{"algorithm", modeParser(model.ParseAlgorithm), &req.Algorithm},
		{"fair-share", modeParser(model.ParseFairShare), &req.FairShare},
		{"running-ends", modeParser(model.ParseRunningEnds), &req.RunningEnds},
		{"preempt-mode", modeParser(model.ParsePreemptMode), &req.PreemptMode},
	} {
		if v, ok := flag(m.name); ok {
			x, err := m.parse(v)
			if err != nil {
				return nil, err
			}
			*m.dst, changed = x, true
		}
	}
	if v, ok := flag("type"); ok {
		t, err := model.ParseVClusterType(v)
		if err != nil {
			return nil, err
		}
		req.Type = string(t)
	}
	if !changed {
		return nil, usageErrorf("nothing to set: give --weights-profile, --weight, --reservation-depth, --cycle, --allow-lending, --allow-borrowing, --power-cap-kw, --algorithm, --max-lend-fraction, --reclaim-grace, --reclaim-backoff, --preemption, --preempt-mode, --preempt-horizon, --checkpointable-only-on-borrowed, --fair-share, --service-protect, --running-ends or --predicted-starts")
	}
	return req, nil
}

// modeParser turns a model parser of a named mode into one of strings.
func modeParser[S ~string](parse func(string) (S, error)) func(string) (string, error) {
	return func(v string) (string, error) {
		m, err := parse(v)
		return string(m), err
	}
}

// parseWeights reads FACTOR=W[,FACTOR=W...] with FACTOR f1..f9.
func parseWeights(s string) ([]*latticev1.Weight, error) {
	var out []*latticev1.Weight
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		k, v, ok := strings.Cut(item, "=")
		k = strings.ToLower(strings.TrimSpace(k))
		n, err := strconv.Atoi(strings.TrimPrefix(k, "f"))
		if !ok || !strings.HasPrefix(k, "f") || err != nil || n < 1 || n > model.NumFactors {
			return nil, &model.FieldError{Field: "weight", Value: item, Allowed: "FACTOR=W with FACTOR f1..f9, e.g. f3=0.3"}
		}
		w, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || w < 0 || w > 1 {
			return nil, &model.FieldError{Field: "weight " + k, Value: v, Allowed: "a number between 0 and 1"}
		}
		out = append(out, &latticev1.Weight{Factor: k, Value: w})
	}
	return out, nil
}

func parseDepth(s string) (int32, error) {
	v := strings.TrimSpace(s)
	if strings.EqualFold(v, "all") {
		return model.ReservationsAll, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 1_000_000 {
		return 0, &model.FieldError{Field: "reservation-depth", Value: s, Allowed: "0 (none), N >= 1 (1 = EASY), or all"}
	}
	return int32(n), nil
}

func parseBool(field, s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "yes", "on", "1":
		return true, nil
	case "false", "no", "off", "0":
		return false, nil
	}
	return false, &model.FieldError{Field: field, Value: s, Allowed: "true or false"}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func depthText(d int32) string {
	if d == model.ReservationsAll {
		return "all"
	}
	return strconv.Itoa(int(d))
}

func capText(w int64) string {
	if w == 0 {
		return "none"
	}
	return watts(w)
}

func secondsText(s float64) string {
	if s == 0 {
		return "-"
	}
	return (time.Duration(s * float64(time.Second))).String()
}

func weightsText(m map[string]float64) string {
	var parts []string
	for _, k := range sortedWeights(m) {
		parts = append(parts, fmt.Sprintf("%s=%g", k, m[k]))
	}
	return orDash(strings.Join(parts, ","))
}

// ---- quorum ----

func (r *runner) quorumCommand() *cli.Command {
	return &cli.Command{
		Name:  "quorum",
		Usage: "the Raft quorum: members, leadership, backup and restore",
		Subcommands: []*cli.Command{
			{Name: "status", Usage: "members, roles, term and commit index", Action: r.quorumStatus},
			{
				Name:      "add",
				Usage:     "add a member (a voter unless --nonvoter)",
				ArgsUsage: "ID RAFT_ADDR",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "api-addr", Usage: "the new member's API address"},
					&cli.BoolFlag{Name: "nonvoter", Usage: "add it as a non-voting member"},
				},
				Action: func(c *cli.Context) error {
					if err := needArgs(c, 2, 2, "ID RAFT_ADDR [--api-addr ADDR]"); err != nil {
						return err
					}
					id, addr := c.Args().Get(0), c.Args().Get(1)
					err := r.admin(c, func(ctx context.Context, cl latticev1.AdminServiceClient) error {
						_, err := cl.QuorumJoin(ctx, &latticev1.QuorumJoinRequest{Id: id, RaftAddr: addr, ApiAddr: c.String("api-addr"), Nonvoter: c.Bool("nonvoter")})
						return err
					})
					if err == nil {
						fmt.Fprintf(r.Stderr, "added member %s (%s)\n", id, addr)
					}
					return err
				},
			},
			{
				Name:      "remove",
				Usage:     "remove a member",
				ArgsUsage: "ID",
				Action: func(c *cli.Context) error {
					if err := needArgs(c, 1, 1, "ID"); err != nil {
						return err
					}
					id := c.Args().First()
					err := r.admin(c, func(ctx context.Context, cl latticev1.AdminServiceClient) error {
						_, err := cl.QuorumRemove(ctx, &latticev1.QuorumRemoveRequest{Id: id})
						return err
					})
					if err == nil {
						fmt.Fprintf(r.Stderr, "removed member %s\n", id)
					}
					return err
				},
			},
			{
				Name:      "transfer",
				Usage:     "transfer leadership to member ID (or to any other member)",
				ArgsUsage: "[ID]",
				Action: func(c *cli.Context) error {
					format, err := r.format(c)
					if err != nil {
						return err
					}
					if err := needArgs(c, 0, 1, "[ID]"); err != nil {
						return err
					}
					var resp *latticev1.QuorumTransferResponse
					if err := r.admin(c, func(ctx context.Context, cl latticev1.AdminServiceClient) error {
						var err error
						resp, err = cl.QuorumTransferLeadership(ctx, &latticev1.QuorumTransferRequest{Id: c.Args().First()})
						return err
					}); err != nil {
						return err
					}
					v := struct {
						NewLeaderID string `json:"new_leader_id"`
					}{resp.GetNewLeaderId()}
					return r.emitAs(format, v, func(w io.Writer, _ bool) error {
						fmt.Fprintln(w, v.NewLeaderID)
						return nil
					})
				},
			},
			{Name: "backup", Usage: "write a consistent, checksummed backup from the leader to FILE", ArgsUsage: "FILE", Action: r.quorumBackup},
			{
				Name:      "verify",
				Usage:     "check a backup file for corruption",
				ArgsUsage: "FILE",
				Action: func(c *cli.Context) error {
					if err := needArgs(c, 1, 1, "FILE"); err != nil {
						return err
					}
					if VerifyBackup == nil {
						return r.offline(c)
					}
					if err := VerifyBackup(c.Args().First()); err != nil {
						return err
					}
					fmt.Fprintf(r.Stderr, "%s: ok\n", c.Args().First())
					return nil
				},
			},
			{
				Name:      "restore",
				Usage:     "rebuild a stopped member's data directory from a backup file",
				ArgsUsage: "FILE --data-dir DIR",
				Flags:     []cli.Flag{&cli.StringFlag{Name: "data-dir", Usage: "the member's data directory (env LATTICE_DATA_DIR)"}},
				Action: func(c *cli.Context) error {
					if err := needArgs(c, 1, 1, "FILE --data-dir DIR"); err != nil {
						return err
					}
					dir := c.String("data-dir")
					if dir == "" {
						dir = r.Getenv("LATTICE_DATA_DIR")
					}
					if dir == "" {
						return &model.FieldError{Field: "data-dir", Allowed: "the data directory of the (stopped) member to restore, via --data-dir or LATTICE_DATA_DIR"}
					}
					if RestoreBackup == nil {
						return r.offline(c)
					}
					if err := RestoreBackup(c.Args().First(), dir); err != nil {
						return err
					}
					fmt.Fprintf(r.Stderr, "restored %s into %s\n", c.Args().First(), dir)
					return nil
				},
			},
		},
	}
}

func (r *runner) quorumStatus(c *cli.Context) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	var resp *latticev1.QuorumStatusResponse
	if err := r.admin(c, func(ctx context.Context, cl latticev1.AdminServiceClient) error {
		var err error
		resp, err = cl.QuorumStatus(ctx, &latticev1.QuorumStatusRequest{})
		return err
	}); err != nil {
		return err
	}
	v := quorumOf(resp)
	return r.emitAs(format, v, func(w io.Writer, wide bool) error {
		fmt.Fprintf(w, "leader %s, term %d, commit index %d, applied index %d\n", orDash(v.LeaderID), v.Term, v.CommitIndex, v.AppliedIndex)
		if v.ClusterID != "" {
			fmt.Fprintf(w, "cluster id %s\n", v.ClusterID)
		}
		fmt.Fprintln(w)
		row(w, "ID", "ROLE", "HEALTHY", "VOTER", "LAG", "RAFT_ADDR", "API_ADDR", "PROBLEM", "LEVEL")
		for _, m := range v.Members {
			row(w, m.ID, m.Role, yesNo(m.Healthy), yesNo(m.Voter), fmt.Sprint(m.Lag), orDash(m.RaftAddr), orDash(m.APIAddr), orDash(m.Problem),
				fmt.Sprint(m.FeatureLevel))
		}
		return nil
	})
}

// quorumBackup streams AdminService.Backup into FILE. It writes a
// temporary file next to FILE and renames it only when the stream ended
// cleanly, so FILE is never a partial backup. A broken stream starts over
// on the next server.
func (r *runner) quorumBackup(c *cli.Context) error {
	if err := needArgs(c, 1, 1, "FILE"); err != nil {
		return err
	}
	path := c.Args().First()
	cn, err := r.connect(c)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".partial-*")
	if err != nil {
		return fmt.Errorf("cannot write backup: %w", err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	var n int64
	err = cn.stream(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		if err := tmp.Truncate(0); err != nil {
			return err
		}
		if _, err := tmp.Seek(0, io.SeekStart); err != nil {
			return err
		}
		n = 0
		st, err := latticev1.NewAdminServiceClient(cc).Backup(ctx, &latticev1.BackupRequest{})
		if err != nil {
			return err
		}
		for {
			ch, err := st.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			k, err := tmp.Write(ch.GetData())
			n += int64(k)
			if err != nil {
				return withCode(ExitError, fmt.Errorf("cannot write backup: %w", err))
			}
		}
	})
	if err != nil {
		return err
	}
	if n == 0 {
		return errors.New("the server sent an empty backup; nothing written")
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("cannot write backup: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("cannot write backup: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("cannot write backup: %w", err)
	}
	fmt.Fprintf(r.Stderr, "wrote %d bytes to %s\n", n, path)
	return nil
}

// ---- power ----

func (r *runner) powerCommand() *cli.Command {
	return &cli.Command{
		Name:   "power",
		Usage:  "power budget and estimated draw, system-wide and per vCluster",
		Action: r.powerShow,
		Subcommands: []*cli.Command{
			{
				Name:      "set",
				Usage:     "set the system-wide budget, or a vCluster's",
				ArgsUsage: "--budget-kw X [--vcluster V]",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "budget-kw", Usage: "budget in kW (0 = none)"},
					&cli.StringFlag{Name: "vcluster", Usage: "the vCluster whose budget to set (default: system-wide)"},
				},
				Action: func(c *cli.Context) error {
					format, err := r.format(c)
					if err != nil {
						return err
					}
					if err := needArgs(c, 0, 0, "--budget-kw X [--vcluster V]"); err != nil {
						return err
					}
					if !c.IsSet("budget-kw") {
						return &model.FieldError{Field: "budget-kw", Allowed: "kilowatts >= 0 (0 = no budget), e.g. --budget-kw 250"}
					}
					w, err := model.ParseKilowatts("budget-kw", c.String("budget-kw"))
					if err != nil {
						return err
					}
					var ps *latticev1.PowerStatus
					if err := r.admin(c, func(ctx context.Context, cl latticev1.AdminServiceClient) error {
						var err error
						ps, err = cl.SetPowerBudget(ctx, &latticev1.SetPowerBudgetRequest{Vcluster: c.String("vcluster"), BudgetWatts: w, ClientRequestId: r.reqID()})
						return err
					}); err != nil {
						return err
					}
					return r.printPower(format, ps)
				},
			},
		},
	}
}

func (r *runner) powerShow(c *cli.Context) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	if c.Args().Present() {
		word := c.Args().First()
		return usageErrorf("unknown command %q for \"latticectl power\"%s; use power or power set --budget-kw X [--vcluster V]",
			word, didYouMean(suggest(word, commandNames(c.Command.Subcommands))))
	}
	var ps *latticev1.PowerStatus
	if err := r.admin(c, func(ctx context.Context, cl latticev1.AdminServiceClient) error {
		var err error
		ps, err = cl.GetPower(ctx, &latticev1.GetPowerRequest{})
		return err
	}); err != nil {
		return err
	}
	return r.printPower(format, ps)
}

func (r *runner) printPower(format string, ps *latticev1.PowerStatus) error {
	v := powerOf(ps)
	return r.emitAs(format, v, func(w io.Writer, _ bool) error {
		if v.MeasuredNodes == 0 && v.CountedWatts == v.EstimatedWatts {
			// Nothing measured: the configured estimate is all there is.
			row(w, "SCOPE", "BUDGET", "ESTIMATED", "USED")
			row(w, "system", capText(v.BudgetWatts), watts(v.EstimatedWatts), share(v.EstimatedWatts, v.BudgetWatts))
			for _, u := range v.VClusters {
				row(w, u.VCluster, capText(u.BudgetWatts), watts(u.EstimatedWatts), share(u.EstimatedWatts, u.BudgetWatts))
			}
			return nil
		}
		// Side by side: the configured estimate, what the agents measured
		// (RAPL, on the nodes that measure) and what the power check counts
		// (measured where fresh, configured elsewhere); USED is of the latter.
		row(w, "SCOPE", "BUDGET", "ESTIMATED", "MEASURED", "COUNTED", "USED")
		row(w, "system", capText(v.BudgetWatts), watts(v.EstimatedWatts), measuredText(v.MeasuredWatts, v.MeasuredNodes),
			watts(v.CountedWatts), share(v.CountedWatts, v.BudgetWatts))
		for _, u := range v.VClusters {
			row(w, u.VCluster, capText(u.BudgetWatts), watts(u.EstimatedWatts), measuredText(u.MeasuredWatts, u.MeasuredNodes),
				watts(u.CountedWatts), share(u.CountedWatts, u.BudgetWatts))
		}
		return nil
	})
}

// measuredText is the MEASURED column: the sum and on how many nodes.
func measuredText(w int64, nodes int32) string {
	if nodes == 0 {
		return "-"
	}
	return fmt.Sprintf("%s (%d nodes)", watts(w), nodes)
}

func share(used, budget int64) string {
	if budget <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*float64(used)/float64(budget))
}

// ---- usage and tenants ----

func (r *runner) listTenants(c *cli.Context) ([]*latticev1.TenantInfo, error) {
	var resp *latticev1.ListTenantsResponse
	err := r.admin(c, func(ctx context.Context, cl latticev1.AdminServiceClient) error {
		var err error
		resp, err = cl.ListTenants(ctx, &latticev1.ListTenantsRequest{})
		return err
	})
	return resp.GetTenants(), err
}

func (r *runner) usageCommand() *cli.Command {
	return &cli.Command{
		Name:   "usage",
		Usage:  "fair-share usage and targets per tenant (--tenant T for one); with --start/--end, what the jobs that ended then used (sreport-like)",
		Flags:  append(usageReportFlags(), listingFlags()...),
		Action: r.usage,
	}
}

func (r *runner) usage(c *cli.Context) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	if err := needArgs(c, 0, 0, "[--tenant T]"); err != nil {
		return err
	}
	if c.IsSet("start") || c.IsSet("end") {
		return r.usageReport(c, format)
	}
	tenants, err := r.listTenants(c)
	if err != nil {
		return err
	}
	only, filter := explicit(c, "tenant")
	views := []tenantView{}
	for _, t := range tenants {
		if !filter || t.GetName() == only {
			views = append(views, tenantOf(t))
		}
	}
	if filter && len(views) == 0 {
		return notFoundf("tenant %q not found", only)
	}
	return r.printTenants(format, views)
}

func (r *runner) printTenants(format string, views []tenantView) error {
	return r.emitAs(format, views, func(w io.Writer, _ bool) error {
		row(w, "TENANT", "TARGET", "USAGE_SHARE", "USAGE_NODE_H", "RUNNING", "NODES", "MAX_RUNNING", "MAX_NODES")
		for _, t := range views {
			row(w, t.Name, pct(t.FairShareTarget), pct(t.UsageShare), fmt.Sprintf("%.1f", t.UsageNodeSeconds/3600),
				t.RunningAllocations, t.RunningNodes, limitText(t.MaxRunning), limitText(t.MaxNodes))
		}
		return nil
	})
}

func pct(f float64) string {
	if f == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*f)
}

func limitText(n int32) string {
	if n == 0 {
		return "unlimited"
	}
	return strconv.Itoa(int(n))
}

func (r *runner) tenantCommand() *cli.Command {
	return &cli.Command{
		Name:  "tenant",
		Usage: "tenants: list them, set quotas and fair-share targets, delete them (admins)",
		Subcommands: []*cli.Command{
			{Name: "list", Usage: "list tenants with their usage (same as usage)", Flags: listingFlags(), Action: r.usage},
			{
				Name:      "set",
				Usage:     "set a tenant's hard quotas and fair-share target; flags not given keep their value",
				ArgsUsage: "NAME [--max-nodes N] [--max-running N] [--fair-share F]",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "max-nodes", Usage: "most nodes its running allocations may hold (0 = unlimited)"},
					&cli.StringFlag{Name: "max-running", Usage: "most allocations it may run at once (0 = unlimited)"},
					&cli.StringFlag{Name: "fair-share", Usage: "its contracted share of the machine, 0..1 (0 = none)"},
				},
				Action: r.tenantSet,
			},
			r.tenantDeleteCommand(),
		},
	}
}

func (r *runner) tenantSet(c *cli.Context) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	if err := needArgs(c, 1, 1, "NAME [--max-nodes N] [--max-running N] [--fair-share F]"); err != nil {
		return err
	}
	t := model.Tenant{Name: c.Args().First()}
	if !c.IsSet("max-nodes") && !c.IsSet("max-running") && !c.IsSet("fair-share") {
		return usageErrorf("nothing to set: give --max-nodes, --max-running or --fair-share")
	}
	// The API sets all three at once: start from the tenant's current values.
	tenants, err := r.listTenants(c)
	if err != nil {
		return err
	}
	for _, cur := range tenants {
		if cur.GetName() == t.Name {
			t.MaxNodes, t.MaxRunning, t.FairShareTarget = int(cur.GetMaxNodes()), int(cur.GetMaxRunning()), cur.GetFairShareTarget()
		}
	}
	for _, f := range []struct {
		name string
		dst  *int
	}{{"max-nodes", &t.MaxNodes}, {"max-running", &t.MaxRunning}} {
		if c.IsSet(f.name) {
			n, err := strconv.Atoi(strings.TrimSpace(c.String(f.name)))
			if err != nil || n < 0 {
				return &model.FieldError{Field: f.name, Value: c.String(f.name), Allowed: "a count >= 0 (0 = unlimited)"}
			}
			*f.dst = n
		}
	}
	if c.IsSet("fair-share") {
		v := c.String("fair-share")
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return &model.FieldError{Field: "fair-share", Value: v, Allowed: "a share between 0 and 1"}
		}
		t.FairShareTarget = f
	}
	if err := t.Validate(); err != nil {
		return err
	}
	var info *latticev1.TenantInfo
	if err := r.admin(c, func(ctx context.Context, cl latticev1.AdminServiceClient) error {
		var err error
		info, err = cl.SetTenant(ctx, &latticev1.SetTenantRequest{Name: t.Name, MaxNodes: int32(t.MaxNodes),
			MaxRunning: int32(t.MaxRunning), FairShareTarget: t.FairShareTarget, ClientRequestId: r.reqID()})
		return err
	}); err != nil {
		return err
	}
	return r.printTenants(format, []tenantView{tenantOf(info)})
}

// preemptModeOf is a vCluster's preemption mode as a server states it; a
// server that predates modes says only whether it preempts (then
// checkpointable work and work that cannot were both preempted: requeue).
func preemptModeOf(v *latticev1.VClusterInfo) string {
	switch {
	case v.GetPreemptMode() != "":
		return v.GetPreemptMode()
	case v.GetPreemption():
		return string(model.PreemptRequeue)
	}
	return string(model.PreemptOff)
}

// preemptModeText says what a preemption mode does to lower-class work.
func preemptModeText(mode string) string {
	switch model.PreemptMode(mode) {
	case model.PreemptOff:
		return "off (nothing is preempted)"
	case model.PreemptCheckpoint:
		return "checkpoint (work that can checkpoint is checkpointed and requeued; other work is never preempted)"
	case model.PreemptRequeue:
		return "requeue (checkpointed first when it can; other work is stopped and requeued)"
	case model.PreemptCancel:
		return "cancel (checkpointed and requeued when it can; other work is cancelled)"
	case model.PreemptSuspend:
		return "suspend (checkpointed and requeued when it can; other work is frozen on its nodes until the preemptor ends)"
	}
	return mode
}
