package main

// Workflow tools run unchanged against a dev stack with Slurm's commands
// (links to latticectl made by `latticectl slurm-commands install`) first
// on PATH: a dask-jobqueue/Parsl-style script of sbatch, squeue, sacct and
// scancel, and Snakemake from Debian with --cluster "sbatch ..."
// --cluster-status and with its own --slurm executor (which runs srun
// inside the job). A tool that is missing and cannot be installed makes
// its part skip, saying so. Snakemake polls at its own pace (its --slurm
// executor every ~40 s: minutes per workflow), so its parts run with
// LATTICE_WORKFLOW_TESTS=1 (or LATTICE_LONG_TESTS=1), as .ci/run does.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSlurmWorkflowTools(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	dir := t.TempDir()
	slurmBin := filepath.Join(dir, "slurm")
	if out, err := exec.Command(buildLatticectl(t), "slurm-commands", "install", slurmBin).CombinedOutput(); err != nil {
		t.Fatalf("slurm-commands install: %v\n%s", err, out)
	}
	api, metrics := freeAddr(t), freeAddr(t)
	env := append(childEnv(), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"PATH="+slurmBin+string(os.PathListSeparator)+os.Getenv("PATH"), "LATTICE_SERVER="+api, "USER=root")
	logPath := filepath.Join(dir, "dev.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(latticedBin, "dev", "--data-dir", filepath.Join(dir, "dev"), "--nodes", "4", "--groups", "1",
		"--vclusters", "batch", "--grace", "2s", "--api", api, "--metrics", metrics, "--latticectl", buildLatticectl(t))
	cmd.Env, cmd.Stdout, cmd.Stderr = env, f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{name: "dev", logPath: logPath, cmd: cmd, done: make(chan struct{}), started: time.Now()}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.stop(10 * time.Second) })
	waitHTTP(t, "http://"+metrics+"/readyz", 30*time.Second, p)

	// sh runs a shell script in a fresh work directory with the Slurm
	// commands first on PATH and fails the test unless it exits 0.
	sh := func(t *testing.T, name, script string, timeout time.Duration) string {
		t.Helper()
		work := filepath.Join(dir, name)
		if err := os.MkdirAll(work, 0o755); err != nil {
			t.Fatal(err)
		}
		c := exec.Command("bash", "-euo", "pipefail", "-c", script)
		c.Env, c.Dir = env, work
		done := make(chan struct{})
		var out []byte
		var err error
		go func() { out, err = c.CombinedOutput(); close(done) }()
		select {
		case <-done:
		case <-time.After(timeout):
			_ = c.Process.Kill()
			<-done
			t.Fatalf("%s did not finish within %s:\n%s", name, timeout, out)
		}
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		return string(out)
	}

	t.Run("scripted", func(t *testing.T) {
		// What dask-jobqueue and Parsl do: submit a job script (on stdin
		// and as a file), read the id from "Submitted batch job N", poll
		// squeue with their formats, read the end state from sacct,
		// cancel with scancel.
		sh(t, "scripted", `
id=$(sbatch --parsable -J hello -t 2 --wrap 'echo hello > hello.txt')
[[ $id =~ ^[0-9]+$ ]] || { echo "bad id $id"; exit 1; }
cat > worker.sh <<'EOF'
#!/usr/bin/env bash
#SBATCH -J dask-worker
#SBATCH -t 00:05:00
#SBATCH --cpus-per-task=1
#SBATCH --mem=1G
sleep 300
EOF
out=$(sbatch worker.sh)
long=$(sed -n 's/^Submitted batch job \([0-9][0-9]*\)$/\1/p' <<<"$out")
[ -n "$long" ] || { echo "no job id in: $out"; exit 1; }
# Parsl: squeue --noheader --format='%i %t' --job=IDS; gone = done.
for i in $(seq 300); do
  st=$(squeue --noheader --format='%i %t' --job="$id,$long" | awk -v id="$id" '$1 == id {print $2}')
  [ -z "$st" ] && break
  sleep 0.2
done
[ -z "$st" ] || { echo "job $id still $st"; exit 1; }
grep -qx hello hello.txt
sacct -X -P -n -j "$id" --format=JobIDRaw,State,ExitCode | grep -qx "$id|COMPLETED|0:0"
# dask-jobqueue: the worker runs (or waits), then is cancelled.
squeue -h -j "$long" -o %T | grep -Eqx 'PENDING|CONFIGURING|RUNNING'
scancel "$long"
for i in $(seq 300); do
  st=$(sacct -X -P -n -j "$long" -o State)
  [ "$st" = CANCELLED ] && break
  sleep 0.2
done
[ "$st" = CANCELLED ] || { echo "job $long is $st after scancel"; exit 1; }
# Slurm's own answers for what is gone: empty squeue, exit 0 scancel.
[ -z "$(squeue -h -u nobody)" ]
scancel 999999
`, 2*time.Minute)
	})

	snakemake := func(t *testing.T) {
		t.Helper()
		if os.Getenv("LATTICE_WORKFLOW_TESTS") == "" && os.Getenv("LATTICE_LONG_TESTS") == "" {
			t.Skip("Snakemake takes minutes to poll its jobs: set LATTICE_WORKFLOW_TESTS=1 (.ci/run does)")
		}
		ensureTools(t, "snakemake")
		if _, err := exec.LookPath("snakemake"); err != nil {
			t.Skipf("snakemake is not on PATH: %v", err)
		}
	}
	snakefile := `
rule all:
    input: "out/b.txt"

rule a:
    output: "out/a.txt"
    resources: runtime=5, mem_mb=100
    shell: "echo a > {output}"

rule b:
    input: "out/a.txt"
    output: "out/b.txt"
    resources: runtime=5, mem_mb=100
    shell: "cat {input} > {output}; echo b >> {output}"
`
	check := func(t *testing.T, name, out string) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name, "out", "b.txt"))
		if err != nil || string(b) != "a\nb\n" {
			t.Fatalf("out/b.txt: %q %v\n%s", b, err, out)
		}
	}

	t.Run("snakemake-cluster", func(t *testing.T) {
		snakemake(t)
		out := sh(t, "smk-cluster", `
cat > Snakefile <<'EOF'`+snakefile+`EOF
cat > status.sh <<'EOF'
#!/bin/sh
st=$(sacct -X -P -n -j "$1" -o State | head -n1)
case "$st" in
COMPLETED) echo success ;;
PENDING|RUNNING|CONFIGURING|COMPLETING|SUSPENDED|REQUEUED|"") echo running ;;
*) echo failed ;;
esac
EOF
chmod +x status.sh
snakemake --cluster "sbatch --parsable -t 5 -N 1" --cluster-status ./status.sh -j 2 --latency-wait 10
`, 4*time.Minute)
		check(t, "smk-cluster", out)
	})

	t.Run("snakemake-slurm", func(t *testing.T) {
		snakemake(t)
		if out, _ := exec.Command("snakemake", "--help").CombinedOutput(); !strings.Contains(string(out), "--slurm") {
			t.Skip("this snakemake has no --slurm executor")
		}
		out := sh(t, "smk-slurm", `
cat > Snakefile <<'EOF'`+snakefile+`EOF
snakemake --slurm -j 2 --latency-wait 10
`, 4*time.Minute)
		check(t, "smk-slurm", out)
		if !strings.Contains(out, "has been submitted with SLURM jobid") {
			t.Errorf("snakemake did not submit through sbatch:\n%s", out)
		}
	})
}
