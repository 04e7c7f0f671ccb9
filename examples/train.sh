#!/bin/sh
# A training loop that checkpoints when asked (submit it with --checkpoint
# signal): SIGUSR1 means "write a checkpoint now", and touching
# $LATTICE_CHECKPOINT_DONE tells Lattice it is written.
trap 'echo "checkpoint at epoch $epoch"; touch "${LATTICE_CHECKPOINT_DONE:-/dev/null}"' USR1
echo "training on $LATTICE_NUM_NODES nodes ($LATTICE_NODELIST), restart ${LATTICE_RESTART_COUNT:-0}"
epoch=0
while [ "$epoch" -lt 120 ]; do
	epoch=$((epoch + 1))
	echo "epoch $epoch"
	sleep 5
done
