# ruff: noqa
import argparse
import os

parser = argparse.ArgumentParser()
parser.add_argument("--local_rank", "--local-rank", type=int, default=int(os.environ.get("LOCAL_RANK", 0)))  # expect: CDL007
args = parser.parse_args()
