# ruff: noqa
import torch

with torch.cuda.amp.autocast():  # cuda-doctor: ignore[CDL001]
    pass
# cuda-doctor: ignore[CDL001]
scaler = torch.cuda.amp.GradScaler()
with torch.cuda.amp.autocast():  # cuda-doctor: ignore
    pass
with torch.cuda.amp.autocast():  # cuda-doctor: ignore[CDL006] expect: CDL001
    pass
