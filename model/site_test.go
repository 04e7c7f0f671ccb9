package model

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseBeginTime(t *testing.T) {
	now := time.Date(2026, 11, 23, 14, 30, 0, 0, time.UTC)
	day := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Time
	}{
		{"now", now},
		{"now+5", now.Add(5 * time.Second)}, // Slurm: seconds by default
		{"now+5s", now.Add(5 * time.Second)},
		{"now+5seconds", now.Add(5 * time.Second)},
		{"NOW + 5", now.Add(5 * time.Second)},
		{"now+1hour", now.Add(time.Hour)},
		{"now+2minutes", now.Add(2 * time.Minute)},
		{"now+1day", now.Add(24 * time.Hour)},
		{"now+1week", now.Add(7 * 24 * time.Hour)},
		{"16:00", day.Add(16 * time.Hour)},
		{"16:00:30", day.Add(16*time.Hour + 30*time.Second)},
		{"10:00", day.Add(24*time.Hour + 10*time.Hour)}, // already past: tomorrow
		{"4:00pm", day.Add(16 * time.Hour)},
		{"12:00am", day.Add(24 * time.Hour)},
		{"teatime", day.Add(16 * time.Hour)},
		{"noon", day.Add(24*time.Hour + 12*time.Hour)},
		{"midnight", day.Add(24 * time.Hour)},
		{"today", day},
		{"tomorrow", day.Add(24 * time.Hour)},
		{"2026-12-01", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
		{"2026-12-01T10:00", time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)},
		{"2026-12-01T10:00:05", time.Date(2026, 12, 1, 10, 0, 5, 0, time.UTC)},
		{"12/01", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
		{"01/15", time.Date(2027, 1, 15, 0, 0, 0, 0, time.UTC)}, // past this year: next year
		{"12/01/27", time.Date(2027, 12, 1, 0, 0, 0, 0, time.UTC)},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseBeginTime(tc.in, now)
			if err != nil || !got.Equal(tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	for _, bad := range []string{"", "bogus", "now-5", "now+", "now+5fortnights", "25:00", "13:00pm", "1:2:3:4", "2026-13-01", "now+99999999999"} {
		if _, err := ParseBeginTime(bad, now); err == nil || !strings.Contains(err.Error(), "invalid begin") {
			t.Errorf("%q: %v, want an invalid begin error", bad, err)
		}
	}
}

func TestExpandHostlist(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"node003", []string{"node003"}},
		{"node00[3-4]", []string{"node003", "node004"}},
		{"n[001-003,007],gpu1", []string{"gpu1", "n001", "n002", "n003", "n007"}},
		{"n[8-11]", []string{"n10", "n11", "n8", "n9"}},
		{"r[1-2]n[1-2]", []string{"r1n1", "r1n2", "r2n1", "r2n2"}},
		{"a,a , b", []string{"a", "b"}},
	}
	for _, tc := range tests {
		got, err := ExpandHostlist(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %v %v, want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "n[3-", "n[4-2]", "n[]", "a,,b", "bad name", "n[1-200000]", "n[x]", "n[0-99999][0-99999]"} {
		if _, err := ExpandHostlist(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	// Round trip with CompressHostlist.
	names, _ := ExpandHostlist("node[001-004,007]")
	if got := CompressHostlist(names); got != "node[001-004,007]" {
		t.Errorf("round trip: %s", got)
	}
}

func TestQOSAndRequestChecks(t *testing.T) {
	q := QOS{Name: "debug", PriorityClass: 8, MaxWalltime: 30 * time.Minute, MaxNodes: 8}
	if err := q.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, r := range []Request{{NodesMin: 9, Walltime: time.Minute}, {NodesMin: 1, Walltime: time.Hour}} {
		if err := q.CheckRequest(&r); err == nil {
			t.Errorf("%+v fits qos debug", r)
		}
	}
	for _, bad := range []QOS{{Name: "x y"}, {Name: "x", PriorityClass: 11}, {Name: "x", MaxNodes: -1}, {Name: "x", MaxWalltime: -1}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v valid", bad)
		}
	}
	if mt, err := ParseMailType("end,fail"); err != nil || mt != "END,FAIL" {
		t.Errorf("mail type: %q %v", mt, err)
	}
	if _, err := ParseMailType("SOMETIMES"); err == nil {
		t.Error("mail type SOMETIMES accepted")
	}
	a := Allocation{Request: Request{BeginTime: time.Unix(100, 0)}}
	if a.Waiting(time.Unix(99, 0)) != ReasonBeginTime || a.Waiting(time.Unix(100, 0)) != "" {
		t.Error("begin time")
	}
	a.Held = HoldAdmin
	if a.Waiting(time.Unix(200, 0)) != ReasonJobHeldAdmin {
		t.Error("admin hold")
	}
	r := Request{NodeList: []string{"a", "b"}, ExcludeNodes: []string{"b"}}
	if !r.NodeAllowed("a") || r.NodeAllowed("b") || r.NodeAllowed("c") {
		t.Error("NodeAllowed")
	}
}
