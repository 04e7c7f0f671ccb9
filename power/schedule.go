package power

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/latticehpc/lattice/model"
)

// Schedule is a time-of-use energy price: a piecewise-constant price that
// repeats with a period (a day, a week, or the span of a CSV of timestamped
// prices). Prices are in the site's unit (say EUR/MWh) and may be negative;
// Normalized maps them to [0,1] over the schedule's own range, which is what
// the solver's f7 uses (f7 = 1 - normalised price). A Schedule is immutable
// and safe for concurrent use.
type Schedule struct {
	kind   string // "daily", "weekly" or "csv"
	anchor time.Time
	period time.Duration
	offs   []time.Duration // segment starts in the period; offs[0] = 0
	price  []float64
	// cumNorm[i] and cumCheap[i] integrate the normalised price and the
	// cheap indicator (seconds) from the period start to offs[i]; the last
	// entry is the whole period.
	cumNorm, cumCheap, cumRaw []float64
	min, max                  float64
}

// Schedule formats, for error messages.
const (
	tableForm = "lines of [DAY] HH:MM PRICE (or HH:MM=PRICE, comma-separated inline), DAY mon..sun for a weekly table, optional 'zone +HH:MM'"
	csvForm   = "CSV rows TIME,PRICE with RFC 3339 times (or YYYY-MM-DD HH:MM[:SS], UTC), strictly increasing, optional header"
)

// Kind is "daily", "weekly" or "csv".
func (s *Schedule) Kind() string { return s.kind }

// Period is how long the schedule runs before it repeats.
func (s *Schedule) Period() time.Duration { return s.period }

// Start is the start of one period (the first row of a CSV schedule;
// midnight, or Monday midnight, in the table's zone for tables).
func (s *Schedule) Start() time.Time { return s.anchor }

// Range is the lowest and highest price.
func (s *Schedule) Range() (lo, hi float64) { return s.min, s.max }

// Segments is how many price changes one period holds.
func (s *Schedule) Segments() int { return len(s.offs) }

// String describes the schedule in one line.
func (s *Schedule) String() string {
	return fmt.Sprintf("%s schedule, %d prices per %s from %g to %g", s.kind, len(s.offs), s.period, s.min, s.max)
}

// locate returns the number of whole periods before t, the segment index
// and the offset of t in the period.
func (s *Schedule) locate(t time.Time) (k int64, i int, off time.Duration) {
	d := t.Sub(s.anchor)
	k = int64(d / s.period)
	off = d % s.period
	if off < 0 {
		off += s.period
		k--
	}
	i = sort.Search(len(s.offs), func(j int) bool { return s.offs[j] > off }) - 1
	return k, i, off
}

// Price is the price at t.
func (s *Schedule) Price(t time.Time) float64 {
	_, i, _ := s.locate(t)
	return s.price[i]
}

func (s *Schedule) norm(p float64) float64 {
	if s.max <= s.min {
		return 0
	}
	return (p - s.min) / (s.max - s.min)
}

// Normalized is the price at t mapped to [0,1] (0 = the cheapest price of
// the schedule, 1 = the dearest; 0 for a flat schedule).
func (s *Schedule) Normalized(t time.Time) float64 { return s.norm(s.Price(t)) }

// Cheap reports whether t falls in a cheap hour: a normalised price below
// one half (the lower half of the schedule's price range).
func (s *Schedule) Cheap(t time.Time) bool { return s.cheap(s.Price(t)) }

func (s *Schedule) cheap(p float64) bool { return s.max > s.min && s.norm(p) < 0.5 }

// integral of f over the schedule from anchor to t, in value·seconds.
func (s *Schedule) integral(t time.Time, cum []float64, f func(float64) float64) float64 {
	k, i, off := s.locate(t)
	return float64(k)*cum[len(cum)-1] + cum[i] + f(s.price[i])*(off-s.offs[i]).Seconds()
}

func ident(p float64) float64 { return p }

// MeanNormalized is the time-average of the normalised price over [a, b)
// (the price at a when b <= a).
func (s *Schedule) MeanNormalized(a, b time.Time) float64 {
	if !b.After(a) {
		return s.Normalized(a)
	}
	return (s.integral(b, s.cumNorm, s.norm) - s.integral(a, s.cumNorm, s.norm)) / b.Sub(a).Seconds()
}

// PriceSeconds is the integral of the price over [a, b) in price·seconds;
// a constant draw of W watts over [a, b) costs W·PriceSeconds/3.6e9 when
// prices are per MWh.
func (s *Schedule) PriceSeconds(a, b time.Time) float64 {
	if !b.After(a) {
		return 0
	}
	return s.integral(b, s.cumRaw, ident) - s.integral(a, s.cumRaw, ident)
}

// CheapSeconds is how many seconds of [a, b) fall in cheap hours.
func (s *Schedule) CheapSeconds(a, b time.Time) float64 {
	if !b.After(a) {
		return 0
	}
	f := func(p float64) float64 {
		if s.cheap(p) {
			return 1
		}
		return 0
	}
	return s.integral(b, s.cumCheap, f) - s.integral(a, s.cumCheap, f)
}

