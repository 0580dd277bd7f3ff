# ruff: noqa
import torch

model = torch.nn.Linear(4, 4).cuda()
optim = torch.optim.SGD(model.parameters(), lr=0.01)
for x in range(10):
    with torch.autocast("cuda"):  # expect: CDL004
        loss = model(x).sum()
    with torch.amp.autocast(device_type="cuda", dtype=torch.float16):  # expect: CDL004
        loss = loss + 1
    with torch.autocast("cuda", enabled=False):
        pass
    loss.backward()
    optim.step()
