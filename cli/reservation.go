package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"google.golang.org/grpc"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// Node reservations and maintenance windows: `latticectl reservation` and
// scontrol's create/update/delete/show reservation.

// reservationView is one reservation as `reservation list -o json` prints it.
type reservationView struct {
	Name      string   `json:"name"`
	State     string   `json:"state"` // ACTIVE or INACTIVE (not started yet), as scontrol's
	Start     *string  `json:"start"`
	End       *string  `json:"end"`
	Nodes     []string `json:"nodes"`
	Users     []string `json:"users"`
	Tenants   []string `json:"tenants"`
	Maint     bool     `json:"maint"`
	CreatedBy string   `json:"created_by"`
}

func reservationViewOf(p *latticev1.NodeReservation) reservationView {
	state := "INACTIVE"
	if p.GetActive() {
		state = "ACTIVE"
	}
	return reservationView{Name: p.GetName(), State: state, Start: rfc3339(p.GetStartUnixMs()), End: rfc3339(p.GetEndUnixMs()),
		Nodes: nonNil(p.GetNodes()), Users: nonNil(p.GetUsers()), Tenants: nonNil(p.GetTenants()), Maint: p.GetMaint(), CreatedBy: p.GetCreatedBy()}
}

func reservationFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "name", Usage: "its name (default: your user name and a number, as Slurm's)"},
		&cli.StringSliceFlag{Name: "nodes", Aliases: []string{"w"}, Usage: "the nodes: names or hostlists such as node[010-019] (or --count)"},
		&cli.IntFlag{Name: "count", Usage: "reserve this many Ready nodes chosen by the server (or --nodes)"},
		&cli.StringFlag{Name: "start", Usage: "when it starts: now (the default), now+10minutes, HH:MM, YYYY-MM-DDTHH:MM, RFC 3339..."},
		&cli.StringFlag{Name: "duration", Usage: "how long: minutes (90), HH:MM:SS, D-HH:MM or a Go duration (2h)"},
		&cli.StringFlag{Name: "end", Usage: "when it ends (instead of --duration)"},
		&cli.StringFlag{Name: "users", Usage: "users who may run in it (comma-separated); admins always may"},
		&cli.StringFlag{Name: "tenants", Aliases: []string{"accounts"}, Usage: "tenants whose users may run in it (comma-separated)"},
		&cli.StringFlag{Name: "flags", Usage: "maint: a maintenance window (squeue's reason and sinfo's state say so)"},
	}
}

// reservationRequest builds a create or update request from the flags.
func (r *runner) reservationRequest(c *cli.Context, name string) (*latticev1.CreateReservationRequest, error) {
	req := &latticev1.CreateReservationRequest{Name: name}
	set := func(f string) { req.UpdateFields = append(req.UpdateFields, f) }
	for _, n := range c.StringSlice("nodes") {
		names, err := model.ExpandHostlist(n)
		if err != nil {
			return nil, err
		}
		req.Nodes = append(req.Nodes, names...)
	}
	if len(req.Nodes) > 0 {
		set("nodes")
	}
	if c.IsSet("count") {
		if c.Int("count") <= 0 {
			return nil, &model.FieldError{Field: "count", Value: strconv.Itoa(c.Int("count")), Allowed: "a number of nodes, at least 1"}
		}
		req.NodeCount = int32(c.Int("count"))
		set("nodes")
	}
	if v := c.String("start"); v != "" {
		t, err := parseSlurmTime("start", v, r.Now(), r.Location)
		if err != nil {
			return nil, err
		}
		req.StartUnixMs = t.UnixMilli()
		set("start")
	}
	if v := c.String("duration"); v != "" {
		d, err := model.ParseWalltime(v)
		if err != nil {
			return nil, &model.FieldError{Field: "duration", Value: v, Allowed: "minutes (90), HH:MM:SS, D-HH:MM[:SS] or a Go duration (2h)"}
		}
		req.DurationSeconds = int64(d / time.Second)
		set("duration")
	}
	if v := c.String("end"); v != "" {
		t, err := parseSlurmTime("end", v, r.Now(), r.Location)
		if err != nil {
			return nil, err
		}
		req.EndUnixMs = t.UnixMilli()
		set("end")
	}
	if c.IsSet("users") {
		req.Users = splitList(c.String("users"))
		set("users")
	}
	if c.IsSet("tenants") {
		req.Tenants = splitList(c.String("tenants"))
		set("tenants")
	}
	if c.IsSet("flags") {
		maint, err := reservationFlagsValue(c.String("flags"))
		if err != nil {
			return nil, err
		}
		req.Maint = maint
		set("maint")
	}
	return req, nil
}

