package replay

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// DefaultSweepTolerance is how much utilization (absolute, 0..1) a sweep
// setting may lose against the best baseline and still be chosen.
const DefaultSweepTolerance = 0.01

// SweepDim is one dimension of a sweep grid: a parameter and its values.
type SweepDim struct {
	Name   string // w1..w9, profile, reservation-depth, cycle, group-size
	Values []string
}

// ParseSweep reads one --sweep: "w3=0:0.5:0.1" (a range START:END:STEP,
// END included) or "NAME=a,b,c" (a list) for w1..w9 (f1..f9 accepted),
// profile (weights-profile), reservation-depth (N, all or none), cycle
// (seconds or a Go duration) and group-size.
func ParseSweep(spec string) (SweepDim, error) {
	name, vals, ok := strings.Cut(spec, "=")
	name = strings.ToLower(strings.TrimSpace(name))
	if !ok || name == "" || strings.TrimSpace(vals) == "" {
		return SweepDim{}, fmt.Errorf("sweep %q: allowed NAME=START:END:STEP or NAME=A,B,C", spec)
	}
	if name == "weights-profile" {
		name = "profile"
	}
	if len(name) == 2 && name[0] == 'f' {
		name = "w" + name[1:]
	}
	d := SweepDim{Name: name}
	if weightIndex(name) < 0 && name != "profile" && name != "reservation-depth" && name != "cycle" && name != "group-size" {
		return d, fmt.Errorf("sweep %q: unknown parameter %q: allowed w1..w9, profile, reservation-depth, cycle, group-size", spec, name)
	}
	if a, rest, isRange := strings.Cut(vals, ":"); isRange {
		b, st, ok := strings.Cut(rest, ":")
		start, e1 := strconv.ParseFloat(a, 64)
		end, e2 := strconv.ParseFloat(b, 64)
		step, e3 := strconv.ParseFloat(st, 64)
		if !ok || e1 != nil || e2 != nil || e3 != nil || step <= 0 || end < start {
			return d, fmt.Errorf("sweep %q: range START:END:STEP with START <= END and STEP > 0", spec)
		}
		n := int(math.Floor((end-start)/step+1e-9)) + 1
		if n > 1000 {
			return d, fmt.Errorf("sweep %q: %d values: at most 1000", spec, n)
		}
		for i := range n {
			v := start + float64(i)*step
			d.Values = append(d.Values, strconv.FormatFloat(math.Round(v*1e9)/1e9, 'f', -1, 64))
		}
	} else {
		for v := range strings.SplitSeq(vals, ",") {
			if v = strings.TrimSpace(v); v != "" {
				d.Values = append(d.Values, v)
			}
		}
	}
	// Check every value once, up front.
	for _, v := range d.Values {
		var c Config
		if err := d.apply(&c, v); err != nil {
			return d, fmt.Errorf("sweep %q: %w", spec, err)
		}
	}
	return d, nil
}

func weightIndex(name string) int {
	if len(name) == 2 && name[0] == 'w' && name[1] >= '1' && name[1] <= '9' {
		return int(name[1] - '1')
	}
	return -1
}

// apply sets the dimension's parameter to v in c.
func (d SweepDim) apply(c *Config, v string) error {
	if i := weightIndex(d.Name); i >= 0 {
		w, err := strconv.ParseFloat(v, 64)
		if err != nil || w < 0 || w > 1 {
			return fmt.Errorf("%s=%s: allowed a weight between 0 and 1", d.Name, v)
		}
		m := make(map[int]float64, len(c.Weights)+1)
		for k, x := range c.Weights {
			m[k] = x
		}
		m[i] = w
		c.Weights = m
		return nil
	}
	switch d.Name {
	case "profile":
		c.WeightsProfile = v
		_, err := ProfileWeights(v)
		return err
	case "reservation-depth":
		n, err := ParseReservationDepth(v)
		c.ReservationDepth = n
		return err
	case "cycle":
		cy, err := ParseCycle(v)
		c.Cycle = cy
		return err
	case "group-size":
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("group-size=%s: allowed an integer >= 1", v)
		}
		c.GroupSize = n
		return nil
	}
	return fmt.Errorf("unknown sweep parameter %q", d.Name)
}

// ParseReservationDepth reads N >= 1, "all" (conservative) or "none".
func ParseReservationDepth(s string) (int, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "all":
		return -1, nil
	case "none", "0":
		return ReservationsNone, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 1 {
		return 0, fmt.Errorf("reservation depth %q: allowed N >= 1, all or none", s)
	}
	return n, nil
}

// ParseCycle reads a cycle: seconds ("30") or a Go duration ("30s", "1m");
// 0 = event-driven.
func ParseCycle(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(s, 64); err == nil && f >= 0 {
		return seconds(f), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("cycle %q: allowed seconds or a duration such as 30s (0 = at every event)", s)
	}
	return d, nil
}

// SweepSetting is one point of a sweep grid.
type SweepSetting struct {
	Label  string // e.g. "w3=0.2 reservation-depth=all"
	Config Config
}

// Grid expands dimensions into settings over base (the Cartesian product,
// the first dimension varying slowest).
func Grid(base Config, dims []SweepDim) ([]SweepSetting, error) {
	out := []SweepSetting{{Config: base}}
	for _, d := range dims {
		var next []SweepSetting
		for _, s := range out {
			for _, v := range d.Values {
				c := s.Config
				if err := d.apply(&c, v); err != nil {
					return nil, err
				}
				label := strings.TrimSpace(s.Label + " " + d.Name + "=" + v)
				next = append(next, SweepSetting{Label: label, Config: c})
			}
		}
		out = next
	}
	if len(out) > 10000 {
		return nil, fmt.Errorf("sweep grid of %d settings: at most 10000", len(out))
	}
	return out, nil
}

// Best picks the sweep's best setting: the lowest average bounded slowdown
// among settings whose utilization is at least the best baseline's minus
// tol; ties go to the earlier setting. It returns -1 when no setting
// qualifies (or there are none).
func Best(settings []Metrics, baselines []Metrics, tol float64) int {
	floor := math.Inf(-1)
	for _, b := range baselines {
		floor = max(floor, b.Utilization-tol)
	}
	best := -1
	for i, m := range settings {
		if m.Utilization < floor {
			continue
		}
		if best < 0 || m.AvgBoundedSlowdown < settings[best].AvgBoundedSlowdown {
			best = i
		}
	}
	return best
}
