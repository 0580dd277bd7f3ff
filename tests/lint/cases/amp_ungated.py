# ruff: noqa
import torch

if torch.cuda.is_available():  # a device check is not a version gate
    scaler = torch.cuda.amp.GradScaler()  # expect: CDL001
try:
    ctx = torch.cuda.amp.autocast()  # expect: CDL001
except RuntimeError:  # not a fallback for an older API
    ctx = None
