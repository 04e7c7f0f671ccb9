package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestOfflineToolsThroughTheBinaries builds latticectl and
// latticectl-offline as `go build -o bin/ ./cmd/...` does and runs the
// offline commands through latticectl, as users type them.
func TestOfflineToolsThroughTheBinaries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two binaries")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	bin := t.TempDir()
	if out, err := exec.Command(gobin, "build", "-o", bin+"/", ".", "../latticectl-offline").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctl := filepath.Join(bin, "latticectl")
	trace := filepath.Join(t.TempDir(), "tiny.swf")
	if err := os.WriteFile(trace, []byte("; MaxProcs: 4\n"+
		"1 0 -1 10 2 -1 -1 2 10 -1 1 1 -1 -1 -1 -1 -1 -1\n"+
		"2 1 -1 10 3 -1 -1 3 10 -1 1 2 -1 -1 -1 -1 -1 -1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Env = append(os.Environ(), "PATH="+t.TempDir(), "LATTICECTL_OFFLINE=")
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errOut.String(), code
	}

	out, errOut, code := run(ctl, "-o", "json", "replay", "--policy", "easy", trace)
	var m struct {
		Policy string `json:"policy"`
		Jobs   int    `json:"jobs"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &m) != nil || m.Policy != "easy" || m.Jobs != 2 {
		t.Fatalf("replay: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if !strings.HasPrefix(errOut, "replay tiny.swf: 2 jobs on 4 nodes") {
		t.Errorf("replay's stderr %q", errOut)
	}
	// Errors are the companion's, once, with its exit code.
	_, errOut, code = run(ctl, "replay", "--policy", "sjf", trace)
	if code != 2 || strings.Count(errOut, "latticectl:") != 1 || !strings.Contains(errOut, "sjf") {
		t.Errorf("replay --policy sjf: exit %d, stderr %q", code, errOut)
	}
	garbage := filepath.Join(t.TempDir(), "backup")
	if err := os.WriteFile(garbage, []byte("not a backup"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = run(ctl, "quorum", "verify", garbage)
	if code != 1 || !strings.HasPrefix(errOut, "latticectl: ") || strings.Contains(errOut, "runs in") {
		t.Errorf("quorum verify of garbage: exit %d, stderr %q", code, errOut)
	}
	// Through a symbolic link to latticectl in another directory.
	link := filepath.Join(t.TempDir(), "latticectl")
	if err := os.Symlink(ctl, link); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code = run(link, "replay", "--policy", "fcfs", trace); code != 0 {
		t.Errorf("replay through a link: exit %d, stderr %q", code, errOut)
	}
	// Without the companion: a clear error, exit 1.
	if err := os.Remove(filepath.Join(bin, "latticectl-offline")); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = run(ctl, "replay", trace)
	if code != 1 || !strings.Contains(errOut, "latticectl replay runs in latticectl-offline: latticectl-offline is neither in "+bin) {
		t.Errorf("without latticectl-offline: exit %d, stderr %q", code, errOut)
	}
}
