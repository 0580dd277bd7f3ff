"""The framework build (torch, TensorFlow) as the target interpreter loads it: its child, the CUDA
libraries it loads and pins, the device code in its fatbins, and their derivers."""
