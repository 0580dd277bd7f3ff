# ruff: noqa
import torch

scaler = torch.cuda.amp.GradScaler()  # expect: CDL001
model = torch.nn.Linear(4, 4).cuda()
opt = torch.optim.AdamW(model.parameters())

for x in range(3):
    with torch.cuda.amp.autocast():  # expect: CDL001
        loss = model(x).sum()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
