#!/bin/bash
#SBATCH -A m1234_g
#SBATCH -C gpu
#SBATCH -q debug
#SBATCH -t 10:00
#SBATCH -N 1
#SBATCH --ntasks-per-node=4
#SBATCH -c 32
#SBATCH --gpus-per-node=4

export SLURM_CPU_BIND="cores"
srun ./gpu_app
