#!/bin/bash
#SBATCH -A ABC123
#SBATCH -J solver
#SBATCH -o %x-%j.out
#SBATCH -t 00:15:00
#SBATCH -p batch
#SBATCH -q debug
#SBATCH -N 2
#SBATCH -C nvme

# Eight ranks per node, one per GCD.
srun -N "$SLURM_NNODES" -n $((SLURM_NNODES * 8)) --ntasks-per-node=8 --gpus-per-task=1 ./solver
