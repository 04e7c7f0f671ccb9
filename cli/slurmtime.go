package cli

import (
	"strconv"
	"strings"
	"time"

	"github.com/latticehpc/lattice/model"
)

// slurmTimeForms is the help text for the time forms parseSlurmTime reads.
const slurmTimeForms = "now, today, midnight, noon, teatime, tomorrow, now[+-]COUNT[seconds|minutes|hours|days|weeks], " +
	"HH:MM[:SS], YYYY-MM-DD[THH:MM[:SS]], MMDD[YY], MM/DD[/YY] or MM.DD[.YY] (each optionally -HH:MM[:SS]), or RFC 3339"

var (
	relTime   = lazyRegexp(`^now(?:([+-])(\d+)([a-z]*))?$`)
	clockTime = lazyRegexp(`^(\d{1,2}):(\d{2})(?::(\d{2}))?$`)
	isoDate   = lazyRegexp(`^(\d{4})-(\d{2})-(\d{2})(?:[tT](\d{1,2}):(\d{2})(?::(\d{2}))?)?$`)
	usDate    = lazyRegexp(`^(\d{2})([/.]?)(\d{2})(?:[/.]?(\d{2}))?(?:-(\d{1,2}):(\d{2})(?::(\d{2}))?)?$`)
)

// parseSlurmTime reads a time the way sacct's --starttime and --endtime do
// (and sbatch's --begin), relative to now in loc. field names the flag in
// errors.
func parseSlurmTime(field, s string, now time.Time, loc *time.Location) (time.Time, error) {
	if loc == nil {
		loc = time.Local
	}
	now = now.In(loc)
	bad := func() (time.Time, error) {
		return time.Time{}, &model.FieldError{Field: field, Value: s, Allowed: slurmTimeForms}
	}
	v := strings.ToLower(strings.TrimSpace(s))
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, loc)
	switch v {
	case "today", "midnight":
		return day, nil
	case "noon":
		return day.Add(12 * time.Hour), nil
	case "teatime":
		return day.Add(16 * time.Hour), nil
	case "tomorrow":
		return day.AddDate(0, 0, 1), nil
	}
	if m := relTime().FindStringSubmatch(v); m != nil {
		if m[1] == "" {
			return now, nil
		}
		n, err := strconv.Atoi(m[2])
		if err != nil || n > 100*366*24*3600 { // beyond a century in any unit: a typo
			return bad()
		}
		unit, ok := model.SlurmTimeUnit(m[3])
		if !ok {
			return bad()
		}
		d := time.Duration(n) * unit
		if m[1] == "-" {
			d = -d
		}
		return now.Add(d), nil
	}
	if t, err := time.Parse(time.RFC3339, strings.TrimSpace(s)); err == nil {
		return t, nil
	}
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	clock := func(h, m, sec string) (time.Duration, bool) {
		if h == "" {
			return 0, true
		}
		hh, mm, ss := atoi(h), atoi(m), atoi(sec)
		if hh > 23 || mm > 59 || ss > 59 {
			return 0, false
		}
		return time.Duration(hh)*time.Hour + time.Duration(mm)*time.Minute + time.Duration(ss)*time.Second, true
	}
	date := func(y, mo, d int) (time.Time, bool) {
		t := time.Date(y, time.Month(mo), d, 0, 0, 0, 0, loc)
		return t, t.Month() == time.Month(mo) && t.Day() == d
	}
	if m := clockTime().FindStringSubmatch(v); m != nil {
		off, ok := clock(m[1], m[2], m[3])
		if !ok {
			return bad()
		}
		return day.Add(off), nil
	}
	if m := isoDate().FindStringSubmatch(v); m != nil {
		d, ok := date(atoi(m[1]), atoi(m[2]), atoi(m[3]))
		off, ok2 := clock(m[4], m[5], m[6])
		if !ok || !ok2 {
			return bad()
		}
		return d.Add(off), nil
	}
	if m := usDate().FindStringSubmatch(v); m != nil {
		y := now.Year()
		if m[4] != "" {
			y = 2000 + atoi(m[4])
		}
		d, ok := date(y, atoi(m[1]), atoi(m[3]))
		off, ok2 := clock(m[5], m[6], m[7])
		if !ok || !ok2 {
			return bad()
		}
		return d.Add(off), nil
	}
	return bad()
}
