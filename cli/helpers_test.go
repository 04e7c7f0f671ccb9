package cli

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// result is what one latticectl invocation printed and returned.
type result struct {
	stdout, stderr string
	code           int
}

// run runs latticectl in process with a fixed environment: user alice,
// working directory /home/alice/proj, the clock at t0, times in UTC.
// env adds environment variables; LATTICE_RETRY_BUDGET defaults to 300ms so
// "nothing answers" tests stay fast.
func run(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	return runIn(t, "", env, args...)
}

func runIn(t *testing.T, stdin string, env map[string]string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	e := Env{
		Stdin:  strings.NewReader(stdin),
		Stdout: &stdout,
		Stderr: &stderr,
		Getenv: func(k string) string {
			if v, ok := env[k]; ok {
				return v
			}
			if k == "LATTICE_RETRY_BUDGET" {
				return "300ms"
			}
			return ""
		},
		Environ:  func() []string { return []string{"HOME=/home/alice", "PATH=/usr/bin", "OMP_NUM_THREADS=8"} },
		Getwd:    func() (string, error) { return "/home/alice/proj", nil },
		Now:      func() time.Time { return t0 },
		Location: time.UTC,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	code := Main(ctx, e, args)
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// servers is the LATTICE_SERVER environment for the given fakes.
func servers(addrs ...string) map[string]string {
	return map[string]string{"LATTICE_SERVER": strings.Join(addrs, ",")}
}

func writeScript(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "job.sh")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// golden compares got with testdata/NAME, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cli -run %s -update to create it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("%s differs from %s:\n--- got\n%s\n--- want\n%s", t.Name(), path, got, want)
	}
}

func mustCode(t *testing.T, r result, want int) {
	t.Helper()
	if r.code != want {
		t.Fatalf("exit code %d, want %d\nstdout: %s\nstderr: %s", r.code, want, r.stdout, r.stderr)
	}
}
