package agent

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// Jobs run as their owner. An agent running as root starts each job with
// the uid, gid and supplementary groups of the submitting user as this
// node resolves the name, and hands that user the job's output files,
// script and checkpoint directory; it refuses jobs owned by root unless the
// site allows root jobs. An agent that is not root, or runs with RunAsSelf
// (latticed dev, so made-up users work), runs every job as itself and says
// so once at start. A job with no owner — submitted to a server without
// authentication, which listens on loopback only — runs as the agent.

func (r *Runner) sayWhoRunsJobs() {
	switch {
	case r.runAsSelf:
		r.log.Info("every job runs as this agent's user, whoever submitted it (run-as-self)", "uid", os.Geteuid())
	case os.Geteuid() != 0:
		r.log.Info("this agent is not root: every job runs as its user, whoever submitted it", "uid", os.Geteuid())
	}
}

// credential is the identity a job starts with; nil = the agent's own.
func (r *Runner) credential(l Launch) (*syscall.Credential, error) {
	if r.runAsSelf || os.Geteuid() != 0 || l.User == "" {
		return nil, nil
	}
	u, err := user.Lookup(l.User)
	if err != nil {
		return nil, fmt.Errorf("allocation %d: its owner %q is not a user on this node: %v", l.AllocID, l.User, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("allocation %d: owner %q has a non-numeric uid or gid (%s:%s)", l.AllocID, l.User, u.Uid, u.Gid)
	}
	if uid == 0 && !r.allowRoot {
		return nil, fmt.Errorf("allocation %d: its owner %q is root; this agent runs jobs as root only with --allow-root-jobs", l.AllocID, l.User)
	}
	c := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	if ids, err := u.GroupIds(); err == nil {
		for _, g := range ids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				c.Groups = append(c.Groups, uint32(n))
			}
		}
	}
	return c, nil
}

// chownForJob gives the job's owner its output files, checkpoint directory
// and script (paths may repeat or be empty).
func chownForJob(c *syscall.Credential, paths ...string) error {
	if c == nil {
		return nil
	}
	for _, p := range paths {
		if p == "" {
			continue
		}
		if err := os.Chown(p, int(c.Uid), int(c.Gid)); err != nil {
			return fmt.Errorf("hand %s to uid %d: %w", p, c.Uid, err)
		}
	}
	return nil
}

// scriptPath is the batch script a command runs, if any.
func scriptPath(cmd *exec.Cmd, l Launch) string {
	if l.Script == "" {
		return ""
	}
	for _, a := range cmd.Args {
		if filepath.Ext(a) == ".sh" {
			return a
		}
	}
	return ""
}
