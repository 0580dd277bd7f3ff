# ruff: noqa
import argparse
import os

import torch

parser = argparse.ArgumentParser()
# read next to LOCAL_RANK: the environment wins under torchrun, the flag serves launchers that pass it
parser.add_argument("--local_rank", "--local-rank", type=int, default=int(os.environ.get("LOCAL_RANK", 0)))
args = parser.parse_args()
torch.cuda.set_device(args.local_rank)
