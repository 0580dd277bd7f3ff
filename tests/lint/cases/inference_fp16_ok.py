# ruff: noqa
import torch

model = torch.nn.Linear(4, 4).cuda().eval()
with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16):
    out = model(torch.randn(2, 4, device="cuda"))
