package model

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

const walltimeForms = "MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, or a Go duration such as 90m or 1h30m"

// ParseWalltime reads a walltime in every Slurm form (MM, MM:SS, HH:MM:SS,
// D-HH, D-HH:MM, D-HH:MM:SS) or as a Go duration (90m, 1h30m). A bare number
// is minutes, as in Slurm.
func ParseWalltime(s string) (time.Duration, error) {
	in := strings.TrimSpace(s)
	bad := fieldErr("walltime", s, walltimeForms)
	if in == "" {
		return 0, bad
	}
	var d time.Duration
	if strings.ContainsAny(in, "hmsuµn") && !strings.ContainsAny(in, ":-") {
		v, err := time.ParseDuration(in)
		if err != nil {
			return 0, bad
		}
		d = v
	} else {
		days := 0
		rest := in
		if before, after, ok := strings.Cut(in, "-"); ok {
			n, ok := atoiNonNeg(before)
			if !ok {
				return 0, bad
			}
			days, rest = n, after
		}
		parts := strings.Split(rest, ":")
		nums := make([]int, len(parts))
		for i, p := range parts {
			n, ok := atoiNonNeg(p)
			if !ok {
				return 0, bad
			}
			nums[i] = n
		}
		var h, m, sec int
		switch {
		case days > 0 || strings.Contains(in, "-"):
			// D-HH, D-HH:MM, D-HH:MM:SS
			switch len(nums) {
			case 1:
				h = nums[0]
			case 2:
				h, m = nums[0], nums[1]
			case 3:
				h, m, sec = nums[0], nums[1], nums[2]
			default:
				return 0, bad
			}
		default:
			switch len(nums) {
			case 1:
				m = nums[0]
			case 2:
				m, sec = nums[0], nums[1]
			case 3:
				h, m, sec = nums[0], nums[1], nums[2]
			default:
				return 0, bad
			}
		}
		total := ((int64(days)*24+int64(h))*60+int64(m))*60 + int64(sec)
		if total > int64(MaxWalltime/time.Second) {
			return 0, fieldErr("walltime", s, "at most 365 days")
		}
		d = time.Duration(total) * time.Second
	}
	if d <= 0 {
		return 0, fieldErr("walltime", s, "a duration > 0 ("+walltimeForms+")")
	}
	if d > MaxWalltime {
		return 0, fieldErr("walltime", s, "at most 365 days")
	}
	return d, nil
}

// FormatWalltime prints a duration the way Slurm does: [D-]HH:MM:SS.
func FormatWalltime(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d / time.Second)
	days := s / 86400
	s %= 86400
	if days > 0 {
		return fmt.Sprintf("%d-%02d:%02d:%02d", days, s/3600, s%3600/60, s%60)
	}
	return fmt.Sprintf("%02d:%02d:%02d", s/3600, s%3600/60, s%60)
}

func atoiNonNeg(s string) (int, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// ParseNodeRange reads "N" or "MIN-MAX".
func ParseNodeRange(s string) (min, max int, err error) {
	allowed := "a node count N >= 1, or MIN-MAX with 1 <= MIN <= MAX"
	in := strings.TrimSpace(s)
	if a, b, ok := strings.Cut(in, "-"); ok {
		lo, ok1 := atoiNonNeg(a)
		hi, ok2 := atoiNonNeg(b)
		if !ok1 || !ok2 || lo < 1 || hi < lo {
			return 0, 0, fieldErr("nodes", s, allowed)
		}
		return lo, hi, nil
	}
	n, ok := atoiNonNeg(in)
	if !ok || n < 1 {
		return 0, 0, fieldErr("nodes", s, allowed)
	}
	return n, n, nil
}

// ParseArraySpec reads START-END[:STEP][%MAX] or a single index N.
func ParseArraySpec(s string) (*ArraySpec, error) {
	bad := fieldErr("array", s, "START-END[:STEP][%MAX] or N, with 0 <= START <= END and STEP >= 1")
	in := strings.TrimSpace(s)
	spec := ArraySpec{Step: 1}
	if body, max, ok := strings.Cut(in, "%"); ok {
		n, ok := atoiNonNeg(max)
		if !ok || n < 1 {
			return nil, bad
		}
		spec.MaxConcurrent, in = n, body
	}
	if body, step, ok := strings.Cut(in, ":"); ok {
		n, ok := atoiNonNeg(step)
		if !ok || n < 1 {
			return nil, bad
		}
		spec.Step, in = n, body
	}
	if a, b, ok := strings.Cut(in, "-"); ok {
		lo, ok1 := atoiNonNeg(a)
		hi, ok2 := atoiNonNeg(b)
		if !ok1 || !ok2 || hi < lo {
			return nil, bad
		}
		spec.Start, spec.End = lo, hi
	} else {
		n, ok := atoiNonNeg(in)
		if !ok {
			return nil, bad
		}
		spec.Start, spec.End = n, n
	}
	if (spec.End-spec.Start)/spec.Step+1 > MaxArrayTasks {
		return nil, fieldErr("array", s, fmt.Sprintf("at most %d tasks", MaxArrayTasks))
	}
	return &spec, nil
}

// ParseConstraint reads FEATURE[&FEATURE...] (Slurm's AND form; ',' is
// accepted as AND too). OR forms ('|') are refused.
func ParseConstraint(s string) ([]string, error) {
	in := strings.TrimSpace(s)
	if in == "" {
		return nil, nil
	}
	if strings.ContainsAny(in, "|[]*") {
		return nil, fieldErr("constraint", s, "FEATURE[&FEATURE...] (only AND of features is supported)")
	}
	var out []string
	for _, f := range strings.FieldsFunc(in, func(r rune) bool { return r == '&' || r == ',' }) {
		f = strings.TrimSpace(f)
		if f == "" || strings.ContainsAny(f, " \t") {
			return nil, fieldErr("constraint", s, "FEATURE[&FEATURE...] of non-empty feature names")
		}
		out = append(out, f)
	}
	return NormalizeFeatures(out), nil
}

// ParseWatts reads IDLE:BUSY watts, e.g. "100:400".
func ParseWatts(s string) (idle, busy int, err error) {
	bad := fieldErr("node-watts", s, "IDLE:BUSY in watts with 0 <= IDLE <= BUSY, e.g. 100:400")
	a, b, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return 0, 0, bad
	}
	i, ok1 := atoiNonNeg(a)
	j, ok2 := atoiNonNeg(b)
	if !ok1 || !ok2 || j < i {
		return 0, 0, bad
	}
	return i, j, nil
}

// ParseKilowatts reads a power budget in kW (0 = none) and returns watts.
func ParseKilowatts(field, s string) (int64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) || f > 1e9 {
		return 0, fieldErr(field, s, "kilowatts >= 0 (0 = no budget)")
	}
	return int64(math.Round(f * 1000)), nil
}
