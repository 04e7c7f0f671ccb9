#!/bin/bash
# record-slurm-peer.sh OUT: run the Slurm commands workflow tools parse
# against a real Slurm 22.05 (the peer in ../shared/peers/slurm, or any
# cluster SLURM_CONF points at) and write what they print to OUT, for
# cli/slurm_peer_test.go to compare Lattice's Slurm commands with.
#
# The scenario (a fresh cluster, partition batch* of nodes n[1-4], 1 CPU
# each, jobs numbered from 1, run as root):
#   1 sleeper  sbatch -J sleeper -t 10 -N1 --wrap "sleep 600"   RUNNING on n1
#   2 held     sbatch -H -J held -t 5 -N2 --wrap true           PENDING (JobHeldUser)
#   3 arr      sbatch -H -a 3-9 -J arr -t 1 --wrap true         PENDING array
#   4 p        sbatch --parsable -H -J p -t 1 --wrap true       PENDING
#   n4 drained with reason "bad DIMM"
# Times vary between runs; the test compares them by shape.
set -u
out=${1:?usage: record-slurm-peer.sh OUT}
run() {
  local rc
  { echo "\$ $*"; "$@" 2>/tmp/record-slurm-peer.err; rc=$?
    sed 's/^/! /' /tmp/record-slurm-peer.err; echo "? $rc"; } >> "$out"
}
: > "$out"
echo "# recorded from $(sbatch --version) on $(date -u +%FT%TZ) by scripts/record-slurm-peer.sh" >> "$out"
run squeue
run squeue -r
run squeue -h -o "%i %T %R"
run squeue -o "%.10i|%6P|%5j|%t|%l|%D|%a|%r"
run squeue -O "JobID:6,Name:.8,State,ReasonList"
run squeue -t PD --noheader -o %i
run squeue -j 2 -h --format="%i %j %u %D %l"
run squeue -j 999
run squeue -t XX
run squeue --bogus
run sinfo
run sinfo -N
run sinfo -s
run sinfo -R
run sinfo -h -o "%P %D %t %N"
run sinfo -t idle -h
run scontrol show job 2
run scontrol -o show job 2
run scontrol show node n4
run scontrol show partition batch
run scontrol show job 999
run scancel 999
run sbatch --bogus
run sbatch -N
