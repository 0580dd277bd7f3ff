# ruff: noqa
# This sub-project pins torch 1.13.1, where torch.cuda.amp is the API: an info note.
import torch

scaler = torch.cuda.amp.GradScaler()  # expect: CDL001
