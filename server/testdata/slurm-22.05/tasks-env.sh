#!/bin/sh
#SBATCH -N2 --ntasks-per-node=4
echo BATCH; env | grep -E '^SLURM|^SLURMD' | sort
echo STEP; srun -l sh -c 'env | grep -E "^SLURM|^SLURMD" | sort' | sort -n -s -k1,1
