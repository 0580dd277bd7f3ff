# ruff: noqa
# The sibling's pin does not apply here: a warning with the torch.amp replacement.
import torch

scaler = torch.cuda.amp.GradScaler()  # expect: CDL001
