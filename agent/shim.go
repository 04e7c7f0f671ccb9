package agent

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ShimDirName is the directory, under the agent's data dir, holding the
// srun shim that goes first on every job's PATH.
const ShimDirName = "bin"

// writeShim writes DataDir/bin/srun, a script that runs `latticectl srun`
// (which translates srun's flags into `latticectl run`). It returns the
// directory, or "" when no latticectl binary is found (jobs then see no
// srun from Lattice; a site's own srun is not hidden).
func writeShim(dataDir, latticectl string, log *slog.Logger) (string, error) {
	if latticectl == "" {
		if exe, err := os.Executable(); err == nil {
			if p := filepath.Join(filepath.Dir(exe), "latticectl"); isExecutable(p) {
				latticectl = p
			}
		}
	}
	if latticectl == "" {
		if p, err := exec.LookPath("latticectl"); err == nil {
			latticectl = p
		}
	}
	if latticectl == "" {
		if log != nil {
			log.Warn("no latticectl binary found: jobs get no srun shim (set the agent's latticectl path)")
		}
		return "", nil
	}
	abs, err := filepath.Abs(latticectl)
	if err != nil {
		return "", fmt.Errorf("latticectl path: %w", err)
	}
	if !isExecutable(abs) {
		return "", fmt.Errorf("latticectl %s is not an executable file", abs)
	}
	dir := filepath.Join(dataDir, ShimDirName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("shim dir: %w", err)
	}
	script := "#!/bin/sh\n# srun for jobs Lattice runs: launches a step of the job through latticectl.\nexec " +
		shellJoin([]string{abs}) + " srun \"$@\"\n"
	// latticectl itself too, so `latticectl run` works in any job.
	link := filepath.Join(dir, "latticectl")
	_ = os.Remove(link)
	if err := os.Symlink(abs, link); err != nil {
		return "", fmt.Errorf("link latticectl into the job PATH: %w", err)
	}
	tmp := filepath.Join(dir, ".srun.tmp")
	if err := os.WriteFile(tmp, []byte(script), 0o755); err != nil {
		return "", fmt.Errorf("write srun shim: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "srun")); err != nil {
		return "", fmt.Errorf("write srun shim: %w", err)
	}
	return dir, nil
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// stepEnv puts the shim first on a job's PATH and tells latticectl where
// the quorum is (LATTICE_SERVER), unless the request set it.
func (r *Runner) stepEnv(env []string) []string {
	if r.shimDir != "" {
		path := envValue(env, "PATH")
		if path == "" {
			path = "/usr/local/bin:/usr/bin:/bin"
		}
		env = append(env, "PATH="+r.shimDir+string(os.PathListSeparator)+path)
	}
	if r.tag != "" {
		env = append(env, AgentTagEnv+"="+r.tag)
	}
	if len(r.servers) > 0 && envValue(env, "LATTICE_SERVER") == "" {
		env = append(env, "LATTICE_SERVER="+strings.Join(r.servers, ","))
	}
	if r.caFile != "" && envValue(env, "LATTICE_CACERT") == "" {
		env = append(env, "LATTICE_CACERT="+r.caFile)
	}
	return env
}