// reservationFlagsValue reads --flags / Flags=: maint, and the flags Slurm
// sets that change nothing here (spec_nodes, ignore_jobs).
func reservationFlagsValue(v string) (maint bool, err error) {
	for _, f := range splitList(v) {
		switch strings.ToLower(f) {
		case "maint":
			maint = true
		case "spec_nodes", "ignore_jobs":
		default:
			return false, &model.FieldError{Field: "flags", Value: f, Allowed: "maint (spec_nodes and ignore_jobs are accepted and change nothing)"}
		}
	}
	return maint, nil
}

func (r *runner) reservationCall(c *cli.Context, fn func(ctx context.Context, cl latticev1.ReservationServiceClient) error) error {
	cn, err := r.connect(c)
	if err != nil {
		return err
	}
	return cn.unary(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		return fn(ctx, latticev1.NewReservationServiceClient(cc))
	})
}

func (r *runner) reservationCommand() *cli.Command {
	change := func(update bool) cli.ActionFunc {
		return func(c *cli.Context) error {
			format, err := r.format(c)
			if err != nil {
				return err
			}
			name := c.String("name")
			if update {
				if err := needArgs(c, 1, 1, "NAME [--start T] [--duration D] ..."); err != nil {
					return err
				}
				name = c.Args().First()
			} else if err := needArgs(c, 0, 0, "--nodes LIST|--count N --duration D"); err != nil {
				return err
			}
			req, err := r.reservationRequest(c, name)
			if err != nil {
				return err
			}
			if update && len(req.UpdateFields) == 0 {
				return usageErrorf("nothing to change: give --nodes, --count, --start, --duration, --end, --users, --tenants or --flags")
			}
			var got *latticev1.NodeReservation
			if err := r.reservationCall(c, func(ctx context.Context, cl latticev1.ReservationServiceClient) error {
				var err error
				if update {
					got, err = cl.UpdateReservation(ctx, req)
				} else {
					got, err = cl.CreateReservation(ctx, req)
				}
				return err
			}); err != nil {
				return err
			}
			return r.emitAs(format, reservationViewOf(got), func(w io.Writer, _ bool) error {
				verb := "created"
				if update {
					verb = "updated"
				}
				fmt.Fprintf(w, "reservation %s %s: %s from %s to %s\n", got.GetName(), verb, hostlist(got.GetNodes()),
					r.tableTime(got.GetStartUnixMs()), r.tableTime(got.GetEndUnixMs()))
				return nil
			})
		}
	}
	list := func(one bool) cli.ActionFunc {
		return func(c *cli.Context) error {
			format, err := r.format(c)
			if err != nil {
				return err
			}
			name := ""
			if one {
				if err := needArgs(c, 1, 1, "NAME"); err != nil {
					return err
				}
				name = c.Args().First()
			} else if err := needArgs(c, 0, 0, ""); err != nil {
				return err
			}
			var resp *latticev1.ListReservationsResponse
			if err := r.reservationCall(c, func(ctx context.Context, cl latticev1.ReservationServiceClient) error {
				var err error
				resp, err = cl.ListReservations(ctx, &latticev1.ListReservationsRequest{Name: name})
				return err
			}); err != nil {
				return err
			}
			views := []reservationView{}
			for _, p := range resp.GetReservations() {
				views = append(views, reservationViewOf(p))
			}
			if one {
				p := resp.GetReservations()[0]
				return r.emitAs(format, views[0], func(w io.Writer, _ bool) error {
					v := views[0]
					kv(w, "Name", v.Name)
					kv(w, "State", v.State)
					kv(w, "Start", r.tableTime(p.GetStartUnixMs()))
					kv(w, "End", r.tableTime(p.GetEndUnixMs()))
					kv(w, "Duration", model.FormatWalltime(time.Duration(p.GetEndUnixMs()-p.GetStartUnixMs())*time.Millisecond))
					kv(w, "Nodes", fmt.Sprintf("%s (%d)", hostlist(v.Nodes), len(v.Nodes)))
					kv(w, "Users", orDash(strings.Join(v.Users, ",")))
					kv(w, "Tenants", orDash(strings.Join(v.Tenants, ",")))
					kv(w, "Maintenance", v.Maint)
					kv(w, "Created by", orDash(v.CreatedBy))
					return nil
				})
			}
			return r.emitAs(format, views, func(w io.Writer, _ bool) error {
				row(w, "NAME", "STATE", "START", "END", "NODES", "USERS", "TENANTS", "FLAGS")
				for i, v := range views {
					p := resp.GetReservations()[i]
					flags := "-"
					if v.Maint {
						flags = "maint"
					}
					row(w, v.Name, v.State, r.tableTime(p.GetStartUnixMs()), r.tableTime(p.GetEndUnixMs()), hostlist(v.Nodes),
						orDash(strings.Join(v.Users, ",")), orDash(strings.Join(v.Tenants, ",")), flags)
				}
				return nil
			})
		}
	}
	return &cli.Command{
		Name:  "reservation",
		Usage: "node reservations and maintenance windows (scontrol create/show/delete reservation)",
		Description: "A reservation sets nodes aside from its start to its end: only allocations submitted with\n" +
			"--reservation NAME by its users or tenants run on them then, and no other allocation starts on\n" +
			"them if its time limit would cross the start (short ones still backfill before it).",
		Subcommands: []*cli.Command{
			{Name: "create", Usage: "create a reservation (admins)", ArgsUsage: "--nodes LIST|--count N [--start T] --duration D [--users U,..] [--tenants T,..] [--flags maint] [--name NAME]",
				Flags: reservationFlags(), Action: change(false)},
			{Name: "update", Usage: "change a reservation (admins): only the flags given change", ArgsUsage: "NAME [--nodes ...] [--start T] [--duration D] ...",
				Flags: reservationFlags()[1:], Action: change(true)},
			{Name: "list", Usage: "list the reservations not over yet", Flags: listingFlags(), Action: list(false)},
			{Name: "show", Usage: "show one reservation", ArgsUsage: "NAME", Flags: listingFlags(), Action: list(true)},
			{Name: "delete", Usage: "delete a reservation (admins); jobs submitted into it keep waiting (reason Reservation)", ArgsUsage: "NAME",
				Action: func(c *cli.Context) error {
					if err := needArgs(c, 1, 1, "NAME"); err != nil {
						return err
					}
					name := c.Args().First()
					if err := r.reservationCall(c, func(ctx context.Context, cl latticev1.ReservationServiceClient) error {
						_, err := cl.DeleteReservation(ctx, &latticev1.DeleteReservationRequest{Name: name})
						return err
					}); err != nil {
						return err
					}
					fmt.Fprintf(r.Stderr, "reservation %s deleted\n", name)
					return nil
				}},
		},
	}
}

