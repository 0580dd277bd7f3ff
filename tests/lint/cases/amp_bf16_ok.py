# ruff: noqa
"""A training loop that autocasts to bfloat16: nothing to report.

Docstrings may mention python -m torch.distributed.launch without a finding.
"""
import os

import torch
from torch.utils.data import DataLoader

local_rank = int(os.environ["LOCAL_RANK"])
torch.backends.cudnn.benchmark = True
model = torch.nn.Conv2d(3, 8, 3).cuda(local_rank)
optimizer = torch.optim.AdamW(model.parameters())
loader = DataLoader(range(8), batch_size=2, num_workers=4, pin_memory=True)
for batch in loader:
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(batch).sum()
    loss.backward()
    optimizer.step()
