#!/bin/bash
#SBATCH --qos=regular
#SBATCH --constraint=cpu
#SBATCH --nodes=2
#SBATCH --time=00:30:00
#SBATCH --account=m1234
#SBATCH --job-name=mpi-cpu

# Two CPU nodes, 128 MPI ranks each, 2 threads per rank.
export OMP_NUM_THREADS=2
srun -n 256 -c 2 --cpu-bind=cores ./app.x
