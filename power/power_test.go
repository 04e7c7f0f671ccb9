package power

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestStartDeltaAndCheck(t *testing.T) {
	own := &model.Node{Name: "a", IdleWatts: 100, BusyWatts: 400, CurrentVCluster: "hpc"}
	lent := &model.Node{Name: "b", IdleWatts: 100, BusyWatts: 400, CurrentVCluster: "ml"}
	sys, vc := StartDeltaAll([]*model.Node{own, lent}, "hpc")
	if sys != 600 || vc != 700 {
		t.Fatalf("deltas = %d, %d; want 600 (idle to busy twice), 700 (300 own + 400 borrowed)", sys, vc)
	}
	if e := Check("system", 1000, 600, 1600); e != nil {
		t.Fatalf("exactly at the limit must pass: %v", e)
	}
	e := Check("system", 1000, 601, 1600)
	if e == nil || e.Limit != 1600 || !strings.Contains(e.Error(), "exceeds the limit 1600 W") {
		t.Fatalf("over the limit: %v", e)
	}
	if Check("system", 1e9, 1, 0) != nil {
		t.Fatal("no limit must never fail")
	}
	for _, c := range []struct{ limit, draw, want int64 }{{0, 5, Unlimited}, {100, 40, 60}, {100, 140, 0}} {
		if got := Headroom(c.limit, c.draw); got != c.want {
			t.Errorf("Headroom(%d, %d) = %d, want %d", c.limit, c.draw, got, c.want)
		}
	}
	if MinHeadroom(Unlimited, 5) != 5 || MinHeadroom(7, Unlimited) != 7 || MinHeadroom(7, 5) != 5 || MinHeadroom(Unlimited, Unlimited) != Unlimited {
		t.Fatal("MinHeadroom")
	}
	busy := *own
	busy.Allocation = 1
	acc := Tally([]*model.Node{&busy, lent})
	if acc.System != 500 || acc.VClusters["hpc"] != 400 || acc.VClusters["ml"] != 100 {
		t.Fatalf("Tally = %+v", acc)
	}
}

func TestDailyTable(t *testing.T) {
	s, err := ParseTable("# night is cheap\n00:00 40\n07:00=140, 22:00 60\n")
	if err != nil {
		t.Fatal(err)
	}
	if s.Kind() != "daily" || s.Period() != 24*time.Hour {
		t.Fatalf("%s", s)
	}
	for _, c := range []struct {
		at    string
		price float64
		norm  float64
		cheap bool
	}{
		{"2024-03-04T03:00:00Z", 40, 0, true},
		{"2024-03-04T07:00:00Z", 140, 1, false},
		{"2024-03-04T21:59:59Z", 140, 1, false},
		{"2024-03-04T22:00:00Z", 60, 0.2, true},
		{"1969-12-31T23:00:00Z", 60, 0.2, true}, // before the anchor
	} {
		tm := at(c.at)
		if p, n := s.Price(tm), s.Normalized(tm); p != c.price || math.Abs(n-c.norm) > 1e-12 || s.Cheap(tm) != c.cheap {
			t.Errorf("%s: price %g norm %g cheap %v; want %g %g %v", c.at, p, n, s.Cheap(tm), c.price, c.norm, c.cheap)
		}
	}
	day := at("2024-03-04T00:00:00Z")
	if got := s.NextChange(day.Add(3 * time.Hour)); !got.Equal(day.Add(7 * time.Hour)) {
		t.Errorf("NextChange = %s", got)
	}
	if got := s.NextChange(day.Add(23 * time.Hour)); !got.Equal(day.Add(24 * time.Hour)) {
		t.Errorf("NextChange across midnight = %s", got)
	}
	// Mean over a whole day: (7h·0 + 15h·1 + 2h·0.2)/24.
	if got, want := s.MeanNormalized(day, day.Add(24*time.Hour)), (15+0.4)/24; math.Abs(got-want) > 1e-9 {
		t.Errorf("daily mean %g, want %g", got, want)
	}
	// Over three days, shifted: the same.
	if got, want := s.MeanNormalized(day.Add(5*time.Hour), day.Add(77*time.Hour)), (15+0.4)/24; math.Abs(got-want) > 1e-9 {
		t.Errorf("3-day mean %g, want %g", got, want)
	}
	if got := s.CheapSeconds(day, day.Add(48*time.Hour)); got != 2*9*3600 {
		t.Errorf("cheap seconds over two days = %g, want %d", got, 2*9*3600)
	}
	if got, want := s.PriceSeconds(day, day.Add(time.Hour)), 40.0*3600; got != want {
		t.Errorf("PriceSeconds = %g, want %g", got, want)
	}
}

func TestWeeklyTableZoneAndWrap(t *testing.T) {
	s, err := ParseTable("zone +01:00\nmon 08:00 100\nsat 00:00 20\n")
	if err != nil {
		t.Fatal(err)
	}
	// Monday 2024-03-04 07:30 UTC is 08:30 at +01:00: the weekday price.
	if p := s.Price(at("2024-03-04T07:30:00Z")); p != 100 {
		t.Errorf("monday price %g", p)
	}
	// Monday 06:00 UTC (07:00 local) is still the weekend price (wraps).
	if p := s.Price(at("2024-03-04T06:00:00Z")); p != 20 {
		t.Errorf("monday early price %g", p)
	}
	if p := s.Price(at("2024-03-09T12:00:00Z")); p != 20 {
		t.Errorf("saturday price %g", p)
	}
}

