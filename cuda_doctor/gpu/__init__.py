"""The NVIDIA driver and its GPUs: NVML, nvidia-smi, CUDA_VISIBLE_DEVICES, memory, fabric and
NVLink health."""
