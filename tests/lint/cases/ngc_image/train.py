# ruff: noqa
# torch comes from the base image, whose torch release is not known: an info note whose fix
# says which torch the replacement needs.
import torch

with torch.cuda.amp.autocast():  # expect: CDL001
    pass
