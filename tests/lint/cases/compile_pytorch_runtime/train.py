import torch
from torch import compile as jit

model = jit(torch.nn.Linear(16, 16).cuda())  # expect: CDL106
print(model(torch.ones(4, 16, device="cuda")))
