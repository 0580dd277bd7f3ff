"""``cuda-doctor watch``: run a command and judge how busy its GPUs were.

child (spawn, signals, exit code) → sampler (NVML in a background thread) → samples (plain data)
→ verdict (pure analysis) → reporters.
"""
