#!/bin/bash
#SBATCH --account=def-someuser
#SBATCH --gpus-per-node=v100:2
#SBATCH --cpus-per-task=6
#SBATCH --mem=32000M
#SBATCH --time=0-03:00
#SBATCH --job-name=pytorch

nvidia-smi
python train.py --epochs 10
