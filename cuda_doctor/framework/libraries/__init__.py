"""What a framework process really loads, judged against what torch was built and pinned for.

The framework child reports the facts (``dist[i]``, ``companion[i]``, ``cudalib[i]``,
``torch.requires``); the derivers here turn them into ``derived.*`` facts for the rules:
``pins`` (torch's pinned CUDA wheels, shadowed copies, mixed CUDA families), ``loaded`` (where
each loaded library came from), ``import_error`` (why ``import torch`` failed),
``companions`` (torchvision & co. against torch), ``cuda_init`` (CUDA initialisation errors,
forward-compatibility libraries, a kernel module older than the user-space driver).
``common`` holds what they share: torch's pins and the runnable commands.
"""
