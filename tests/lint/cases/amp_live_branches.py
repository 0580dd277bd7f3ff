# ruff: noqa
"""The deprecated API in the branch that runs on every torch that still has it: reported."""
import contextlib

import torch
from torch.cuda.amp.autocast_mode import autocast  # reported where it is used
from torch.cuda.amp.grad_scaler import GradScaler as Scaler

try:  # succeeds on every torch that warns: the try body is the live branch
    from torch.cuda.amp import custom_fwd
except ImportError:
    custom_fwd = None


@custom_fwd  # expect: CDL001
def forward(x):
    return x


def context():
    if hasattr(torch.cuda.amp, "autocast"):  # true wherever it warns
        return torch.cuda.amp.autocast(dtype=torch.bfloat16)  # expect: CDL001
    return contextlib.nullcontext()


def scaler():
    try:
        return torch.cuda.amp.GradScaler()  # expect: CDL001
    except AttributeError:
        return None


with autocast():  # expect: CDL001
    pass
s = Scaler()  # expect: CDL001

if torch.cuda.is_available() and hasattr(torch.cuda, "amp") and hasattr(torch.cuda.amp, "autocast"):
    bf16 = torch.cuda.amp.autocast(dtype=torch.bfloat16)  # expect: CDL001

if not hasattr(torch.cuda, "amp") or not hasattr(torch.cuda.amp, "autocast"):
    maybe = contextlib.nullcontext
else:
    from torch.cuda.amp import autocast as maybe

with maybe():  # expect: CDL001
    pass
