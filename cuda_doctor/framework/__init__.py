"""The framework build (torch, TensorFlow) as the target interpreter loads it, and its derivers."""
