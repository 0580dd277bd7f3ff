# ruff: noqa
import os

import torch

os.environ["CUDA_VISIBLE_DEVICES"] = "0"  # before CUDA is initialised: it takes effect
if torch.cuda.device_count() > 1:  # NVML: does not initialise CUDA
    os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
x = torch.zeros(1).cuda()
os.environ["CUDA_VISIBLE_DEVICES"] = "1"  # expect: CDL011
os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # expect: CDL011
os.environ["NCCL_ASYNC_ERROR_HANDLING"] = "1"  # NCCL reads it when a communicator is created


def select(rank):
    if torch.cuda.is_available():
        os.environ["CUDA_VISIBLE_DEVICES"] = str(rank)  # expect: CDL011
    os.environ["NCCL_P2P_DISABLE"] = "1"


def early(rank):
    os.environ["CUDA_VISIBLE_DEVICES"] = str(rank)
    torch.cuda.set_device(0)
