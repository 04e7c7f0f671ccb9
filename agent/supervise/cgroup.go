package supervise

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
)

// CgroupEnv passes a per-job supervisor the cgroups its job starts in
// (Cgroups as JSON).
const CgroupEnv = "LATTICE_SUPERVISE_CGROUP"

// Cgroups is where a process starts: V2 is a cgroup v2 directory, entered
// at the clone itself (CLONE_INTO_CGROUP); V1 are the "tasks" files of v1
// hierarchies' cgroups, entered by the forking thread before the fork, so
// the child is inside them before its first instruction. Either may be
// empty; both empty starts the process where its parent is.
type Cgroups struct {
	V2 string   `json:"v2,omitempty"`
	V1 []string `json:"v1,omitempty"`
}

// Empty reports whether c places nothing.
func (c *Cgroups) Empty() bool { return c == nil || (c.V2 == "" && len(c.V1) == 0) }

// StartIn runs start (a fork and exec: syscall.ForkExec or exec.Cmd.Start
// whose SysProcAttr is sys) so that the process it makes begins inside c.
//
// The fork happens on an OS thread of its own that first moves itself
// into c's v1 cgroups (v1 lets a single thread move) and is never given
// back to the Go scheduler: it ends with the goroutine, so nothing of this
// process stays in the job's cgroups. The v2 cgroup is entered by the
// clone (SysProcAttr.UseCgroupFD). A placement that fails starts nothing.
func StartIn(c *Cgroups, sys *syscall.SysProcAttr, start func() error) error {
	if c.Empty() {
		return start()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
		if syscall.Gettid() == syscall.Getpid() {
			// The main thread is kept, not ended, when its goroutine
			// exits locked, and it names the process's cgroups: never
			// move it. While this goroutine holds it, another locked
			// goroutine runs on another thread.
			inner := make(chan error, 1)
			go func() {
				runtime.LockOSThread()
				inner <- startIn(c, sys, start)
			}()
			err := <-inner
			runtime.UnlockOSThread()
			done <- err
			return
		}
		done <- startIn(c, sys, start)
	}()
	return <-done
}

func startIn(c *Cgroups, sys *syscall.SysProcAttr, start func() error) error {
	if c.V2 != "" {
		fd, err := syscall.Open(c.V2, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("cgroup %s: %w", c.V2, err)
		}
		defer syscall.Close(fd)
		sys.UseCgroupFD, sys.CgroupFD = true, fd
	}
	tid := []byte(strconv.Itoa(syscall.Gettid()))
	for _, tasks := range c.V1 {
		if err := os.WriteFile(tasks, tid, 0); err != nil {
			return fmt.Errorf("enter cgroup: %w", err)
		}
	}
	return start()
}

// ForkExecIn is syscall.ForkExec with the child started inside c.
func ForkExecIn(c *Cgroups, path string, argv []string, attr *syscall.ProcAttr) (int, error) {
	if attr.Sys == nil {
		attr.Sys = &syscall.SysProcAttr{}
	}
	var pid int
	err := StartIn(c, attr.Sys, func() error {
		var err error
		pid, err = syscall.ForkExec(path, argv, attr)
		return err
	})
	return pid, err
}

// cgroupsFromEnv reads (and removes) CgroupEnv.
func cgroupsFromEnv() (*Cgroups, error) {
	v := os.Getenv(CgroupEnv)
	if v == "" {
		return nil, nil
	}
	_ = os.Unsetenv(CgroupEnv)
	var c Cgroups
	if err := json.Unmarshal([]byte(v), &c); err != nil {
		return nil, fmt.Errorf("%s: %w", CgroupEnv, err)
	}
	return &c, nil
}
