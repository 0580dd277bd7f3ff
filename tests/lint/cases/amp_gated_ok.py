# ruff: noqa
"""torch.cuda.amp as the fallback for an older torch: nothing to report."""
from __future__ import annotations

import torch
from packaging import version

try:
    from torch.amp import GradScaler
except ImportError:
    from torch.cuda.amp import GradScaler

try:
    scaler = torch.amp.GradScaler("cuda")
except (AttributeError, TypeError):
    scaler = torch.cuda.amp.GradScaler()

if version.parse(torch.__version__) >= version.parse("2.4"):
    autocast = torch.amp.autocast
else:
    autocast = torch.cuda.amp.autocast

if hasattr(torch, "amp"):
    ctx = torch.amp.autocast("cuda")
else:
    ctx = torch.cuda.amp.autocast()

make = torch.amp.GradScaler if hasattr(torch.amp, "GradScaler") else torch.cuda.amp.GradScaler
second = GradScaler()


def step(s: torch.cuda.amp.GradScaler) -> None:
    """An annotation emits no warning at run time."""


try:  # the version check may itself fail on an old torch: the bare except is its fallback
    if is_torch_min_version("2.4.0a0"):
        fwd = torch.amp.custom_fwd
    else:
        fwd = torch.cuda.amp.custom_fwd
except:
    fwd = torch.cuda.amp.custom_fwd


def autocast_context(enabled):
    if hasattr(torch, "amp") and hasattr(torch.amp, "autocast"):
        return torch.amp.autocast("cuda", enabled=enabled)
    if hasattr(torch.cuda, "amp") and hasattr(torch.cuda.amp, "autocast"):  # only where torch.amp is missing
        return torch.cuda.amp.autocast(enabled=enabled)
    return None


def scaler_for(version):
    if version >= (2, 4):
        return torch.amp.GradScaler("cuda")
    return torch.cuda.amp.GradScaler()
