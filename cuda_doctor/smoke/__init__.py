"""The GPU smoke run: prove that the GPU computes, and at the speed it should."""

from __future__ import annotations
