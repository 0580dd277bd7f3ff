# ruff: noqa
"""A module that defines a conv net: it must not set the process-wide cudnn.benchmark flag."""
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)

    def forward(self, x):
        return self.conv(x)


def train_step(model, batch, optimizer):
    loss = model(batch.cuda()).sum()
    loss.backward()
    optimizer.step()
