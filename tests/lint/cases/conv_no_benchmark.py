# ruff: noqa
import torch
import torchvision
from torch import nn


def main():
    model = nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU()).cuda()  # expect: CDL010
    backbone = torchvision.models.resnet50()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(torch.randn(2, 3, 32, 32, device="cuda")).sum()
    loss.backward()
    optimizer.step()


if __name__ == "__main__":
    main()
