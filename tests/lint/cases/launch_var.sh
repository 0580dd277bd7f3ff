#!/usr/bin/env bash
LAUNCHER="torch.distributed.launch --nproc_per_node=8"
CMD="python -m $LAUNCHER train.py"  # expect: CDL006
WITH_M="python -m torch.distributed.launch --nproc_per_node=8"  # expect: CDL006
$WITH_M train.py
RUNNER="torchrun --nproc-per-node 8"
$RUNNER train.py