// NextChange is the first time after t at which the price may change.
func (s *Schedule) NextChange(t time.Time) time.Time {
	k, i, _ := s.locate(t)
	base := s.anchor.Add(time.Duration(k) * s.period)
	if i+1 < len(s.offs) {
		return base.Add(s.offs[i+1])
	}
	return base.Add(s.period)
}

// build finishes a schedule from its segments (offs[0] must be 0).
func build(kind string, anchor time.Time, period time.Duration, offs []time.Duration, price []float64) *Schedule {
	s := &Schedule{kind: kind, anchor: anchor, period: period, offs: offs, price: price,
		min: math.Inf(1), max: math.Inf(-1)}
	for _, p := range price {
		s.min, s.max = math.Min(s.min, p), math.Max(s.max, p)
	}
	n := len(offs)
	s.cumNorm, s.cumCheap, s.cumRaw = make([]float64, n+1), make([]float64, n+1), make([]float64, n+1)
	for i := range offs {
		end := period
		if i+1 < n {
			end = offs[i+1]
		}
		secs := (end - offs[i]).Seconds()
		s.cumNorm[i+1] = s.cumNorm[i] + s.norm(price[i])*secs
		s.cumRaw[i+1] = s.cumRaw[i] + price[i]*secs
		c := 0.0
		if s.cheap(price[i]) {
			c = secs
		}
		s.cumCheap[i+1] = s.cumCheap[i] + c
	}
	return s
}

// Flat is a schedule with one price (nothing to shift; f7 is the same for
// every hour).
func Flat(price float64) *Schedule {
	return build("flat", time.Unix(0, 0).UTC(), 24*time.Hour, []time.Duration{0}, []float64{price})
}

func scheduleErr(where, value, allowed string) error {
	return &model.FieldError{Field: "energy-prices" + where, Value: value, Allowed: allowed}
}

// Parse reads a schedule file: a CSV of timestamped prices when its first
// data line starts with a date (YYYY-…) or a header naming a time column,
// otherwise a daily or weekly table.
func Parse(data []byte) (*Schedule, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if looksCSV(line) {
			return ParseCSV(bytes.NewReader(data))
		}
		break
	}
	return ParseTable(string(data))
}

func looksCSV(line string) bool {
	first, _, _ := strings.Cut(line, ",")
	first = strings.ToLower(strings.TrimSpace(first))
	if first == "time" || first == "timestamp" || first == "start" {
		return true
	}
	return len(first) >= 10 && first[4] == '-' && first[7] == '-'
}

var weekdays = map[string]int{"mon": 0, "monday": 0, "tue": 1, "tuesday": 1, "wed": 2, "wednesday": 2,
	"thu": 3, "thursday": 3, "fri": 4, "friday": 4, "sat": 5, "saturday": 5, "sun": 6, "sunday": 6}

// ParseTable reads a daily or weekly table: entries "[DAY] HH:MM PRICE" (or
// "[DAY] HH:MM=PRICE"), one per line or comma-separated; each price holds
// from its time until the next entry's, wrapping round the day (or week,
// when entries name days mon..sun). "zone +HH:MM" (or "zone=+HH:MM") sets
// the table's UTC offset (default UTC). '#' starts a comment.
func ParseTable(text string) (*Schedule, error) {
	type entry struct {
		off   time.Duration
		price float64
	}
	var entries []entry
	var zone time.Duration
	weekly, daily := false, false
	lineNo := 0
	for _, line := range strings.Split(text, "\n") {
		lineNo++
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		for _, item := range strings.Split(line, ",") {
			item = strings.TrimSpace(strings.ReplaceAll(item, "=", " "))
			if item == "" {
				continue
			}
			where := fmt.Sprintf(" line %d", lineNo)
			f := strings.Fields(item)
			if strings.EqualFold(f[0], "zone") {
				if len(f) != 2 {
					return nil, scheduleErr(where, item, "zone +HH:MM or zone -HH:MM")
				}
				z, err := parseZone(f[1])
				if err != nil {
					return nil, scheduleErr(where, item, "zone +HH:MM or zone -HH:MM")
				}
				zone = z
				continue
			}
			day := -1
			if d, ok := weekdays[strings.ToLower(f[0])]; ok {
				day, f = d, f[1:]
			}
			if len(f) != 2 {
				return nil, scheduleErr(where, item, tableForm)
			}
			tod, err := parseClock(f[0])
			if err != nil {
				return nil, scheduleErr(where, item, "a time of day HH:MM from 00:00 to 23:59; "+tableForm)
			}
			p, err := strconv.ParseFloat(f[1], 64)
			if err != nil || math.IsInf(p, 0) || math.IsNaN(p) {
				return nil, scheduleErr(where, item, "a finite price (a number, may be negative); "+tableForm)
			}
			if day >= 0 {
				weekly = true
				tod += time.Duration(day) * 24 * time.Hour
			} else {
				daily = true
			}
			entries = append(entries, entry{tod, p})
		}
	}
	if len(entries) == 0 {
		return nil, scheduleErr("", "(empty)", tableForm+"; or "+csvForm)
	}
	if weekly && daily {
		return nil, scheduleErr("", "a mix of entries with and without a day", "every entry with a day (weekly) or none (daily)")
	}
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].off < entries[j].off })
	for i := 1; i < len(entries); i++ {
		if entries[i].off == entries[i-1].off {
			return nil, scheduleErr("", fmtOff(entries[i].off, weekly), "each time at most once")
		}
	}
	kind, period := "daily", 24*time.Hour
	// Unix time 0 is a Thursday; the first Monday is 4 days later.
	anchor := time.Unix(0, 0).UTC().Add(-zone)
	if weekly {
		kind, period = "weekly", 7*24*time.Hour
		anchor = anchor.Add(4 * 24 * time.Hour)
	}
	var offs []time.Duration
	var price []float64
	if entries[0].off != 0 { // before the first entry, the last price holds
		offs, price = append(offs, 0), append(price, entries[len(entries)-1].price)
	}
	for _, e := range entries {
		offs, price = append(offs, e.off), append(price, e.price)
	}
	return build(kind, anchor, period, offs, price), nil
}

