# ruff: noqa
import torch
from torch import nn

torch.backends.cudnn.benchmark = True
model = nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU()).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
with torch.autocast("cuda", dtype=torch.bfloat16):
    loss = model(torch.randn(2, 3, 32, 32, device="cuda")).sum()
loss.backward()
optimizer.step()
