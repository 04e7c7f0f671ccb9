package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// Every command, run against an address nothing answers on, ends with one
// line on stderr that says what happened: never a Go stack trace, a panic
// or a raw gRPC error ("rpc error: code = ..."). The walk covers the whole
// command tree, so commands added later are checked too.
func TestEveryCommandWithADeadServer(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "job.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n#SBATCH -N 1\ntrue\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dagFile := filepath.Join(dir, "dag.yaml")
	if err := os.WriteFile(dagFile, []byte("name: d\nallocations:\n  - name: a\n    command: [\"true\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Arguments a command needs to get as far as calling the server.
	positional := func(usage string) []string {
		var out []string
		for _, w := range strings.Fields(usage) {
			switch strings.Trim(w, "[].") {
			case "ID", "ID|NAME":
				out = append(out, "12")
			case "NODE":
				out = append(out, "n001")
			case "NAME":
				out = append(out, "hpc-batch")
			case "RAFT_ADDR":
				out = append(out, "127.0.0.1:1")
			case "SCRIPT":
				out = append(out, script)
			case "FILE":
				out = append(out, dagFile)
			case "SIG":
				out = append(out, "USR1")
			}
			if strings.HasPrefix(w, "-") || w == "|" {
				break
			}
		}
		return out
	}
	extra := map[string][]string{
		"latticectl nodes drain":    {"--reason", "x"},
		"latticectl power set":      {"--budget-kw", "10"},
		"latticectl vcluster set":   {"--cycle", "5s"},
		"latticectl tenant set":     {"--max-nodes", "4"},
		"latticectl run":            {"--", "true"},
		"latticectl quorum restore": {"--data-dir", dir},
		"latticectl completion":     {"bash"},
	}
	dead := servers(deadAddr(t))
	var walk func(path []string, c *cli.Command)
	walk = func(path []string, c *cli.Command) {
		path = append(path, c.Name)
		name := "latticectl " + strings.Join(path, " ")
		if c.Action != nil || len(c.Subcommands) == 0 {
			t.Run(strings.Join(path, "_"), func(t *testing.T) {
				args := append(append(append([]string(nil), path...), positional(c.ArgsUsage)...), extra[name]...)
				r := run(t, dead, args...)
				for _, bad := range []string{"rpc error", "goroutine ", "panic", ".go:", "code = ", "desc = "} {
					if strings.Contains(r.stderr, bad) || strings.Contains(r.stdout, bad) {
						t.Errorf("%s: output contains %q:\nstdout: %s\nstderr: %s", strings.Join(args, " "), bad, r.stdout, r.stderr)
					}
				}
				switch r.code {
				case ExitOK, ExitError, ExitUsage, ExitNotFound, ExitUnavailable:
				default:
					t.Errorf("%s: exit %d", strings.Join(args, " "), r.code)
				}
				if r.code == ExitUnavailable && !strings.Contains(r.stderr, "no Lattice server answered") {
					t.Errorf("%s: exit 75 without saying why: %q", strings.Join(args, " "), r.stderr)
				}
				if r.code != ExitOK && strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 && !strings.Contains(r.stderr, "cancel") {
					t.Errorf("%s: more than one line of error:\n%s", strings.Join(args, " "), r.stderr)
				}
			})
		}
		for _, s := range c.Subcommands {
			walk(path, s)
		}
	}
	for _, c := range App().Commands {
		if c.Name == "help" || c.Name == "replay" {
			continue // replay is offline (its own tests)
		}
		walk(nil, c)
	}
}

// A bug that panics prints one line and exits 1, not a stack trace.
func TestPanicIsOneLine(t *testing.T) {
	var stdout, stderr strings.Builder
	env := Env{Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" },
		Getwd: func() (string, error) { panic("boom") }}
	code := Main(t.Context(), env, []string{"submit", "--dry-run", "--", "true"})
	if code != ExitError || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), "internal error: boom") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}
