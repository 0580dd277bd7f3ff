#!/bin/bash
# python -m torch.distributed.launch --nproc_per_node 8 train.py   (a comment)
echo "Now run: python -m torch.distributed.launch --nproc_per_node=8 train.py"
printf '%s\n' "python -m torch.distributed.launch" >&2
echo "starting" && python -m torch.distributed.launch --nproc_per_node=2 train.py  # expect: CDL006
LAUNCH="-m torch.distributed.launch --nproc_per_node=2"  # expect: CDL006
python $LAUNCH train.py
