#!/bin/bash
# compare-slurm.sh [JOBS] [NODES] -- issue 14's throughput comparison in one
# run on this machine: a real Slurm 22.05 (../shared/peers/slurm, Debian's
# slurm-wlm + munge) and Lattice (`latticed bench throughput`), the same
# trivial one-node jobs on the same node count, both
#   concurrent: JOBS jobs submitted by 4 concurrent CLI loops (sbatch / latticectl submit);
#   phased:     JOBS jobs queued first and released at once (Slurm: partition DOWN then UP;
#               Lattice: every node drained, one array submitted, the nodes undrained).
# Prints each side's throughput.sh-style summary and the ratios of completion rates.
#
# Environment: SLURM_PEER (dir of up.sh/throughput.sh/down.sh; default ../shared/peers/slurm
#              next to the repository), OUT (results dir; default a temp dir),
#              PEER_ROOT / PEER_CTLD_PORT / PEER_SLURMD_BASE_PORT (passed to the peer scripts).
# Without slurmctld installed only the Lattice side runs (say so).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
JOBS=${1:-2000}
NODES=${2:-64}
PEER=${SLURM_PEER:-$ROOT/../shared/peers/slurm}
OUT=${OUT:-$(mktemp -d -t lattice-vs-slurm-XXXXXX)}
# munged refuses a socket under a directory that is not executable by all,
# and mktemp -d makes 0700.
chmod 0755 "$OUT"
export PEER_ROOT=${PEER_ROOT:-$OUT/slurm-peer}
export PEER_CTLD_PORT=${PEER_CTLD_PORT:-26817}
export PEER_SLURMD_BASE_PORT=${PEER_SLURMD_BASE_PORT:-27000}
mkdir -p "$OUT/bin"
# Built as released (deploy/Dockerfile): static, without cgo, with the
# release tags. A cgo build is dynamically linked, and every latticectl run
# then pays for the dynamic loader and libc's start-up too (~1.5 ms of CPU
# each here); the tags leave out gRPC's x/net/trace and urfave/cli's man
# pages (~85 page faults per latticectl run). TAGS= builds without them.
TAGS=${TAGS-grpcnotrace,urfave_cli_no_docs}
(cd "$ROOT" && CGO_ENABLED=0 go build -tags "$TAGS" -trimpath -ldflags "-s -w" -o "$OUT/bin/" ./cmd/latticed ./cmd/latticectl ./cmd/lattice-job-supervisor)
echo "results in $OUT; machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$OUT/machine.txt"

rate() { sed -n 's/.*completed \([0-9.]*\)\/s.*/\1/p' "$1" | head -1; }

if [ -x "$PEER/up.sh" ] && command -v /usr/sbin/slurmctld >/dev/null; then
  trap '"$PEER/down.sh" >/dev/null 2>&1 || true' EXIT
  "$PEER/up.sh" "$NODES"
  "$PEER/throughput.sh" "$JOBS" | tee "$OUT/slurm-concurrent.txt"
  PHASED=1 "$PEER/throughput.sh" "$JOBS" | tee "$OUT/slurm-phased.txt"
  "$PEER/down.sh"
  trap - EXIT
else
  echo "no Slurm peer here (need $PEER/up.sh and slurmctld: apt-get install slurm-wlm munge); Lattice side only" | tee "$OUT/slurm-missing.txt"
fi

"$OUT/bin/latticed" bench throughput --dir "$OUT/lattice-concurrent" --nodes "$NODES" --jobs "$JOBS" --loops 4 \
  --latticectl "$OUT/bin/latticectl" | tee "$OUT/lattice-concurrent.txt"
"$OUT/bin/latticed" bench throughput --dir "$OUT/lattice-phased" --nodes "$NODES" --jobs "$JOBS" --phased \
  --latticectl "$OUT/bin/latticectl" | tee "$OUT/lattice-phased.txt"

for mode in concurrent phased; do
  if [ -f "$OUT/slurm-$mode.txt" ]; then
    s=$(rate "$OUT/slurm-$mode.txt"); l=$(rate "$OUT/lattice-$mode.txt")
    awk -v m="$mode" -v s="$s" -v l="$l" 'BEGIN { printf "%s: Lattice %.1f/s vs Slurm %.1f/s completed = %.2fx\n", m, l, s, (s > 0 ? l / s : 0) }'
  fi
done | tee "$OUT/ratios.txt"
