#!/bin/bash -l
#SBATCH --job-name=hybrid
#SBATCH --output=hybrid.o%j
#SBATCH --error=hybrid.e%j
#SBATCH --partition=standard
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=16
#SBATCH --cpus-per-task=8
#SBATCH --time=02:00:00
#SBATCH --account=project_465000000

export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK
srun ./hybrid_app
