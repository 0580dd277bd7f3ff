"""Containers: NVIDIA_REQUIRE_* semantics, image facts judged for a host, running an image."""
