package supervise

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A job whose agent's fencing deadline passed is stopped by its supervisor
// alone (the agent is gone): SIGTERM, and SIGKILL after the grace for a
// job that ignores it; the status is recorded and nothing of the group
// stays.
func TestSupervisorStopsTheJobAtTheFence(t *testing.T) {
	dir := t.TempDir()
	status := filepath.Join(dir, "runs", "1-0.status")
	if err := os.MkdirAll(filepath.Dir(status), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteDeadline(FencePath(status), time.Now().Add(time.Second), 500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cmd := supervised(t, status, "sh", "-c", "trap '' TERM; sleep 60 & wait; sleep 60")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the supervisor did not stop its job after the fencing deadline")
	}
	if took := time.Since(start); took < time.Second {
		t.Errorf("stopped after %s, before the deadline", took)
	}
	if code, ok := ReadStatus(status); !ok || code != 137 {
		t.Errorf("status %d, %v; want 137 (killed after ignoring SIGTERM)", code, ok)
	}
}

// A job past its time limit is stopped by its supervisor even when no
// agent does it (SIGTERM: the job's default action ends it).
func TestSupervisorEnforcesTheWalltime(t *testing.T) {
	dir := t.TempDir()
	status := filepath.Join(dir, "runs", "2-0.status")
	if err := os.MkdirAll(filepath.Dir(status), 0o755); err != nil {
		t.Fatal(err)
	}
	// A fence far away changes nothing.
	if err := WriteDeadline(FencePath(status), time.Now().Add(time.Hour), time.Second); err != nil {
		t.Fatal(err)
	}
	if err := WriteDeadline(LimitPath(status), time.Now().Add(500*time.Millisecond), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	cmd := supervised(t, status, "sleep", "60")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the supervisor did not stop its job past its walltime")
	}
	if code, ok := ReadStatus(status); !ok || code != 143 {
		t.Errorf("status %d, %v; want 143 (SIGTERM)", code, ok)
	}
}

func TestReadDeadline(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	for _, bad := range []string{"", "x y", "1", "-5 10", "10 -1", "1 2 3"} {
		_ = os.WriteFile(p, []byte(bad), 0o644)
		if _, _, ok := ReadDeadline(p); ok {
			t.Errorf("%q read as a deadline", bad)
		}
	}
	at := time.UnixMilli(time.Now().UnixMilli())
	if err := WriteDeadline(p, at, 1500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d, g, ok := ReadDeadline(p); !ok || !d.Equal(at) || g != 1500*time.Millisecond {
		t.Errorf("read %v %v %v, want %v 1.5s", d, g, ok, at)
	}
}
