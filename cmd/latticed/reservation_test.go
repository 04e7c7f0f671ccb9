package main

// A maintenance reservation on a dev stack, driven through the CLI as an
// administrator would: scontrol create reservation 10 minutes ahead on
// every node; a 1-hour job must not start (squeue's reason is Slurm's
// "ReqNodeNotAvail, Reserved for maintenance", explain names the
// reservation), a 5-minute job backfills and completes; sinfo and scontrol
// show reservation print Slurm's layout; latticectl reservation list/delete
// work, and once the reservation is gone the 1-hour job starts.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMaintenanceReservationEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	dir := t.TempDir()
	ctl := buildLatticectl(t)
	slurmBin := filepath.Join(dir, "slurm")
	if out, err := exec.Command(ctl, "slurm-commands", "install", slurmBin).CombinedOutput(); err != nil {
		t.Fatalf("slurm-commands install: %v\n%s", err, out)
	}
	api, metrics := freeAddr(t), freeAddr(t)
	env := append(childEnv(), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"PATH="+slurmBin+string(os.PathListSeparator)+filepath.Dir(ctl)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"LATTICE_SERVER="+api, "USER=root")
	logPath := filepath.Join(dir, "dev.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(latticedBin, "dev", "--data-dir", filepath.Join(dir, "dev"), "--nodes", "2", "--groups", "1",
		"--vclusters", "batch", "--grace", "2s", "--api", api, "--metrics", metrics, "--latticectl", ctl)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{name: "dev", logPath: logPath, cmd: cmd, done: make(chan struct{}), started: time.Now()}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.stop(10 * time.Second) })
	waitHTTP(t, "http://"+metrics+"/readyz", 30*time.Second, p)

	script := `
# The nodes register once the agent is connected (after the API is ready).
for i in $(seq 300); do
  [ "$(sinfo -h -o '%D %T')" = "2 idle" ] && break
  sleep 0.2
done
out=$(scontrol create reservation ReservationName=maint Nodes='node[001-002]' StartTime=now+10minutes Duration=60 Flags=MAINT Users=root)
[ "$out" = "Reservation created: maint" ] || { echo "create said: $out"; exit 1; }
scontrol show reservation maint | tee show.txt
grep -q '^ReservationName=maint StartTime=.* Duration=01:00:00$' show.txt
grep -q '^   Nodes=node\[001-002\] NodeCnt=2 .*Flags=MAINT,SPEC_NODES$' show.txt
grep -q 'Users=root .*State=INACTIVE' show.txt
# A second window over the same nodes is refused.
if scontrol create reservation ReservationName=again Nodes=node001 StartTime=now+20minutes Duration=10 Users=root 2>err.txt; then
  echo "an overlapping reservation was created"; exit 1
fi
grep -q 'Error creating the reservation: .*overlaps reservation "maint"' err.txt

long=$(sbatch --parsable -N2 -t 60 --wrap 'echo long')
short=$(sbatch --parsable -N2 -t 5 --wrap 'echo short > short.txt')
# The short job backfills before the window and completes.
for i in $(seq 600); do
  st=$(sacct -X -P -n -j "$short" -o State)
  [ "$st" = COMPLETED ] && break
  sleep 0.2
done
[ "$st" = COMPLETED ] || { echo "the 5-minute job is $st"; squeue; exit 1; }
grep -qx short short.txt
# The 1-hour job would cross the window's start: it waits, and says why.
for i in $(seq 100); do
  reason=$(squeue -h -j "$long" -o '%T|%r')
  [ "$reason" = "PENDING|ReqNodeNotAvail, Reserved for maintenance" ] && break
  sleep 0.2
done
[ "$reason" = "PENDING|ReqNodeNotAvail, Reserved for maintenance" ] || { echo "1-hour job: $reason"; exit 1; }
latticectl explain "$long" | tee explain.txt
grep -q 'Maintenance' explain.txt
grep -q '^Reservation: *maint$' explain.txt
grep -q 'reserved for maintenance (reservation "maint")' explain.txt
latticectl reservation list | grep -q '^maint  *INACTIVE .*node\[001-002\] *root *- *maint$'
# Admin reflexes: hostlists with scontrol update.
scontrol update NodeName='node[001-002]' State=DRAIN Reason=test
sinfo -h -o '%T %N' | grep -qx 'drained node\[001-002\]'
scontrol update NodeName='node[001-002]' State=RESUME
sinfo -h -o '%T %N' | grep -qx 'idle node\[001-002\]'
# Once the window is gone the 1-hour job starts.
latticectl reservation delete maint
[ "$(scontrol show reservation)" = "No reservations in the system" ]
for i in $(seq 300); do
  st=$(squeue -h -j "$long" -o %T)
  [ "$st" = RUNNING ] || [ -z "$st" ] && break
  sleep 0.2
done
[ "$st" = RUNNING ] || [ -z "$st" ] || { echo "1-hour job is $st after the delete"; exit 1; }
scancel "$long"
# An active maintenance window: sinfo says maint; only its users' jobs run in it.
latticectl reservation create --name now --nodes node002 --duration 30m --flags maint --users root
sinfo -h -o '%T %N' | sort | tee sinfo.txt
grep -qx 'maint node002' sinfo.txt
inres=$(sbatch --parsable -w node002 -t 5 --reservation now --wrap 'echo in > in.txt')
for i in $(seq 600); do
  st=$(sacct -X -P -n -j "$inres" -o State)
  [ "$st" = COMPLETED ] && break
  sleep 0.2
done
[ "$st" = COMPLETED ] || { echo "the job in the reservation is $st"; squeue; exit 1; }
if sbatch --parsable --reservation nosuch --wrap true 2>err.txt; then echo "unknown reservation accepted"; exit 1; fi
grep -q 'invalid reservation "nosuch"' err.txt
`
	c := exec.Command("bash", "-euo", "pipefail", "-c", script)
	c.Env, c.Dir = append(env, "LATTICECTL="+ctl), dir
	done := make(chan struct{})
	var out []byte
	go func() { out, err = c.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		_ = c.Process.Kill()
		<-done
		t.Fatalf("the reservation script did not finish within 3 minutes:\n%s", out)
	}
	if err != nil {
		t.Fatalf("%v\n%s\n--- dev log (tail) ---\n%s", err, out, tail(logPath, 40))
	}
	if !strings.Contains(string(out), "ReservationName=maint") {
		t.Fatalf("no reservation shown:\n%s", out)
	}
}
