#!/bin/bash
#SBATCH -N4 --ntasks-per-node=2
#SBATCH -t 5
# hello_ompi and hello_mpich are hello_allreduce.c built with mpicc.openmpi
# and mpicc.mpich. Open MPI refuses root without these two variables.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "== openmpi mpirun"
mpirun.openmpi ./hello_ompi; echo "exit $?"
echo "== mpich mpiexec"
mpiexec.hydra ./hello_mpich; echo "exit $?"
echo "== mpich srun --mpi=pmi2"
srun --mpi=pmi2 ./hello_mpich; echo "exit $?"
