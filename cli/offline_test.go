package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
