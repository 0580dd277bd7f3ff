# ruff: noqa
import argparse
import subprocess
import sys

import torch.distributed.launch  # expect: CDL006

parser = argparse.ArgumentParser()
parser.add_argument("--local_rank", type=int, default=0)  # expect: CDL007
parser.add_argument("--local-rank", type=int, default=0)  # expect: CDL007
parser.add_argument("--epochs", type=int, default=1)
subprocess.run([sys.executable, "-m", "torch.distributed.launch", "train.py"])  # expect: CDL006
subprocess.run("python -m torch.distributed.launch --nproc_per_node 2 train.py", shell=True)  # expect: CDL006
subprocess.run(["torchrun", "--nproc-per-node", "2", "train.py"])
args = parser.parse_args()
torch.cuda.set_device(args.local_rank)  # the flag is where the rank comes from: wrong under torchrun
