#!/bin/bash -x
#SBATCH --account=training2300
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=12
#SBATCH --output=mpi-out.%j
#SBATCH --error=mpi-err.%j
#SBATCH --time=00:15:00
#SBATCH --partition=booster
#SBATCH --gres=gpu:4

srun ./gpu-prog
