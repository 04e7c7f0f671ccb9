package main

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/power"
	"github.com/latticehpc/lattice/solver"
)

// --- logs ----------------------------------------------------------------------------

// setupLogging installs the process's slog handler: text (logfmt-like) or
// JSON lines on stderr, at the given level. Ids go in fields: alloc, node,
// vcluster, member.
func setupLogging(level, format string) error {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return &model.FieldError{Field: "log-level", Value: level, Allowed: "debug, info, warn or error"}
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch strings.ToLower(strings.TrimSpace(format)) {
	case "", "text":
		slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, opts)))
	case "json":
		slog.SetDefault(slog.New(slog.NewJSONHandler(os.Stderr, opts)))
	default:
		return &model.FieldError{Field: "log-format", Value: format, Allowed: "text or json"}
	}
	return nil
}

// --- energy price ----------------------------------------------------------------------

func energyFlags() []cli.Flag {
	d := power.DefaultShift()
	return []cli.Flag{
		altsrc.NewStringFlag(str("energy-prices", "", "time-of-use price schedule: a file (daily/weekly table or CSV TIME,PRICE) or an inline table like '00:00=40,07:00=140,22:00=60' (empty = none)")),
		altsrc.NewDurationFlag(dur("energy-max-delay", d.MaxDelay, "longest wait of flexible work for cheaper energy (0 = no shifting, f7 only)")),
		altsrc.NewFloat64Flag(&cli.Float64Flag{Name: "energy-min-saving", Value: d.MinSaving, Usage: "drop of the mean normalised price (0..1) worth waiting for", EnvVars: env("energy-min-saving")}),
		altsrc.NewIntFlag(&cli.IntFlag{Name: "energy-max-class", Value: d.MaxClass, Usage: "priority classes 0..N are flexible (-1: checkpointable work only)", EnvVars: env("energy-max-class")}),
		altsrc.NewFloat64Flag(&cli.Float64Flag{Name: "energy-max-stretch", Value: d.MaxStretch, Usage: "a job waits for a price at most this multiple of its walltime (0 = only energy-max-delay)", EnvVars: env("energy-max-stretch")}),
	}
}

// energyConfig reads the energy flags: nil when no schedule is set.
func energyConfig(c *cli.Context) (*solver.Energy, error) {
	v := strings.TrimSpace(c.String("energy-prices"))
	if v == "" {
		return nil, nil
	}
	var sched *power.Schedule
	if b, err := os.ReadFile(v); err == nil {
		if sched, err = power.Parse(b); err != nil {
			return nil, fmt.Errorf("%s: %w", v, err)
		}
	} else if strings.Contains(v, "=") {
		if sched, err = power.ParseTable(v); err != nil {
			return nil, err
		}
	} else {
		return nil, &model.FieldError{Field: "energy-prices", Value: v,
			Allowed: "a readable schedule file (daily/weekly table or CSV TIME,PRICE) or an inline table HH:MM=PRICE,..."}
	}
	sh := power.Shift{MaxDelay: c.Duration("energy-max-delay"), MinSaving: c.Float64("energy-min-saving"),
		MaxClass: c.Int("energy-max-class"), MaxStretch: c.Float64("energy-max-stretch")}
	if err := sh.Validate(); err != nil {
		return nil, err
	}
	slog.Info("energy price schedule", "schedule", sched.String(), "max_delay", sh.MaxDelay, "min_saving", sh.MinSaving)
	return &solver.Energy{Prices: sched, Shift: sh}, nil
}

// --- systemd ----------------------------------------------------------------------------

// sdNotify sends a state ("READY=1", "STOPPING=1", "STATUS=…") to systemd
// when it started us as Type=notify (NOTIFY_SOCKET set); otherwise nothing.
func sdNotify(state string) {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return
	}
	if strings.HasPrefix(path, "@") { // abstract socket
		path = "\x00" + path[1:]
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		slog.Warn("sd_notify", "err", err)
		return
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		slog.Warn("sd_notify", "err", err)
	}
}

// --- probe ------------------------------------------------------------------------------

// probeCommand checks a member's /readyz (or /healthz): exit 0 when it
// answers 200, 1 otherwise. For container health checks, where no curl is.
func probeCommand() *cli.Command {
	return &cli.Command{
		Name:  "probe",
		Usage: "exit 0 when a member's readiness URL answers 200 (container health checks)",
		Flags: []cli.Flag{
			str("url", "http://127.0.0.1:9090/readyz", "URL to GET (a member's /readyz or /healthz)"),
			dur("timeout", 3*time.Second, "give up after this long"),
		},
		Action: func(c *cli.Context) error {
			u := c.String("url")
			if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
				return usageError{&model.FieldError{Field: "url", Value: u, Allowed: "an http:// or https:// URL"}}
			}
			cl := &http.Client{Timeout: c.Duration("timeout")}
			resp, err := cl.Get(u)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: %s: %s", u, resp.Status, strings.TrimSpace(string(body)))
			}
			return nil
		},
		OnUsageError: onUsageError,
	}
}
