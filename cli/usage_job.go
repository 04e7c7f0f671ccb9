package cli

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"
	"google.golang.org/grpc"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// What jobs used, as their agents measured it from their cgroups:
// history's TotalCPU, UserCPU, SystemCPU, MaxRSS and ConsumedEnergy
// fields, `stat` (sstat) for a running job, and `usage --start/--end`
// (sreport) per tenant.

// usageView is the usage of one allocation in JSON (history, stat).
type usageView struct {
	TotalCPUSeconds      float64 `json:"total_cpu_seconds"`
	UserCPUSeconds       float64 `json:"user_cpu_seconds"`
	SystemCPUSeconds     float64 `json:"system_cpu_seconds"`
	MaxRSSBytes          int64   `json:"max_rss_bytes"`
	MaxRSSSampled        bool    `json:"max_rss_sampled,omitempty"`
	ConsumedEnergyJoules float64 `json:"consumed_energy_joules"`
	// EnergySource: "rapl" (measured) or "model" (estimated from the
	// node's configured draw); "" without a figure.
	EnergySource string `json:"energy_source"`
	OOMKills     int64  `json:"oom_kills,omitempty"`
}

func usageViewOf(u *latticev1.JobUsage) *usageView {
	if u == nil {
		return nil
	}
	return &usageView{TotalCPUSeconds: u.GetUserCpuSeconds() + u.GetSystemCpuSeconds(), UserCPUSeconds: u.GetUserCpuSeconds(),
		SystemCPUSeconds: u.GetSystemCpuSeconds(), MaxRSSBytes: u.GetMaxRssBytes(), MaxRSSSampled: u.GetMaxRssSampled(),
		ConsumedEnergyJoules: u.GetConsumedEnergyJoules(), EnergySource: u.GetEnergySource(), OOMKills: u.GetOomKills()}
}

// cpuTime is sacct's CPU time: MM:SS.mmm under an hour, HH:MM:SS under a
// day, D-HH:MM:SS beyond; "" without a figure.
func cpuTime(secs float64, have bool) string {
	if !have {
		return ""
	}
	ms := int64(math.Round(secs * 1000))
	s := ms / 1000
	d, h, m := s/86400, s/3600%24, s/60%60
	switch {
	case d > 0:
		return fmt.Sprintf("%d-%02d:%02d:%02d", d, h, m, s%60)
	case h > 0:
		return fmt.Sprintf("%02d:%02d:%02d", h, m, s%60)
	}
	return fmt.Sprintf("%02d:%02d.%03d", m, s%60, ms%1000)
}

// rssText is sacct's MaxRSS: kibibytes with a K.
func rssText(u *latticev1.JobUsage) string {
	if u == nil {
		return ""
	}
	return strconv.FormatInt((u.GetMaxRssBytes()+1023)/1024, 10) + "K"
}

// energyText is ConsumedEnergy in joules: plain under 1000, else with
// K, M or G (powers of 1000) and two decimals.
func energyText(u *latticev1.JobUsage) string {
	if u == nil || u.GetEnergySource() == "" {
		return ""
	}
	j := u.GetConsumedEnergyJoules()
	for _, unit := range []string{"", "K", "M", "G"} {
		if j < 1000 || unit == "G" {
			if unit == "" {
				return strconv.FormatInt(int64(math.Round(j)), 10)
			}
			return fmt.Sprintf("%.2f%s", j, unit)
		}
		j /= 1000
	}
	return ""
}

// usageFields are history's and status's usage columns (sacct's names;
// no squeue letter).
func usageFieldValue(name string, a *latticev1.Allocation) string {
	u := a.GetUsage()
	switch name {
	case "totalcpu":
		return cpuTime(u.GetUserCpuSeconds()+u.GetSystemCpuSeconds(), u != nil)
	case "usercpu":
		return cpuTime(u.GetUserCpuSeconds(), u != nil)
	case "systemcpu":
		return cpuTime(u.GetSystemCpuSeconds(), u != nil)
	case "maxrss":
		return rssText(u)
	case "consumedenergy":
		return energyText(u)
	}
	return ""
}

func usageField(name, header string) allocField {
	return allocField{names: []string{name}, header: header, value: func(_ *runner, a *latticev1.Allocation) string {
		return usageFieldValue(name, a)
	}}
}

// ---- stat (sstat) ----

func (r *runner) statCommand() *cli.Command {
	return &cli.Command{
		Name:      "stat",
		Aliases:   []string{"sstat"},
		Usage:     "what a running allocation has used so far: CPU time, peak memory, energy (sstat-like; read live from its cgroup)",
		ArgsUsage: "ID",
		Flags:     listingFlags(),
		Action:    r.stat,
	}
}

// statView is one row of `stat -o json`.
type statView struct {
	ID             string `json:"id"`
	Node           string `json:"node"`
	ElapsedSeconds int64  `json:"elapsed_seconds"`
	usageView
}

