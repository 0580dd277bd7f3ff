# ruff: noqa
import argparse

import deepspeed

parser = argparse.ArgumentParser()
parser.add_argument("--local_rank", type=int, default=-1)  # the deepspeed launcher passes it
parser = deepspeed.add_config_arguments(parser)
