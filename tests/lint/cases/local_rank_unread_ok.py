# ruff: noqa
# The README launches this with `python -m torch.distributed.launch`, which passes --local_rank; the
# script never reads the flag (the process group comes from the environment), so torchrun is fine too.
import argparse

import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--local_rank", type=int, default=-1, help="passed by the launcher; not used")
parser.add_argument("--lr", type=float, default=1e-3)
args = parser.parse_args()
dist.init_process_group("nccl")
print(args.lr)
