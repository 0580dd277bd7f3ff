"""Inference without torch.compile: `torch.compile(model)` needs a C compiler, which the image lacks."""

import torch

# model = torch.compile(model)  # off: the runtime image has no gcc
HELP = "torch.compile(model, mode='max-autotune') is not used here"
code = compile("x = 1", "<config>", "exec")  # Python's builtin, not torch's


def predict(x):
    """Call torch.compile(model) here once the image has a compiler."""
    return x


model = torch.nn.Linear(16, 16)
print(predict(model(torch.ones(1, 16))), HELP, code)
