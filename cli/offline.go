package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/urfave/cli/v2"
)

// The offline tools — replay (the solver, the predictor, plotting) and
// quorum verify/restore (the quorum's backup format: Raft, bolt) — need no
// server and are rarely run, but linking them made every latticectl run
// slower: a process pays at start-up for the memory its code and its
// packages' initialisation touch, and a loop of `latticectl submit` runs
// thousands of them (docs/scale.md). latticectl therefore does not link
// them: it parses their flags itself (help and completion work as before)
// and then runs latticectl-offline — latticectl with the offline tools
// linked in — with the same arguments, git-style. cmd/latticectl-offline
// sets the hooks below, so there the commands run in the process.

// OfflineBinary is the companion latticectl runs for the offline tools. It
// is looked for in LATTICECTL_OFFLINE (a path), next to the running
// latticectl (symbolic links followed), then on PATH.
const OfflineBinary = "latticectl-offline"

// ReplayAction runs `latticectl replay` once its flags are parsed.
// cmd/latticectl-offline sets it; when nil, replay is handed to
// latticectl-offline.
var ReplayAction cli.ActionFunc

// errReported ends latticectl with the exit code of latticectl-offline,
// which has already printed what went wrong.
var errReported = errors.New("reported by " + OfflineBinary)

// offline runs this invocation again in latticectl-offline: the process is
// replaced when latticectl's own standard streams are in use (exit code and
// signals then are the companion's), otherwise (tests) it is a child.
func (r *runner) offline(c *cli.Context) error {
	path, err := r.findOffline()
	if err != nil {
		return withCode(ExitError, fmt.Errorf("%s runs in %s: %v", c.Command.HelpName, OfflineBinary, err))
	}
	environ := os.Environ
	if r.Environ != nil {
		environ = r.Environ
	}
	argv := append([]string{OfflineBinary}, r.args...)
	if r.Stdin == os.Stdin && r.Stdout == os.Stdout && r.Stderr == os.Stderr {
		err := syscall.Exec(path, argv, environ())
		return withCode(ExitError, fmt.Errorf("%s runs in %s: %v", c.Command.HelpName, path, err))
	}
	ctx := c.Context
	if ctx == nil {
		ctx = context.Background()
	}
	cmd := exec.CommandContext(ctx, path)
	cmd.Args = argv
	cmd.Stdin, cmd.Stdout, cmd.Stderr = r.Stdin, r.Stdout, r.Stderr
	cmd.Env = environ()
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee) && ee.ExitCode() > 0:
		return withCode(ee.ExitCode(), errReported)
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return withCode(ExitError, fmt.Errorf("%s runs in %s: %v", c.Command.HelpName, path, err))
}

// findOffline locates latticectl-offline.
func (r *runner) findOffline() (string, error) {
	if p := r.getenv("LATTICECTL_OFFLINE"); p != "" {
		if !isExecutable(p) {
			return "", fmt.Errorf("LATTICECTL_OFFLINE=%s is not an executable file", p)
		}
		return p, nil
	}
	var dirs []string
	if exe, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Dir(exe))
		if real, err := filepath.EvalSymlinks(exe); err == nil && filepath.Dir(real) != dirs[0] {
			dirs = append(dirs, filepath.Dir(real))
		}
	}
	for _, d := range dirs {
		if p := filepath.Join(d, OfflineBinary); isExecutable(p) {
			return p, nil
		}
	}
	if p, err := exec.LookPath(OfflineBinary); err == nil {
		return p, nil
	}
	where := "not on PATH"
	if len(dirs) > 0 {
		where = "neither in " + dirs[0] + " (next to latticectl) nor on PATH"
	}
	return "", fmt.Errorf("%s is %s; it is built with latticectl: `go build -o bin/ ./cmd/...` (or `make`) puts both in bin/; "+
		"install it next to latticectl, or give its path in LATTICECTL_OFFLINE", OfflineBinary, where)
}

func (r *runner) getenv(k string) string {
	if r.Getenv == nil {
		return os.Getenv(k)
	}
	return r.Getenv(k)
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}