func TestCSVSchedule(t *testing.T) {
	s, err := Parse([]byte("time,price_eur_mwh\n2024-01-01T00:00:00Z,50\n2024-01-01T01:00:00Z,150\n2024-01-01 02:00,-10\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Kind() != "csv" || s.Period() != 3*time.Hour {
		t.Fatalf("%s period %s", s, s.Period())
	}
	if p := s.Price(at("2024-01-01T02:30:00Z")); p != -10 {
		t.Errorf("negative price %g", p)
	}
	// It repeats: 03:30 is the first row again.
	if p := s.Price(at("2024-01-01T03:30:00Z")); p != 50 {
		t.Errorf("repeat %g", p)
	}
	if n := s.Normalized(at("2024-01-01T00:10:00Z")); math.Abs(n-60.0/160) > 1e-12 {
		t.Errorf("normalised %g", n)
	}
}

func TestBadSchedules(t *testing.T) {
	for _, c := range []struct{ in, field string }{
		{"", "energy-prices"},
		{"25:00 10", "energy-prices line 1"},
		{"07:00 cheap", "energy-prices line 1"},
		{"07:00 10\n07:00 20", "energy-prices"},
		{"mon 07:00 10\n08:00 20", "energy-prices"},
		{"zone 5", "energy-prices line 1"},
		{"07:00 NaN", "energy-prices line 1"},
		{"2024-01-01T00:00:00Z,1\n2023-01-01T00:00:00Z,2", "energy-prices line 2"},
		{"2024-01-01T00:00:00Z,1", "energy-prices"},
		{"2024-01-01T00:00:00Z,x\n2024-01-01T01:00:00Z,2", "energy-prices line 1"},
	} {
		_, err := Parse([]byte(c.in))
		var fe *model.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || fe.Allowed == "" {
			t.Errorf("Parse(%q) = %v; want a field error on %q naming what is allowed", c.in, err, c.field)
		}
	}
}

func TestShift(t *testing.T) {
	s, err := ParseTable("00:00 40, 07:00 140, 22:00 60")
	if err != nil {
		t.Fatal(err)
	}
	sh := DefaultShift()
	if err := sh.Validate(); err != nil {
		t.Fatal(err)
	}
	day := at("2024-03-04T00:00:00Z")
	noon := day.Add(12 * time.Hour)
	// By default a job waits at most its walltime: a one-hour job at noon
	// cannot reach 22:00, a twelve-hour one can.
	if sh.Defer(s, noon, noon, time.Hour) || !sh.Defer(s, noon, noon, 12*time.Hour) {
		t.Error("MaxStretch 1: the one-hour job must run now, the twelve-hour one wait")
	}
	if sh.Delay(time.Hour) != time.Hour || sh.Delay(48*time.Hour) != 12*time.Hour {
		t.Errorf("Delay: %s, %s", sh.Delay(time.Hour), sh.Delay(48*time.Hour))
	}
	sh.MaxStretch = 0
	if !sh.Defer(s, noon, noon, time.Hour) {
		t.Error("a one-hour job at noon, eligible now, should wait for 22:00")
	}
	if sh.Defer(s, noon, noon.Add(-12*time.Hour), time.Hour) {
		t.Error("at its deadline a job never waits")
	}
	if sh.Defer(s, noon, noon.Add(-3*time.Hour), time.Hour) {
		t.Error("a deadline before the cheap hours: no wait")
	}
	if sh.Defer(s, day.Add(2*time.Hour), day.Add(2*time.Hour), time.Hour) {
		t.Error("in the cheapest hours nothing waits")
	}
	if (Shift{}).Defer(s, noon, noon, time.Hour) {
		t.Error("MaxDelay 0 is off")
	}
	if sh.Defer(Flat(7), noon, noon, time.Hour) {
		t.Error("a flat price never defers")
	}
	if !sh.Flexible(0, model.CheckpointNone) || sh.Flexible(5, model.CheckpointNone) || !sh.Flexible(9, model.CheckpointSignal) {
		t.Error("Flexible")
	}
	if ShiftsType(model.TypeInteractive) || !ShiftsType(model.TypeHPCBatch) {
		t.Error("ShiftsType")
	}
	for _, bad := range []Shift{{MaxDelay: -1, MinSaving: .1}, {MaxDelay: time.Hour}, {MaxDelay: time.Hour, MinSaving: .1, MaxClass: 11}} {
		if bad.Validate() == nil {
			t.Errorf("%+v validated", bad)
		}
	}
}

func BenchmarkDefer(b *testing.B) {
	var rows []string
	t0 := at("2024-01-01T00:00:00Z")
	for i := range 24 * 7 {
		rows = append(rows, t0.Add(time.Duration(i)*time.Hour).Format(time.RFC3339)+","+strings.Repeat("1", 1+i%3))
	}
	s, err := ParseCSV(strings.NewReader(strings.Join(rows, "\n")))
	if err != nil {
		b.Fatal(err)
	}
	sh := DefaultShift()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now := t0.Add(time.Duration(i%10000) * time.Minute)
		sh.Defer(s, now, now, 2*time.Hour)
	}
}
