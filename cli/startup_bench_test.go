package cli

import (
	"context"
	"io"
	"testing"
)

// BenchmarkMainVersion is the work of a `latticectl --version` run after
// the process started: building the command tree and parsing. Every
// latticectl run (one per sbatch-style submission in users' loops) pays it.
func BenchmarkMainVersion(b *testing.B) {
	env := OSEnv()
	env.Stdout, env.Stderr = io.Discard, io.Discard
	b.ReportAllocs()
	for b.Loop() {
		if code := Main(context.Background(), env, []string{"--version"}); code != 0 {
			b.Fatalf("exit %d", code)
		}
	}
}

// BenchmarkMainSubmit is a whole `latticectl submit --parsable -N 1 -t 1
// -- true` after the process started: the command tree, parsing, the
// connection and the Submit call, against an in-process fake server.
func BenchmarkMainSubmit(b *testing.B) {
	f := newFakeServer(b)
	env := OSEnv()
	env.Stdout, env.Stderr = io.Discard, io.Discard
	env.Getenv = func(k string) string {
		switch k {
		case "LATTICE_SERVER":
			return f.addr
		case "LATTICE_TENANT":
			return "default"
		}
		return ""
	}
	b.ReportAllocs()
	for b.Loop() {
		if code := Main(context.Background(), env, []string{"submit", "--parsable", "-N", "1", "-t", "1", "--", "true"}); code != 0 {
			b.Fatalf("exit %d", code)
		}
	}
}
