# ruff: noqa
# A script that trains at module level (no __main__ block) is an entry point too.
import torch

model = torch.nn.Linear(10, 1).cuda()
optimizer = torch.optim.AdamW(model.parameters())
for step in range(10):
    loss = model(torch.randn(4, 10).cuda()).sum()
    loss.backward()  # expect: CDL003
    optimizer.step()
