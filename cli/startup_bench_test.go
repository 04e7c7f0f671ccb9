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
