#!/bin/sh
# One task of a job array: SLURM_ARRAY_TASK_ID says which.
#SBATCH --job-name=sweep
#SBATCH --time=5
echo "task $SLURM_ARRAY_TASK_ID of array $SLURM_ARRAY_JOB_ID on $SLURMD_NODENAME"
sleep $((2 + ${SLURM_ARRAY_TASK_ID:-0} % 3))
