package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
)

// releaseTags are the build tags of a release latticectl (Makefile).
const releaseTags = "grpcnotrace,urfave_cli_no_docs"

// buildLatticectl builds latticectl as the Makefile does (static, release
// tags) into a temporary directory, with links under Slurm's names beside
// it.
func buildLatticectl(b *testing.B) string {
	b.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		b.Skip("no go tool on PATH to build latticectl")
	}
	dir := b.TempDir()
	cmd := exec.Command(gobin, "build", "-tags", releaseTags, "-o", dir, "../cmd/latticectl")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build latticectl: %v\n%s", err, out)
	}
	for _, name := range []string{"sbatch", "squeue", "sacct"} {
		if err := os.Symlink("latticectl", filepath.Join(dir, name)); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

// BenchmarkCallCPU is what one call of a built latticectl costs the
// machine: each iteration runs the binary as a new process, as a workflow
// tool does, against an in-process fake server, and reports the child's
// CPU (user + system, wait4's rusage) as cpu-ms/op and its page faults as
// faults/op; ns/op is the wall time of the whole call. Most of it is
// process start-up (docs/ARCHITECTURE.md, "latticectl start-up");
// scripts/slurm-call-cost.sh compares the same calls with Slurm's on one
// machine.
//
//	go test ./cli -run '^$' -bench CallCPU -benchtime 50x
func BenchmarkCallCPU(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("rusage of a child is read on Linux only")
	}
	dir := buildLatticectl(b)
	f := newFakeServer(b)
	env := []string{"LATTICE_SERVER=" + f.addr, "LATTICE_TENANT=default", "LATTICE_MUNGE_SOCKET=off",
		"HOME=" + b.TempDir(), "PATH=/usr/bin:/bin", "TZ=UTC"}
	work := b.TempDir()
	for _, bc := range []struct {
		name string
		argv []string
	}{
		{"version", []string{"latticectl", "--version"}},
		{"squeue", []string{"squeue"}},
		{"sacct", []string{"sacct", "-X", "-P", "-n"}},
		{"sbatch", []string{"sbatch", "--parsable", "-H", "-J", "cost", "-t", "1", "-o", "/dev/null", "--wrap", "true"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var cpuNs, faults int64
			for b.Loop() {
				cmd := exec.Command(filepath.Join(dir, bc.argv[0]), bc.argv[1:]...)
				cmd.Env, cmd.Dir = env, work
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%v: %v\n%s", bc.argv, err, out)
				}
				ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
				cpuNs += ru.Utime.Nano() + ru.Stime.Nano()
				faults += ru.Minflt + ru.Majflt
			}
			b.ReportMetric(float64(cpuNs)/1e6/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(faults)/float64(b.N), "faults/op")
		})
	}
}