func (r *runner) stat(c *cli.Context) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	if err := needArgs(c, 1, 1, "ID"); err != nil {
		return err
	}
	id := c.Args().First()
	if err := checkIDs([]string{id}); err != nil {
		return err
	}
	cn, err := r.connect(c)
	if err != nil {
		return err
	}
	var rep *latticev1.StatReply
	err = cn.unary(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		rep, err = latticev1.NewUsageServiceClient(cc).Stat(ctx, &latticev1.StatRequest{Id: id})
		return err
	})
	if err != nil {
		return err
	}
	u := rep.GetUsage()
	v := statView{ID: rep.GetDisplayId(), Node: rep.GetNode(), ElapsedSeconds: rep.GetElapsedSeconds()}
	if uv := usageViewOf(u); uv != nil {
		v.usageView = *uv
	}
	return r.emitAs(format, v, func(w io.Writer, _ bool) error {
		row(w, "JOBID", "NODE", "ELAPSED", "TOTALCPU", "USERCPU", "SYSTEMCPU", "MAXRSS", "CONSUMEDENERGY", "ENERGY_SOURCE")
		row(w, v.ID, v.Node, model.FormatWalltime(time.Duration(v.ElapsedSeconds)*time.Second),
			cpuTime(v.TotalCPUSeconds, u != nil), cpuTime(v.UserCPUSeconds, u != nil), cpuTime(v.SystemCPUSeconds, u != nil),
			rssText(u), orDash(energyText(u)), orDash(v.EnergySource))
		return nil
	})
}

// ---- usage --start/--end (sreport) ----

// usageReportFlags extend `usage` with a billing window.
func usageReportFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "start", Aliases: []string{"S"}, Usage: "with --end: sum the allocations that ended from this time (" + slurmTimeForms + "), per tenant (sreport-like)"},
		&cli.StringFlag{Name: "end", Aliases: []string{"E"}, Usage: "end of the --start window (same forms)", DefaultText: "now"},
	}
}

// tenantUsageView is one row of `usage --start ... -o json`.
type tenantUsageView struct {
	Tenant          string  `json:"tenant"`
	Jobs            int64   `json:"jobs"`
	MeasuredJobs    int64   `json:"measured_jobs"`
	NodeSeconds     float64 `json:"node_seconds"`
	TotalCPUSeconds float64 `json:"total_cpu_seconds"`
	EnergyJoules    float64 `json:"consumed_energy_joules"`
}

// usageReport is `usage --start/--end`: per tenant, the allocations that
// ended in the window, their node-hours, CPU time and energy.
func (r *runner) usageReport(c *cli.Context, format string) error {
	now := r.Now()
	from, err := parseSlurmTime("start", cmpOr(c.String("start"), "midnight"), now, r.Location)
	if err != nil {
		return err
	}
	to, err := parseSlurmTime("end", cmpOr(c.String("end"), "now"), now, r.Location)
	if err != nil {
		return err
	}
	if !from.Before(to) {
		return &model.FieldError{Field: "end", Value: c.String("end"), Allowed: "a time after --start " + from.Format(time.RFC3339)}
	}
	req := &latticev1.UsageReportRequest{StartUnixMs: from.UnixMilli(), EndUnixMs: to.UnixMilli()}
	if v, ok := explicit(c, "tenant"); ok {
		req.Tenant = v
	}
	cn, err := r.connect(c)
	if err != nil {
		return err
	}
	var rep *latticev1.UsageReportReply
	err = cn.unary(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		rep, err = latticev1.NewUsageServiceClient(cc).Report(ctx, req)
		return err
	})
	if err != nil {
		return err
	}
	views := []tenantUsageView{}
	for _, t := range rep.GetTenants() {
		views = append(views, tenantUsageView{Tenant: t.GetTenant(), Jobs: t.GetJobs(), MeasuredJobs: t.GetMeasuredJobs(),
			NodeSeconds: t.GetNodeSeconds(), TotalCPUSeconds: t.GetCpuSeconds(), EnergyJoules: t.GetEnergyJoules()})
	}
	return r.emitAs(format, views, func(w io.Writer, _ bool) error {
		row(w, "TENANT", "JOBS", "MEASURED", "NODE_HOURS", "CPU_HOURS", "ENERGY_KWH")
		for _, v := range views {
			row(w, v.Tenant, v.Jobs, v.MeasuredJobs, fmt.Sprintf("%.2f", v.NodeSeconds/3600), fmt.Sprintf("%.2f", v.TotalCPUSeconds/3600),
				fmt.Sprintf("%.3f", v.EnergyJoules/3.6e6))
		}
		return nil
	})
}

// ---- suspend / resume (scontrol suspend) ----

func (r *runner) suspendCommands() []*cli.Command {
	mk := func(name, usage string, resume bool) *cli.Command {
		return &cli.Command{Name: name, Usage: usage, ArgsUsage: "ID", Flags: listingFlags(),
			Action: func(c *cli.Context) error { return r.suspend(c, resume) }}
	}
	return []*cli.Command{
		mk("suspend", "admins: freeze every process of a running allocation (its nodes stay its own; its walltime stops)", false),
		mk("resume", "admins: thaw an allocation suspended with latticectl suspend", true),
	}
}

func (r *runner) suspend(c *cli.Context, resume bool) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	if err := needArgs(c, 1, 1, "ID"); err != nil {
		return err
	}
	id := c.Args().First()
	if err := checkIDs([]string{id}); err != nil {
		return err
	}
	cn, err := r.connect(c)
	if err != nil {
		return err
	}
	var rep *latticev1.SuspendJobReply
	err = cn.unary(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		rep, err = latticev1.NewUsageServiceClient(cc).Suspend(ctx, &latticev1.SuspendJobRequest{Id: id, Resume: resume})
		return err
	})
	if err != nil {
		return err
	}
	v := struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}{id, rep.GetState()}
	return r.emitAs(format, v, func(w io.Writer, _ bool) error {
		verb := "suspended"
		if resume {
			verb = "resumed"
		}
		_, err := fmt.Fprintf(w, "allocation %s %s\n", id, verb)
		return err
	})
}
