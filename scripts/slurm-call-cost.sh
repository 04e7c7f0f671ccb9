#!/bin/bash
# slurm-call-cost.sh [CALLS] -- the cost of one call of sbatch, squeue and
# sacct, Slurm's against Lattice's, on this machine in one run (issue 27).
# Workflow tools run squeue/sacct every few seconds per workflow and sbatch
# once per task, so what one call costs is what they pay.
#
# Slurm side: a real Slurm 22.05 (the peer in ../shared/peers/slurm; one
# already up is used as is, else it is started with 4 nodes and stopped at
# the end). The peer has no slurmdbd, so its sacct reads the job completion
# log (sacct -c): the only sacct that answers there.
# Lattice side: latticectl built as released (static, release tags), linked
# under Slurm's names, against a `latticed dev` of 4 nodes.
# Both sides see the same queue: a few jobs each (sbatch measured below).
#
# Prints, per command, the mean CPU (user+sys) and wall time of one call,
# measured over CALLS (default 30) sequential calls.
#
# Environment: SLURM_PEER (default ../shared/peers/slurm next to the
# repository), OUT (default a temp dir), API (default 127.0.0.1:25070).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CALLS=${1:-30}
PEER=${SLURM_PEER:-$ROOT/../shared/peers/slurm}
OUT=${OUT:-$(mktemp -d -t slurm-call-cost-XXXXXX)}
API=${API:-127.0.0.1:25070}
mkdir -p "$OUT" && chmod 0755 "$OUT"
mkdir -p "$OUT/bin" "$OUT/work"
TAGS=${TAGS-grpcnotrace,urfave_cli_no_docs}
(cd "$ROOT" && CGO_ENABLED=0 go build -tags "$TAGS" -trimpath -ldflags "-s -w" -o "$OUT/bin/" ./cmd/latticed ./cmd/latticectl ./cmd/lattice-job-supervisor)
"$OUT/bin/latticectl" slurm-commands install "$OUT/slurm" >/dev/null
echo "machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); $CALLS calls each"

# measure LABEL CMD...: mean CPU and wall ms of one call of CMD.
measure() {
  local label=$1; shift
  local t0 c0 t1 c1
  read -r c0 < <(awk '{print $14+$15+$16+$17}' /proc/$$/stat)
  t0=$(date +%s%N)
  for _ in $(seq "$CALLS"); do "$@" >/dev/null 2>&1 || true; done
  t1=$(date +%s%N)
  read -r c1 < <(awk '{print $14+$15+$16+$17}' /proc/$$/stat)
  local hz; hz=$(getconf CLK_TCK)
  awk -v l="$label" -v c=$((c1 - c0)) -v hz="$hz" -v w=$((t1 - t0)) -v n="$CALLS" \
    'BEGIN { printf "%-28s cpu %6.1f ms  wall %6.1f ms\n", l, c * 1000 / hz / n, w / 1e6 / n }'
}

# ---- Slurm ----
started=0
if [ -z "${SLURM_CONF:-}" ] && [ -f /tmp/slurm-peer/env.sh ]; then . /tmp/slurm-peer/env.sh; fi
if ! /usr/bin/sinfo -h >/dev/null 2>&1; then
  if [ -x "$PEER/up.sh" ] && [ -x /usr/sbin/slurmctld ]; then
    flock /tmp/slurm-peer.lock "$PEER/up.sh" 4 >/dev/null
    . "${PEER_ROOT:-/tmp/slurm-peer}/env.sh"
    started=1
  else
    echo "no Slurm here (apt-get install slurm-wlm munge); Lattice side only"
  fi
fi
stop_peer() { [ $started = 1 ] && flock /tmp/slurm-peer.lock "$PEER/down.sh" >/dev/null 2>&1 || true; }
if /usr/bin/sinfo -h >/dev/null 2>&1; then
  cd "$OUT/work"
  measure "slurm sbatch --wrap" /usr/bin/sbatch --parsable -H -J cost -t 1 -o /dev/null --wrap true
  measure "slurm squeue" /usr/bin/squeue
  measure "slurm squeue -h -o '%i %T'" /usr/bin/squeue -h -o "%i %T"
  measure "slurm sacct -c (jobcomp)" /usr/bin/sacct -c -X -P -n
  /usr/bin/scancel -n cost || true
fi

# ---- Lattice ----
"$OUT/bin/latticed" dev --data-dir "$OUT/lattice" --nodes 4 --vclusters batch --api "$API" --metrics "" \
  >"$OUT/latticed.log" 2>&1 &
dev=$!
trap 'kill $dev 2>/dev/null; wait $dev 2>/dev/null; stop_peer' EXIT
for _ in $(seq 100); do grep -q "ready" "$OUT/latticed.log" && break; sleep 0.1; done
export LATTICE_SERVER=$API
cd "$OUT/work"
measure "lattice sbatch --wrap" "$OUT/slurm/sbatch" --parsable -H -J cost -t 1 -o /dev/null --wrap true
measure "lattice squeue" "$OUT/slurm/squeue"
measure "lattice squeue -h -o '%i %T'" "$OUT/slurm/squeue" -h -o "%i %T"
measure "lattice sacct -X -P -n" "$OUT/slurm/sacct" -X -P -n