func fmtOff(d time.Duration, weekly bool) string {
	days := []string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"}
	h, m := int(d.Hours())%24, int(d.Minutes())%60
	if weekly {
		return fmt.Sprintf("%s %02d:%02d", days[int(d.Hours())/24], h, m)
	}
	return fmt.Sprintf("%02d:%02d", h, m)
}

func parseClock(s string) (time.Duration, error) {
	hh, mm, ok := strings.Cut(s, ":")
	h, err1 := strconv.Atoi(hh)
	m, err2 := strconv.Atoi(mm)
	if !ok || err1 != nil || err2 != nil || h < 0 || h > 23 || m < 0 || m > 59 || len(mm) != 2 {
		return 0, fmt.Errorf("bad time %q", s)
	}
	return time.Duration(h)*time.Hour + time.Duration(m)*time.Minute, nil
}

func parseZone(s string) (time.Duration, error) {
	if len(s) < 2 || (s[0] != '+' && s[0] != '-') {
		return 0, fmt.Errorf("bad zone %q", s)
	}
	d, err := parseClock(s[1:])
	if err != nil {
		return 0, err
	}
	if s[0] == '-' {
		d = -d
	}
	return d, nil
}

var csvTimeLayouts = []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04"}

func parseCSVTime(s string) (time.Time, bool) {
	for _, l := range csvTimeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// ParseCSV reads rows TIME,PRICE (extra columns are ignored; '#' lines and a
// header row are skipped). Each price holds from its time until the next
// row's; the last holds as long as the interval before it, and then the
// schedule repeats from the first row.
func ParseCSV(r io.Reader) (*Schedule, error) {
	sc := bufio.NewScanner(r)
	var times []time.Time
	var prices []float64
	lineNo, data := 0, 0
	for sc.Scan() {
		lineNo++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		data++
		f := strings.Split(line, ",")
		where := fmt.Sprintf(" line %d", lineNo)
		t, ok := parseCSVTime(strings.TrimSpace(f[0]))
		if !ok {
			if data == 1 { // a header
				continue
			}
			return nil, scheduleErr(where, line, csvForm)
		}
		if len(f) < 2 {
			return nil, scheduleErr(where, line, csvForm)
		}
		p, err := strconv.ParseFloat(strings.TrimSpace(f[1]), 64)
		if err != nil || math.IsInf(p, 0) || math.IsNaN(p) {
			return nil, scheduleErr(where, line, "a finite price (a number, may be negative) in the second column")
		}
		if n := len(times); n > 0 && !t.After(times[n-1]) {
			return nil, scheduleErr(where, line, "times strictly increasing")
		}
		times, prices = append(times, t), append(prices, p)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("energy-prices: %w", err)
	}
	switch len(times) {
	case 0:
		return nil, scheduleErr("", "(no rows)", csvForm)
	case 1:
		return nil, scheduleErr("", "(one row)", "at least two rows (the last interval sets how long the last price holds)")
	}
	n := len(times)
	offs := make([]time.Duration, n)
	for i, t := range times {
		offs[i] = t.Sub(times[0])
	}
	period := offs[n-1] + (offs[n-1] - offs[n-2])
	return build("csv", times[0], period, offs, prices), nil
}

// Rebase returns the same schedule with a period starting at start: the
// replay puts the start of the schedule (midnight, Monday midnight, or the
// first CSV row) at trace time 0.
func (s *Schedule) Rebase(start time.Time) *Schedule {
	c := *s
	c.anchor = start
	return &c
}
