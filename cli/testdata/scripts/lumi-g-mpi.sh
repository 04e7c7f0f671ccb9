#!/bin/bash -l
#SBATCH --job-name=examplejob   # Job name
#SBATCH --output=examplejob.o%j # stdout
#SBATCH --error=examplejob.e%j  # stderr
#SBATCH --partition=standard-g  # Partition (queue) name
#SBATCH --nodes=16              # Total number of nodes
#SBATCH --ntasks-per-node=8     # one MPI rank per GCD
#SBATCH --gpus-per-node=8
#SBATCH --time=1-12:00:00       # d-hh:mm:ss
#SBATCH --mail-type=all
#SBATCH --account=project_465000000
#SBATCH --mail-user=someone@example.org

export MPICH_GPU_SUPPORT_ENABLED=1
srun --cpu-bind=map_cpu:49,57,17,25,1,9,33,41 ./select_gpu ./app
