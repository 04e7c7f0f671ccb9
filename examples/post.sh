#!/bin/sh
# Runs once every task of the array it depends on has succeeded.
echo "post-processing, job $SLURM_JOB_ID"
