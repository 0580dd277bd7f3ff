"""Callbacks for trainers: ``cuda_doctor.integrations.lightning`` (PyTorch Lightning) and
``cuda_doctor.integrations.transformers`` (Hugging Face); each imports its framework, and only it."""
