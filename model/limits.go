package model

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Bounds on one request, checked by CheckLimits at the API edge (the
// server before proposing, latticectl before sending) so that no
// submission can make the replicated state, a snapshot or an answer
// unreasonably large. They are deliberately not part of Validate, which the
// FSM runs: a new limit must not change how an old log replays. Each error
// names the limit and the size, never echoes the content.
const (
	MaxCommandBytes   = 64 << 10  // all command arguments together
	MaxCommandArgs    = 4096      // command arguments
	MaxEnvBytes       = 256 << 10 // all KEY=VALUE entries together
	MaxEnvEntries     = 4096
	MaxPathBytes      = 4096 // work dir, output files
	MaxProjectBytes   = 200
	MaxConstraints    = 64
	MaxDependencies   = 1000 // entries of --depends-on (ids, counting array ids once)
	MaxGPUsPerNode    = 64
	MaxGPUTypeBytes   = 100
	MaxFeatureBytes   = 100
	MaxWalltimeSecond = int64(MaxWalltime / 1e9) // MaxWalltime in seconds, for checks before any conversion
)

func sizeErr(field string, n int, unit string, limit int) error {
	return fieldErr(field, fmt.Sprintf("%d %s", n, unit), fmt.Sprintf("at most %d %s", limit, unit))
}

// CheckLimits applies the bounds above.
func (r *Request) CheckLimits() error {
	if len(r.Command) > MaxCommandArgs {
		return sizeErr("command", len(r.Command), "arguments", MaxCommandArgs)
	}
	total := 0
	for _, a := range r.Command {
		total += len(a)
	}
	if total > MaxCommandBytes {
		return sizeErr("command", total, "bytes", MaxCommandBytes)
	}
	if len(r.Env) > MaxEnvEntries {
		return sizeErr("env", len(r.Env), "entries", MaxEnvEntries)
	}
	total = 0
	for _, e := range r.Env {
		total += len(e)
	}
	if total > MaxEnvBytes {
		return sizeErr("env", total, "bytes", MaxEnvBytes)
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{{"work-dir", r.WorkDir, MaxPathBytes}, {"stdout", r.Stdout, MaxPathBytes}, {"stderr", r.Stderr, MaxPathBytes},
		{"project", r.Project, MaxProjectBytes}, {"gpu-type", r.GPUType, MaxGPUTypeBytes}} {
		if len(f.v) > f.max {
			return sizeErr(f.name, len(f.v), "bytes", f.max)
		}
	}
	if len(r.Constraints) > MaxConstraints {
		return sizeErr("constraint", len(r.Constraints), "features", MaxConstraints)
	}
	for _, c := range r.Constraints {
		if len(c) > MaxFeatureBytes {
			return sizeErr("constraint", len(c), "bytes", MaxFeatureBytes)
		}
	}
	n := 0
	for _, d := range r.DependsOn {
		n += max(len(d.IDs), 1)
	}
	if n > MaxDependencies {
		return sizeErr("depends-on", n, "dependencies", MaxDependencies)
	}
	if r.GPUsPerNode > MaxGPUsPerNode {
		return fieldErr("gpus-per-node", itoa(r.GPUsPerNode), fmt.Sprintf("a count of at most %d", MaxGPUsPerNode))
	}
	return CheckScript(r.ScriptContent())
}

// SetScript stores a batch script given as bytes: Script holds it as text
// (bytes that are not UTF-8 as '?') and ScriptBytes the exact bytes when
// they differ, so JSON (Raft commands, snapshots) and the API's UTF-8
// strings carry it unchanged.
func (r *Request) SetScript(b string) {
	r.Script, r.ScriptBytes = ScriptWire(b)
}

// ScriptContent is the batch script byte for byte (what the agent runs).
func (r *Request) ScriptContent() string {
	if len(r.ScriptBytes) > 0 {
		return string(r.ScriptBytes)
	}
	return r.Script
}

// ScriptWire splits a script for UTF-8-only carriers: its text, with every
// byte that is not UTF-8 replaced by '?', and its exact bytes when they
// differ from the text (nil otherwise). The text is as long as the bytes,
// so the two together stay within twice the script limit.
func ScriptWire(b string) (text string, raw []byte) {
	if utf8.ValidString(b) {
		return b, nil
	}
	var t strings.Builder
	t.Grow(len(b))
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRuneInString(b[i:])
		if r == utf8.RuneError && n == 1 {
			t.WriteByte('?')
		} else {
			t.WriteString(b[i : i+n])
		}
		i += n
	}
	return t.String(), []byte(b)
}

// CheckScript refuses what sbatch refuses: DOS line breaks, naming the
// first line that has one. Other bytes are the script's own business, as
// for sbatch: a Latin-1 comment (or any byte that is not UTF-8) is accepted
// and kept as bytes (SetScript).
func CheckScript(s string) error {
	if s == "" {
		return nil
	}
	if len(s) > MaxScriptBytes {
		return sizeErr("script", len(s), "bytes", MaxScriptBytes)
	}
	b := []byte(s)
	if i := bytes.Index(b, []byte("\r\n")); i >= 0 {
		line := bytes.Count(b[:i], []byte("\n")) + 1
		return fieldErr("script", fmt.Sprintf("DOS line breaks (CRLF), the first on line %d", line),
			"UNIX line breaks (\\n) only: sbatch too refuses a script that \"contains DOS line breaks (\\r\\n) instead of expected UNIX line breaks (\\n)\"; convert it with dos2unix")
	}
	return nil
}
