"""``cuda-doctor watch``: run a command and judge how busy its GPUs were.  child (spawn, signals)
→ sampler (NVML thread) → samples (data) → verdict (analysis) → reporters."""
