"""cuda-doctor: an environment preflight doctor for GPU deep learning."""

__version__ = "0.1.0"