// ---- scontrol ----

// scontrolReservation runs scontrol create|update|delete|show reservation.
// tok is the word after the verb, as Slurm's messages repeat it.
func (s *slurmRun) scontrolReservation(verb, tok string, args []string, one bool) error {
	switch verb {
	case "show":
		name := ""
		if len(args) > 0 {
			name = args[0]
		}
		return s.showReservations(name, one)
	case "delete":
		if len(args) == 0 {
			return fmt.Errorf("too few arguments for keyword:delete")
		}
		name := args[0]
		if _, v, ok := strings.Cut(name, "="); ok {
			name = v
		}
		cn, err := s.connect(s.c)
		if err != nil {
			return err
		}
		err = cn.unary(s.c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
			_, err := latticev1.NewReservationServiceClient(cc).DeleteReservation(ctx, &latticev1.DeleteReservationRequest{Name: name})
			return err
		})
		if err != nil {
			if strings.Contains(err.Error(), "does not exist") {
				fmt.Fprintf(s.Stderr, "delete_reservation %s: Requested reservation is invalid\n", tok)
				return errReported
			}
			return err
		}
		return nil
	}
	// create / update: Key=Value pairs.
	req := &latticev1.CreateReservationRequest{}
	set := func(f string) { req.UpdateFields = append(req.UpdateFields, f) }
	noRes := "  No reservation created."
	if verb == "update" {
		noRes = "  No reservation updated."
	}
	fail := func(format string, a ...any) error { return fmt.Errorf(format+"."+noRes, a...) }
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return fail("Unknown parameter %s", a)
		}
		switch strings.ToLower(k) {
		case "reservationname", "reservation", "resv", "name":
			req.Name = v
		case "starttime", "start":
			t, err := parseSlurmTime("StartTime", v, s.Now(), s.Location)
			if err != nil {
				return fail("Invalid start time %s", a)
			}
			req.StartUnixMs = t.UnixMilli()
			set("start")
		case "endtime", "end":
			t, err := parseSlurmTime("EndTime", v, s.Now(), s.Location)
			if err != nil {
				return fail("Invalid end time %s", a)
			}
			req.EndUnixMs = t.UnixMilli()
			set("end")
		case "duration":
			d, err := model.ParseWalltime(v)
			if err != nil || d <= 0 {
				return fail("Invalid duration %s", a)
			}
			req.DurationSeconds = int64(d / time.Second)
			set("duration")
		case "nodes", "nodelist":
			names, err := model.ExpandHostlist(v)
			if err != nil {
				return fail("Invalid node list %s", a)
			}
			req.Nodes = append(req.Nodes, names...)
			set("nodes")
		case "nodecnt", "nodecount":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return fail("Invalid node count %s", a)
			}
			req.NodeCount = int32(n)
			set("nodes")
		case "users", "user":
			req.Users = splitList(v)
			set("users")
		case "accounts", "account":
			req.Tenants = splitList(v)
			set("tenants")
		case "flags", "flag":
			maint, err := reservationFlagsValue(v)
			if err != nil {
				return fail("Invalid flags %s (allowed MAINT, SPEC_NODES, IGNORE_JOBS)", a)
			}
			req.Maint = maint
			set("maint")
		default:
			return fail("Unknown parameter %s (allowed ReservationName, StartTime, EndTime, Duration, Nodes, NodeCnt, Users, Accounts, Flags)", a)
		}
	}
	if verb == "create" {
		switch {
		case len(req.Users) == 0 && len(req.Tenants) == 0:
			return fmt.Errorf("Either Users/Groups and/or Accounts must be specified.%s", noRes)
		case len(req.Nodes) == 0 && req.NodeCount == 0:
			return fmt.Errorf("Nodes, NodeCnt or CoreCnt must be specified.%s", noRes)
		case req.DurationSeconds == 0 && req.EndUnixMs == 0:
			return fmt.Errorf("Duration or EndTime must be specified.%s", noRes)
		}
	} else if req.Name == "" {
		return fmt.Errorf("Reservation must be given.%s", noRes)
	}
	cn, err := s.connect(s.c)
	if err != nil {
		return err
	}
	var got *latticev1.NodeReservation
	err = cn.unary(s.c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		cl := latticev1.NewReservationServiceClient(cc)
		var err error
		if verb == "update" {
			got, err = cl.UpdateReservation(ctx, req)
		} else {
			got, err = cl.CreateReservation(ctx, req)
		}
		return err
	})
	if err != nil {
		if verb == "update" {
			fmt.Fprintf(s.Stderr, "Error updating the reservation: %s\n", grpcMessage(err))
		} else {
			fmt.Fprintf(s.Stderr, "Error creating the reservation: %s\n", grpcMessage(err))
		}
		return errReported
	}
	if verb == "update" {
		fmt.Fprintln(s.Stdout, "Reservation updated.")
	} else {
		fmt.Fprintf(s.Stdout, "Reservation created: %s\n", got.GetName())
	}
	return nil
}

