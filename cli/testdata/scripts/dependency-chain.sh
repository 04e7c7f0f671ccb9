#!/bin/bash
#SBATCH -N1 -t30 -Jpost
#SBATCH --dependency=afterok:152:153
#SBATCH --requeue
#SBATCH --open-mode=append

./postprocess results/
