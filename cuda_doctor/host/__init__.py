"""The host around the GPU: environment, /dev/shm, the container, the CUDA toolkit, the kernel module."""
