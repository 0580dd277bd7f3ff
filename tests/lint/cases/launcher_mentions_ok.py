# ruff: noqa
"""Launch with python -m torch.distributed.launch --nproc_per_node 8 train.py (a docstring)."""
import argparse
import logging
import subprocess
import sys

import torch

# python -m torch.distributed.launch --nproc_per_node 8 train.py  (a comment)
parser = argparse.ArgumentParser(description="Run under python -m torch.distributed.launch or torchrun")
parser.add_argument("--launcher", help="e.g. python -m torch.distributed.launch --nproc_per_node 8")
logger = logging.getLogger(__name__)


def check(world_size):
    if world_size < 1:
        raise ValueError(f"no workers: start this with python -m torch.distributed.launch --nproc_per_node N")
    assert world_size < 1024, "python -m torch.distributed.launch spawns one process per GPU"
    print("Usage: python -m torch.distributed.launch --nproc_per_node 8 train.py")
    logger.warning("python -m torch.distributed.launch is deprecated; use torchrun")
    if world_size > 512:
        parser.error("too many workers for python -m torch.distributed.launch --nproc_per_node")
        sys.exit("start with python -m torch.distributed.launch --nproc_per_node 8 train.py")


def command(nproc):
    version = tuple(int(part) for part in torch.__version__.split(".")[:2])
    if version < (1, 9):  # torchrun does not exist there: the launcher is the only way
        return [sys.executable, "-m", "torch.distributed.launch", f"--nproc_per_node={nproc}"]
    return ["torchrun", f"--nproc-per-node={nproc}"]


subprocess.run([*command(2), "train.py"])