// grpcMessage is an RPC error's message without the status code.
func grpcMessage(err error) string {
	msg := err.Error()
	if _, after, ok := strings.Cut(msg, " desc = "); ok {
		return after
	}
	return msg
}

// showReservations is scontrol show reservation [NAME], in Slurm's layout.
func (s *slurmRun) showReservations(name string, one bool) error {
	if _, v, ok := strings.Cut(name, "="); ok {
		name = v
	}
	cn, err := s.connect(s.c)
	if err != nil {
		return err
	}
	var resp *latticev1.ListReservationsResponse
	var nodes []*latticev1.Node
	err = cn.unary(s.c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		var err error
		if resp, err = latticev1.NewReservationServiceClient(cc).ListReservations(ctx, &latticev1.ListReservationsRequest{}); err != nil {
			return err
		}
		nl, err := latticev1.NewNodeServiceClient(cc).List(ctx, &latticev1.ListNodesRequest{})
		nodes = nl.GetNodes()
		return err
	})
	if err != nil {
		return err
	}
	cpus := map[string]int{}
	for _, n := range nodes {
		cpus[n.GetName()] = int(max(n.GetCpus(), 1))
	}
	var list []*latticev1.NodeReservation
	for _, p := range resp.GetReservations() {
		if name == "" || p.GetName() == name {
			list = append(list, p)
		}
	}
	if len(list) == 0 {
		if name != "" {
			fmt.Fprintf(s.Stdout, "Reservation %s not found\n", name)
			return errReported
		}
		fmt.Fprintln(s.Stdout, "No reservations in the system")
		return nil
	}
	for _, p := range list {
		cores := 0
		for _, n := range p.GetNodes() {
			cores += max(cpus[n], 1)
		}
		flags := []string{"SPEC_NODES"}
		if p.GetMaint() {
			flags = slices.Insert(flags, 0, "MAINT")
		}
		state := "INACTIVE"
		if p.GetActive() {
			state = "ACTIVE"
		}
		s.writeRecord(kvRecord{
			{skv("ReservationName", p.GetName()), skv("StartTime", s.slurmDate(p.GetStartUnixMs(), "Unknown")),
				skv("EndTime", s.slurmDate(p.GetEndUnixMs(), "Unknown")),
				skv("Duration", model.FormatWalltime(time.Duration(p.GetEndUnixMs()-p.GetStartUnixMs())*time.Millisecond))},
			{skv("Nodes", hostlist(p.GetNodes())), skv("NodeCnt", strconv.Itoa(len(p.GetNodes()))), skv("CoreCnt", strconv.Itoa(cores)),
				skv("Features", "(null)"), skv("PartitionName", "(null)"), skv("Flags", strings.Join(flags, ","))},
			{skv("TRES", "cpu="+strconv.Itoa(cores))},
			{skv("Users", nullOr(strings.Join(p.GetUsers(), ","))), skv("Groups", "(null)"), skv("Accounts", nullOr(strings.Join(p.GetTenants(), ","))),
				skv("Licenses", "(null)"), skv("State", state), skv("BurstBuffer", "(null)"), skv("Watts", "n/a")},
			{skv("MaxStartDelay", "(null)")},
		}, one)
	}
	return nil
}
