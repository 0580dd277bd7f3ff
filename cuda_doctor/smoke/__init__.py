"""The GPU smoke run: prove that the GPU computes, and at the speed it should.

Two child scripts run with the target interpreter under one hard time limit:
``driver_level`` (libcuda through ctypes, a PTX vector add, no framework needed) and
``framework_level`` (torch: copies, matmuls checked against float64, AMP, cuDNN).
``runner`` starts them and reads their progress; ``probe`` turns what they said into
facts; ``expected`` compares the figures with ``rules/data/gpu_expected.toml``.
"""

from __future__ import annotations
