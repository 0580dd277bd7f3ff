"""cuda-doctor: an environment preflight doctor for GPU deep learning.

The Python API (docs/api.md) is imported on first use, so that ``import cuda_doctor`` stays cheap
and a module of a lower layer that imports ``cuda_doctor.base`` never loads it::

    import cuda_doctor

    cuda_doctor.require()  # raises cuda_doctor.PreflightError with the checklist on a broken machine
"""

__version__ = "0.1.0"
__all__ = ["PreflightError", "Report", "Result", "Status", "__version__", "check", "require"]

# The names' types are in __init__.pyi: an import of the API here, even one for type checkers
# only, would tie every module that reads __version__ to the layer above them.


def __getattr__(name: str) -> object:
    if name in __all__:
        # by name: `from cuda_doctor import __version__`, which the engine reads, must not tie the
        # package's root to the API above it (pyproject's import-linter contracts)
        import importlib

        return getattr(importlib.import_module("cuda_doctor.api"), name)
    raise AttributeError(f"module 'cuda_doctor' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
