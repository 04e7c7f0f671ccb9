package main

import (
	"bytes"
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestReplayInterrupt: Ctrl-C (SIGINT) stops a long replay within seconds,
// with exit code 130, as it stops every other latticectl command. Before,
// latticectl-offline caught the signal and the replay ran on to its end.
func TestReplayInterrupt(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			// SDSC-BLUE under the lattice policy takes 40 s or more.
			cmd := exec.Command(buildLatticectl(t), "replay", "../../testdata/traces/sdsc_blue.swf.gz", "--policy", "lattice")
			cmd.Env = childEnv()
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(3 * time.Second) // read the trace, start replaying
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 130 {
					t.Errorf("after %v: %v, want exit 130\n%s", sig, err, stderr.String())
				}
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("the replay did not stop within 10 s of %v", sig)
			}
		})
	}
}
