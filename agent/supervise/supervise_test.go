package supervise

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if code, ok := Main(); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// supervised starts this test binary as the supervisor of argv in a
// process group of its own.
func supervised(t *testing.T, status string, argv ...string) *exec.Cmd {
	t.Helper()
	path, err := exec.LookPath(argv[0])
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], append([]string{path}, argv...)...)
	cmd.Env = append(os.Environ(), StatusEnv+"="+status)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// A signal sent to the job's process group ends the job as its own
// default action says, never the supervisor first: the status file gets
// the job's 128+N and the supervisor exits with it.
func TestSignalToTheGroupEndsTheJobNotTheSupervisor(t *testing.T) {
	sigs := []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGUSR1,
		syscall.SIGUSR2, syscall.SIGALRM, syscall.SIGPIPE, syscall.SIGXCPU, syscall.SIGVTALRM, syscall.SIGPWR,
		syscall.SIGABRT, syscall.SIGTRAP, syscall.SIGSYS, syscall.Signal(40)}
	for _, sig := range sigs {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			status := filepath.Join(t.TempDir(), "status")
			cmd := supervised(t, status, "sleep", "30")
			// Until the job runs, a signal would reach the supervisor alone.
			deadline := time.Now().Add(10 * time.Second)
			for {
				out, _ := exec.Command("pgrep", "-g", strconv.Itoa(cmd.Process.Pid), "-x", "sleep").Output()
				if len(out) > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the job never started")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil {
				t.Fatal(err)
			}
			err := cmd.Wait()
			want := 128 + int(sig)
			if got := ExitCode(err); got != want {
				t.Errorf("supervisor exited with %d (%v), want %d: it must outlive the job", got, err, want)
			}
			if code, ok := ReadStatus(status); !ok || code != want {
				t.Errorf("status file: %d, %v; want %d", code, ok, want)
			}
		})
	}
}

func TestExitCodeAndStartFailure(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		argv []string
		want int
	}{
		{[]string{"true"}, 0},
		{[]string{"sh", "-c", "exit 7"}, 7},
		{[]string{"sh", "-c", "kill -9 $$"}, 137},
	} {
		status := filepath.Join(dir, strconv.Itoa(tc.want))
		cmd := supervised(t, status, tc.argv...)
		if got := ExitCode(cmd.Wait()); got != tc.want {
			t.Errorf("%v: supervisor exit %d, want %d", tc.argv, got, tc.want)
		}
		if code, ok := ReadStatus(status); !ok || code != tc.want {
			t.Errorf("%v: status %d, %v; want %d", tc.argv, code, ok, tc.want)
		}
	}
	status := filepath.Join(dir, "missing")
	cmd := exec.Command(os.Args[0], filepath.Join(dir, "no-such-program"), "x")
	cmd.Env = append(os.Environ(), StatusEnv+"="+status)
	if got := ExitCode(cmd.Run()); got != 127 {
		t.Errorf("a program that cannot start: exit %d, want 127", got)
	}
	if code, ok := ReadStatus(status); !ok || code != 127 {
		t.Errorf("a program that cannot start: status %d, %v; want 127", code, ok)
	}
}
