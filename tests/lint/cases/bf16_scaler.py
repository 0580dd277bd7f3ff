# ruff: noqa
import torch

scaler = torch.amp.GradScaler("cuda")  # expect: CDL005
model = torch.nn.Linear(4, 4).cuda()
optim = torch.optim.SGD(model.parameters(), lr=0.01)
for x in range(10):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x).sum()
    scaler.scale(loss).backward()
    scaler.step(optim)
    scaler.update()
