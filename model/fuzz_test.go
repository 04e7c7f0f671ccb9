package model

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// Fuzz targets for the parsers of user input (run briefly by `go test`
// with their seeds; `go test -fuzz FuzzX -fuzztime 30s ./model` explores).

func FuzzParseWalltime(f *testing.F) {
	for _, s := range []string{"30", "1:30", "1:00:00", "2-12", "2-12:30:15", "90m", "1h30m", "306600000-0", "9223372036854775807", "-1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseWalltime(s)
		if err == nil && (d <= 0 || d > MaxWalltime) {
			t.Fatalf("ParseWalltime(%q) = %v: outside (0, %v]", s, d, MaxWalltime)
		}
	})
}

func FuzzParseArraySpec(f *testing.F) {
	for _, s := range []string{"0-99", "0-99:3%10", "1,3,5", "5", "0-9223372036854775807", "%", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseArraySpec(s)
		if err == nil && a != nil && (a.Start < 0 || a.End < a.Start) {
			t.Fatalf("ParseArraySpec(%q) = %+v", s, a)
		}
	})
}

func FuzzParseNodeRange(f *testing.F) {
	for _, s := range []string{"1", "2-8", "0", "8-2", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		lo, hi, err := ParseNodeRange(s)
		if err == nil && (lo < 1 || hi < lo) {
			t.Fatalf("ParseNodeRange(%q) = %d, %d", s, lo, hi)
		}
	})
}

func FuzzCheckScript(f *testing.F) {
	for _, s := range []string{"#!/bin/sh\necho hi\n", "#!/bin/sh\r\n", "# caf\xe9\necho\n", "echo \xff\n", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := CheckScript(s)
		if err == nil && strings.Contains(s, "\r\n") {
			t.Fatalf("CheckScript accepted a CRLF script %q", s)
		}
		if err != nil && len(err.Error()) > 300 {
			t.Fatalf("the error echoes the script: %d bytes", len(err.Error()))
		}
		var r Request
		r.SetScript(s)
		if !utf8.ValidString(r.Script) || r.ScriptContent() != s || (utf8.ValidString(s) && r.Script != s) {
			t.Fatalf("SetScript(%q): Script %q, content %q", s, r.Script, r.ScriptContent())
		}
	})
}

func FuzzRequestLimits(f *testing.F) {
	f.Add("true", "K=V", "/tmp", "f", 1, int64(3600))
	f.Fuzz(func(t *testing.T, cmd, env, dir, constraint string, nodes int, wall int64) {
		r := Request{Command: []string{cmd}, Env: []string{env}, WorkDir: dir, Constraints: []string{constraint},
			NodesMin: nodes, NodesMax: nodes, Walltime: time.Duration(wall) * time.Second}
		r.ApplyDefaults()
		if err := r.CheckLimits(); err != nil && len(err.Error()) > 300 {
			t.Fatalf("the error echoes the input: %d bytes", len(err.Error()))
		}
		_ = r.Validate()
	})
}

func FuzzParseBeginTime(f *testing.F) {
	for _, s := range []string{"now+5", "now+1hour", "16:00", "4:00pm", "teatime", "2026-12-01T10:00", "12/01/27", "now+99999999999", ""} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 23, 14, 30, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseBeginTime(s, now)
		if err == nil && b.Before(now.AddDate(-200, 0, 0)) {
			t.Fatalf("ParseBeginTime(%q) = %v", s, b)
		}
	})
}

func FuzzExpandHostlist(f *testing.F) {
	for _, s := range []string{"node00[3-4]", "n[001-003,007],gpu1", "r[1-2]n[1-2]", "n[3-", "n[0-99999]", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		names, err := ExpandHostlist(s)
		if err != nil {
			return
		}
		if len(names) == 0 || len(names) > MaxHostlistNodes {
			t.Fatalf("ExpandHostlist(%q): %d names", s, len(names))
		}
		for _, n := range names {
			if !IsName(n) {
				t.Fatalf("ExpandHostlist(%q) gave %q", s, n)
			}
		}
	})
}
