package agent

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// execTagged starts path in its own process group with the agent tag.
func execTagged(t *testing.T, path, tag string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(path)
	cmd.Env = append(os.Environ(), AgentTagEnv+"="+tag)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	return cmd
}
