# ruff: noqa
import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--local_rank", type=int, default=0)  # expect: CDL007
opt = parser.parse_args()
device = torch.device("cuda", opt.local_rank)
