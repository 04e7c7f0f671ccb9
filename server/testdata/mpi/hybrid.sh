#!/bin/bash
#SBATCH -N2 --ntasks-per-node=2 --cpus-per-task=4
#SBATCH -t 5
# hybrid_ompi and hybrid_mpich are hybrid.c built with mpicc.openmpi -fopenmp
# and mpicc.mpich -fopenmp.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK
echo "== mpich srun --mpi=pmi2"
srun --mpi=pmi2 ./hybrid_mpich; echo "exit $?"
echo "== openmpi mpirun"
mpirun.openmpi --bind-to none ./hybrid_ompi; echo "exit $?"
