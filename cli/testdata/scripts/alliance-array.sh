#!/bin/bash
#SBATCH --account=def-someuser
#SBATCH --time=0-00:15
#SBATCH --mem-per-cpu=1500M
#SBATCH --array=1-10
#SBATCH --output=array-%A_%a.out

echo "task $SLURM_ARRAY_TASK_ID"
./analyse --case "$SLURM_ARRAY_TASK_ID"
