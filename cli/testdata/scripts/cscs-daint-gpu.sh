#!/bin/bash -l
#SBATCH --job-name="cosmo"
#SBATCH --account="s1234"
#SBATCH --mail-type=ALL
#SBATCH --mail-user=someone@example.org
#SBATCH --time=01:00:00
#SBATCH --nodes=4
#SBATCH --ntasks-per-core=1
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=12
#SBATCH --partition=normal
#SBATCH --constraint=gpu
#SBATCH --hint=nomultithread

export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK
export CRAY_CUDA_MPS=1
srun ./cosmo
