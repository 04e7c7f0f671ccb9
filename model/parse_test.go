package model

import (
	"strings"
	"testing"
	"time"
)

func TestParseWalltime(t *testing.T) {
	cases := []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{"30", 30 * time.Minute, false},
		{"30:15", 30*time.Minute + 15*time.Second, false},
		{"1:30:00", 90 * time.Minute, false},
		{"2-12", 60 * time.Hour, false},
		{"2-12:30", 60*time.Hour + 30*time.Minute, false},
		{"1-00:00:10", 24*time.Hour + 10*time.Second, false},
		{"90m", 90 * time.Minute, false},
		{"1h30m", 90 * time.Minute, false},
		{"5m", 5 * time.Minute, false},
		{"abc", 0, true},
		{"", 0, true},
		{"0", 0, true},
		{"-5", 0, true},
		{"1:2:3:4", 0, true},
		{"366-00", 0, true},
		{"1d", 0, true},
		{"-1h", 0, true},
	}
	for _, tc := range cases {
		got, err := ParseWalltime(tc.in)
		if tc.err {
			if err == nil || !strings.Contains(err.Error(), "walltime") || !IsFieldError(err) {
				t.Errorf("ParseWalltime(%q) = %v, %v; want a walltime field error", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseWalltime(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestFormatWalltime(t *testing.T) {
	for in, want := range map[time.Duration]string{
		90 * time.Second:              "00:01:30",
		25*time.Hour + 61*time.Second: "1-01:01:01",
		0:                             "00:00:00",
	} {
		if got := FormatWalltime(in); got != want {
			t.Errorf("FormatWalltime(%v) = %s, want %s", in, got, want)
		}
	}
}

func TestParseNodeRange(t *testing.T) {
	cases := []struct {
		in       string
		min, max int
		err      bool
	}{
		{"4", 4, 4, false}, {"2-8", 2, 8, false}, {"0", 0, 0, true}, {"8-2", 0, 0, true}, {"x", 0, 0, true}, {"-3", 0, 0, true}, {"", 0, 0, true},
	}
	for _, tc := range cases {
		lo, hi, err := ParseNodeRange(tc.in)
		if (err != nil) != tc.err || lo != tc.min || hi != tc.max {
			t.Errorf("ParseNodeRange(%q) = %d, %d, %v", tc.in, lo, hi, err)
		}
		if err != nil && !strings.Contains(err.Error(), "nodes") {
			t.Errorf("error %q does not name the field", err)
		}
	}
}

func TestParseArraySpec(t *testing.T) {
	cases := []struct {
		in   string
		want ArraySpec
		err  bool
	}{
		{"0-99", ArraySpec{0, 99, 1, 0}, false},
		{"1-9:2%3", ArraySpec{1, 9, 2, 3}, false},
		{"5", ArraySpec{5, 5, 1, 0}, false},
		{"9-1", ArraySpec{}, true},
		{"0-9:0", ArraySpec{}, true},
		{"0-9%0", ArraySpec{}, true},
		{"0-200000", ArraySpec{}, true},
		{"a-b", ArraySpec{}, true},
	}
	for _, tc := range cases {
		got, err := ParseArraySpec(tc.in)
		if tc.err {
			if err == nil {
				t.Errorf("ParseArraySpec(%q) accepted", tc.in)
			}
			continue
		}
		if err != nil || *got != tc.want {
			t.Errorf("ParseArraySpec(%q) = %+v, %v", tc.in, got, err)
		}
	}
	if got := (ArraySpec{1, 9, 2, 0}).Indexes(); len(got) != 5 || got[4] != 9 {
		t.Errorf("Indexes = %v", got)
	}
}

func TestParseConstraint(t *testing.T) {
	got, err := ParseConstraint("ib&a100&ib")
	if err != nil || strings.Join(got, ",") != "a100,ib" {
		t.Fatalf("ParseConstraint = %v, %v", got, err)
	}
	if _, err := ParseConstraint("a|b"); err == nil {
		t.Fatal("OR constraint accepted")
	}
}

func TestCompressHostlist(t *testing.T) {
	cases := map[string]string{
		"node001,node002,node003":     "node[001-003]",
		"node001,node003,node004":     "node[001,003-004]",
		"a1":                          "a1",
		"gpu01,gpu02,cpu07,login":     "gpu[01-02],cpu07,login",
		"n9,n10":                      "n[9-10]",
		"":                            "",
		"x-1,x-2,x-3,x-5,x-6,y":       "x-[1-3,5-6],y",
		"nid00001,nid00002,nid00010":  "nid[00001-00002,00010]",
		"node002,node001":             "node[001-002]",
		"n001,n002,n003,n007":         "n[001-003,007]",
		"gpu-10,gpu-9,gpu-11,cpu-1":   "gpu-[9-11],cpu-1",
		"login,n01,n02":               "n[01-02],login",
		"rack1-node01,rack1-node02,z": "rack1-node[01-02],z",
	}
	for in, want := range cases {
		var names []string
		if in != "" {
			names = strings.Split(in, ",")
		}
		if got := CompressHostlist(names); got != want {
			t.Errorf("CompressHostlist(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestRequestValidateNamesTheField(t *testing.T) {
	base := func() Request {
		return Request{Command: []string{"x"}, NodesMin: 1, NodesMax: 1, Walltime: time.Hour, Checkpoint: CheckpointNone}
	}
	cases := []struct {
		field string
		mod   func(r *Request)
	}{
		{"nodes", func(r *Request) { r.NodesMin = 0 }},
		{"nodes", func(r *Request) { r.NodesMax = 0 }},
		{"walltime", func(r *Request) { r.Walltime = 0 }},
		{"priority-class", func(r *Request) { r.PriorityClass = 11 }},
		{"checkpoint", func(r *Request) { r.Checkpoint = "sometimes" }},
		{"entrypoint", func(r *Request) { r.Command = nil }},
		{"entrypoint", func(r *Request) { r.Script = "echo" }},
		{"tenant", func(r *Request) { r.Tenant = "a b" }},
		{"array", func(r *Request) { r.Array = &ArraySpec{Start: 3, End: 1, Step: 1} }},
		{"env", func(r *Request) { r.Env = []string{"NOEQUALS"} }},
	}
	for _, tc := range cases {
		r := base()
		tc.mod(&r)
		err := r.Validate()
		if err == nil || !IsFieldError(err) || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), "allowed") {
			t.Errorf("%s: Validate() = %v", tc.field, err)
		}
	}
	r := base()
	if err := r.Validate(); err != nil {
		t.Errorf("valid request: %v", err)
	}
}
