#!/usr/bin/env bash
set -euo pipefail
# python -m torch.distributed.launch in a comment is fine
python -m torch.distributed.launch \
    --nproc_per_node 4 train.py  # expect-prev: CDL006
torchrun --nproc-per-node 4 train.py
pip install torch==2.3.0+cu123  # expect: CDL201
pip install torch==2.3.0 --index-url https://download.pytorch.org/whl/cu121
