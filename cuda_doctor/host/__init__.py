"""The host around the GPU: environment variables, /dev/shm, the container, the CUDA toolkit and
the kernel module."""
