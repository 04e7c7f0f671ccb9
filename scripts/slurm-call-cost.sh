#!/bin/bash
# slurm-call-cost.sh [CALLS] -- the cost of one call of sbatch, squeue and
# sacct, Slurm's against Lattice's, on this machine in one run (issue 27).
# Workflow tools run squeue/sacct every few seconds per workflow and sbatch
# once per task, so what one call costs is what they pay.
#
# Slurm side: a real Slurm 22.05 (the peer in ../shared/peers/slurm; one
# already up is used as is, else it is started with 4 nodes and stopped at
# the end). The peer has no slurmdbd, so its sacct reads the job completion
# log (sacct -c): the only sacct that answers there — it reads a local file
# and sends no request, so it is cheaper than a sacct that asks slurmdbd.
# Lattice side: latticectl built as `make` builds it (static, release
# tags), linked under Slurm's names, against a `latticed dev` of 4 nodes.
# Both sides see the same queue: a few jobs each, then the held jobs that
# the measured sbatch calls add, as many on each side.
#
# The calls run interleaved (one of each command, then again, CALLS times)
# by scripts/callcost, which reads each call's CPU (user + system) and page
# faults from the kernel's rusage of the child and prints medians and
# quartiles: on a loaded machine the load weighs on both sides alike.
#
# Environment: SLURM_PEER (default ../shared/peers/slurm next to the
# repository), OUT (default a temp dir), API (default 127.0.0.1:25070),
# BASELINE (a latticectl binary to measure as a third side, "before").
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CALLS=${1:-30}
PEER=${SLURM_PEER:-$ROOT/../shared/peers/slurm}
OUT=${OUT:-$(mktemp -d -t slurm-call-cost-XXXXXX)}
API=${API:-127.0.0.1:25070}
mkdir -p "$OUT" && chmod 0755 "$OUT"
mkdir -p "$OUT/bin" "$OUT/work"
TAGS=${TAGS-grpcnotrace,urfave_cli_no_docs}
(cd "$ROOT" && CGO_ENABLED=0 go build -tags "$TAGS" -o "$OUT/bin/" ./cmd/latticed ./cmd/latticectl ./scripts/callcost)
"$OUT/bin/latticectl" slurm-commands install "$OUT/slurm" >/dev/null
if [ -n "${BASELINE:-}" ]; then
  mkdir -p "$OUT/before" && cp "$BASELINE" "$OUT/before/latticectl"
  "$OUT/before/latticectl" slurm-commands install "$OUT/before/slurm" >/dev/null
fi
echo "machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); $CALLS calls of each, interleaved"

# ---- Slurm ----
started=0
slurm=0
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
/usr/bin/sinfo -h >/dev/null 2>&1 && slurm=1
stop_peer() { [ $started = 1 ] && flock /tmp/slurm-peer.lock "$PEER/down.sh" >/dev/null 2>&1 || true; }

# ---- Lattice ----
"$OUT/bin/latticed" dev --data-dir "$OUT/lattice" --nodes 4 --vclusters batch --api "$API" --metrics "" \
  >"$OUT/latticed.log" 2>&1 &
dev=$!
cleanup() {
  kill $dev 2>/dev/null; wait $dev 2>/dev/null
  if [ $slurm = 1 ]; then /usr/bin/scancel -n cost >/dev/null 2>&1 || true; fi
  stop_peer
}
trap cleanup EXIT
for _ in $(seq 100); do grep -q "ready" "$OUT/latticed.log" && break; sleep 0.1; done
export LATTICE_SERVER=$API

# The spec: LABEL<TAB>PROGRAM<TAB>ARG... per line; SIDE:NAME labels pair up.
spec=$OUT/spec
: >"$spec"
add() { local IFS=$'\t'; echo "$*" >>"$spec"; }
SB=(--parsable -H -J cost -t 1 -o /dev/null --wrap true)
sides=()
[ $slurm = 1 ] && sides+=(slurm)
[ -n "${BASELINE:-}" ] && sides+=(before)
sides+=(lattice)
for side in "${sides[@]}"; do
  case $side in
  slurm) d=/usr/bin sacct=(-c -X -P -n) ;;
  before) d=$OUT/before/slurm sacct=(-X -P -n) ;;
  lattice) d=$OUT/slurm sacct=(-X -P -n) ;;
  esac
  add "$side:sbatch --wrap" "$d/sbatch" "${SB[@]}"
  add "$side:squeue" "$d/squeue"
  add "$side:squeue -h -o '%i %T'" "$d/squeue" -h -o "%i %T"
  add "$side:sacct -X -P -n" "$d/sacct" "${sacct[@]}"
done
# Two jobs each to list before the first call.
for side in "${sides[@]}"; do
  case $side in slurm) d=/usr/bin ;; before) d=$OUT/before/slurm ;; *) d=$OUT/slurm ;; esac
  for _ in 1 2; do (cd "$OUT/work" && "$d/sbatch" "${SB[@]}" >/dev/null); done
done
cd "$OUT/work"
"$OUT/bin/callcost" -n "$CALLS" "$spec"
if [ $slurm = 1 ]; then
  echo "(slurm's sacct is sacct -c: it reads the job completion log and sends no request; the peer has no slurmdbd)"
fi
