package cli

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// fakeOffline writes a latticectl-offline that prints its arguments and
// exits with CODE.
func fakeOffline(t *testing.T, code int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), OfflineBinary)
	script := "#!/bin/sh\necho \"offline: $*\"\necho \"offline stderr\" >&2\nexit " + string(rune('0'+code)) + "\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOfflineCommandsRunInTheCompanion: latticectl does not link replay or
// the backup format; it checks their flags, then runs latticectl-offline
// with its own arguments unchanged and ends with its exit code, printing
// nothing of its own.
func TestOfflineCommandsRunInTheCompanion(t *testing.T) {
	if ReplayAction != nil || VerifyBackup != nil || RestoreBackup != nil {
		t.Fatal("the offline hooks are set in package cli's tests")
	}
	ok, failing := fakeOffline(t, 0), fakeOffline(t, 3)
	for _, tc := range []struct {
		args []string
	}{
		{[]string{"replay", "--policy", "easy,fcfs", "trace.swf"}},
		{[]string{"-o", "json", "replay", "trace.swf", "--first", "10"}},
		{[]string{"quorum", "verify", "backup.bin"}},
		{[]string{"quorum", "restore", "backup.bin", "--data-dir", "/var/lib/lattice"}},
	} {
		r := run(t, map[string]string{"LATTICECTL_OFFLINE": ok}, tc.args...)
		mustCode(t, r, 0)
		if want := "offline: " + strings.Join(tc.args, " ") + "\n"; r.stdout != want || r.stderr != "offline stderr\n" {
			t.Errorf("%v: stdout %q (want %q), stderr %q", tc.args, r.stdout, want, r.stderr)
		}
		r = run(t, map[string]string{"LATTICECTL_OFFLINE": failing}, tc.args...)
		mustCode(t, r, 3)
		if r.stderr != "offline stderr\n" {
			t.Errorf("%v: a failing companion: stderr %q, want only the companion's", tc.args, r.stderr)
		}
	}
	// Flags are checked here first, as before.
	r := run(t, map[string]string{"LATTICECTL_OFFLINE": ok}, "replay", "--first", "many", "trace.swf")
	mustCode(t, r, ExitUsage)
	if strings.Contains(r.stdout, "offline:") {
		t.Errorf("the companion ran with a bad flag: %q", r.stdout)
	}
	r = run(t, map[string]string{"LATTICECTL_OFFLINE": ok}, "quorum", "restore", "backup.bin")
	mustCode(t, r, ExitUsage)
	// Help needs no companion.
	r = run(t, map[string]string{"LATTICECTL_OFFLINE": "/nonexistent"}, "replay", "--help")
	mustCode(t, r, 0)
	for _, want := range []string{"latticectl replay", "--sweep-tolerance", "--energy-prices", "--policy value"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("replay --help lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestOfflineCompanionMissing: a clear error naming the companion and how
// to get it, exit 1.
func TestOfflineCompanionMissing(t *testing.T) {
	r := run(t, map[string]string{"LATTICECTL_OFFLINE": filepath.Join(t.TempDir(), "gone")}, "replay", "trace.swf")
	mustCode(t, r, ExitError)
	if !strings.HasPrefix(r.stderr, "latticectl: latticectl replay runs in latticectl-offline: LATTICECTL_OFFLINE=") ||
		!strings.Contains(r.stderr, "not an executable file") {
		t.Errorf("stderr %q", r.stderr)
	}
	t.Setenv("PATH", t.TempDir())
	r = run(t, nil, "replay", "trace.swf")
	mustCode(t, r, ExitError)
	for _, want := range []string{"latticectl-offline is neither in ", "nor on PATH", "go build -o bin/ ./cmd/...", "LATTICECTL_OFFLINE"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q: %q", want, r.stderr)
		}
	}
}

// TestStartupDoesOnlyWhatTheRunNeeds: a run prepares the command it names
// (global flags accepted after it, as before) and not the others, and
// looks the OS user name up only when no tenant is given.
func TestStartupDoesOnlyWhatTheRunNeeds(t *testing.T) {
	r := &runner{Env: OSEnv()}
	app := r.app()
	args := r.reorder(app.Flags, app.Commands, []string{"quorum", "status", "-o", "json", "--server", "x:1"})
	if r.ran == nil || r.ran.Name != "quorum" {
		t.Fatalf("ran %v, args %q", r.ran, args)
	}
	for _, c := range app.Commands {
		hidden := hasFlag(c.Flags, []string{"server"})
		if c.Name == "quorum" && (!hidden || !hasFlag(c.Subcommands[0].Flags, []string{"output"})) {
			t.Errorf("quorum and its subcommands lack the global flags")
		}
		if c.Name != "quorum" && hidden {
			t.Errorf("%s was prepared too", c.Name)
		}
	}
	for _, c := range App().Commands {
		if !hasFlag(c.Flags, []string{"server"}) {
			t.Errorf("App(): %s not prepared", c.Name)
		}
	}

	env := Env{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string {
		if k == "LATTICE_TENANT" {
			return "team"
		}
		return ""
	}}
	r = &runner{Env: env}
	app = r.app()
	var got []string
	for _, a := range [][]string{{"--tenant", "x"}, nil} {
		set := flag.NewFlagSet("t", flag.ContinueOnError)
		set.String("tenant", "", "")
		_ = set.Parse(a)
		ctx := cli.NewContext(app, set, nil)
		ctx.Command = &cli.Command{Name: "submit", Flags: []cli.Flag{&cli.StringFlag{Name: "tenant"}}}
		got = append(got, r.tenant(ctx))
	}
	if got[0] != "x" || got[1] != "team" {
		t.Errorf("tenants %q", got)
	}
}

// TestFastFlagsPrintAsTheirFlags: the wrapped flags (cheap Names) print in
// help as the flags they wrap, and boolean ones still take no value.
func TestFastFlagsPrintAsTheirFlags(t *testing.T) {
	mk := func() []cli.Flag {
		return []cli.Flag{
			&cli.BoolFlag{Name: "parsable", Usage: "ids only"},
			&cli.BoolFlag{Name: "hold", Aliases: []string{"H"}, Usage: "held", DisableDefaultText: true},
			&cli.StringFlag{Name: "name", Aliases: []string{"J"}, Value: "x", Usage: "a name"},
			&cli.BoolFlag{Name: "secret", Hidden: true},
		}
	}
	plain, fast := mk(), mk()
	fastNames(fast)
	if _, ok := fast[3].(*cli.BoolFlag); !ok {
		t.Errorf("a hidden boolean flag was wrapped (urfave/cli's completion would offer it)")
	}
	for i := range plain {
		if got, want := cli.FlagStringer(fast[i]), cli.FlagStringer(plain[i]); got != want {
			t.Errorf("flag %d prints %q, want %q", i, got, want)
		}
		if got, want := flagNames(fast[i]), plain[i].Names(); !slices.Equal(got, want) {
			t.Errorf("flag %d: names %q, want %q", i, got, want)
		}
		if got, want := flagTakesValue(fast[i]), flagTakesValue(plain[i]); got != want {
			t.Errorf("flag %d: takes a value %v, want %v", i, got, want)
		}
	}
	if flagTakesValue(fast[0]) || !flagTakesValue(fast[2]) {
		t.Errorf("--parsable takes no value, --name takes one")
	}
	if d := fast[1].(cli.DocGenerationFlag).GetDefaultText(); d != "" {
		t.Errorf("DisableDefaultText: default text %q", d)
	}
}
