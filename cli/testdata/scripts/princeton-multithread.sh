#!/bin/bash
#SBATCH --job-name=multithread   # short name
#SBATCH --nodes=1                # node count
#SBATCH --ntasks=1               # total tasks
#SBATCH --cpus-per-task=4        # cores per task
#SBATCH --mem-per-cpu=4G         # memory per core
#SBATCH --time=00:15:00          # total run time limit (HH:MM:SS)
#SBATCH --mail-type=begin        # send email when job begins
#SBATCH --mail-type=end          # send email when job ends
#SBATCH --mail-user=netid@princeton.edu

module purge
export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK
./myprog
