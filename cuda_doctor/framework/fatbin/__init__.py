"""The device code inside compiled CUDA libraries and extensions: which GPUs it can run on."""
