# ruff: noqa
import torch
import torchvision
from torch import nn

model = nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU()).cuda()  # expect: CDL010
backbone = torchvision.models.resnet50()
