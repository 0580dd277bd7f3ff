# ruff: noqa
import torch
from torch.cuda.amp import GradScaler
from torch.cuda import amp

scaler = GradScaler()  # expect: CDL001
model = torch.nn.Linear(4, 4).cuda()
opt = torch.optim.AdamW(model.parameters())


@torch.cuda.amp.custom_fwd  # expect: CDL001
def forward(x):
    return x


for x in range(3):
    with torch.cuda.amp.autocast():  # expect: CDL001
        loss = model(x).sum()
    with amp.autocast(dtype=torch.bfloat16):  # expect: CDL001
        pass
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
