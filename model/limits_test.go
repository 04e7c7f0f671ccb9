package model

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestCheckScript(t *testing.T) {
	cases := []struct {
		name, script, want string // want: "" = accepted, else part of the error
	}{
		{"plain", "#!/bin/sh\necho hi\n", ""},
		{"latin-1 comment", "#!/bin/sh\n# caf\xe9 cr\xe8me\necho hi\n", ""},
		{"latin-1 indented comment", "#!/bin/sh\n  # \xe9t\xe9\necho hi\n", ""},
		{"latin-1 in a command", "#!/bin/sh\necho caf\xe9\n", ""}, // bytes, as sbatch takes them
		{"crlf", "#!/bin/sh\r\necho hi\r\n", "DOS line breaks (CRLF), the first on line 1"},
		{"crlf later", "#!/bin/sh\necho hi\r\n", "on line 2"},
		{"lone cr is fine", "#!/bin/sh\necho 'a\rb'\n", ""},
		{"10 MiB", "#!/bin/sh\n" + strings.Repeat("#", 10<<20), "at most 1048576 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckScript(c.script)
			if c.want == "" {
				if err != nil {
					t.Fatalf("CheckScript = %v, want accepted", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("CheckScript = %v, want an error containing %q", err, c.want)
			}
			if len(err.Error()) > 300 {
				t.Fatalf("the error echoes the input (%d bytes)", len(err.Error()))
			}
		})
	}
}

// TestScriptKeptAsBytes: a script that is not UTF-8 is stored as text for
// UTF-8-only carriers plus its exact bytes, and survives a JSON round trip
// (Raft commands and snapshots are JSON) byte for byte.
func TestScriptKeptAsBytes(t *testing.T) {
	for _, script := range []string{"#!/bin/sh\n# caf\xe9\necho ok\n", "#!/bin/sh\necho plain\n", "\xff\xfe"} {
		var r Request
		r.SetScript(script)
		if r.ScriptContent() != script || !utf8.ValidString(r.Script) {
			t.Fatalf("SetScript(%q): Script %q, content %q", script, r.Script, r.ScriptContent())
		}
		if utf8.ValidString(script) != (r.ScriptBytes == nil) {
			t.Fatalf("SetScript(%q): ScriptBytes %q, want them only for non-UTF-8 scripts", script, r.ScriptBytes)
		}
		b, err := json.Marshal(&r)
		if err != nil {
			t.Fatal(err)
		}
		var back Request
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back.ScriptContent() != script {
			t.Fatalf("after JSON: %q, want %q", back.ScriptContent(), script)
		}
	}
	if text, _ := ScriptWire("# caf\xe9\xe8\n\xff"); text != "# caf??\n?" {
		t.Fatalf("ScriptWire text = %q", text)
	}
}

func TestCheckLimits(t *testing.T) {
	ok := func() Request {
		return Request{Command: []string{"true"}, NodesMin: 1, NodesMax: 1, Walltime: time.Hour}
	}
	many := func(n int, s string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = s
		}
		return out
	}
	cases := []struct {
		name  string
		tweak func(*Request)
		want  string
	}{
		{"fine", func(*Request) {}, ""},
		{"huge command", func(r *Request) { r.Command = []string{strings.Repeat("x", MaxCommandBytes+1)} }, `command "65537 bytes": allowed at most 65536 bytes`},
		{"too many args", func(r *Request) { r.Command = many(MaxCommandArgs+1, "x") }, "at most 4096 arguments"},
		{"huge env", func(r *Request) { r.Env = []string{"K=" + strings.Repeat("v", MaxEnvBytes)} }, "at most 262144 bytes"},
		{"too many env", func(r *Request) { r.Env = many(MaxEnvEntries+1, "K=v") }, "at most 4096 entries"},
		{"long work dir", func(r *Request) { r.WorkDir = "/" + strings.Repeat("d", MaxPathBytes) }, "work-dir"},
		{"too many constraints", func(r *Request) { r.Constraints = many(MaxConstraints+1, "f") }, "at most 64 features"},
		{"too many dependencies", func(r *Request) {
			ids := make([]uint64, MaxDependencies+1)
			r.DependsOn = []Dependency{{Condition: "afterok", IDs: ids}}
		}, "at most 1000 dependencies"},
		{"too many GPUs", func(r *Request) { r.GPUsPerNode = 65 }, "gpus-per-node"},
		{"crlf script", func(r *Request) { r.Command, r.Script = nil, "#!/bin/sh\r\n" }, "dos2unix"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := ok()
			c.tweak(&r)
			err := r.CheckLimits()
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var fe *FieldError
			if err == nil || !errors.As(err, &fe) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("CheckLimits = %v, want a field error containing %q", err, c.want)
			}
			if len(err.Error()) > 300 {
				t.Fatalf("the error echoes the input (%d bytes)", len(err.Error()))
			}
		})
	}
}
