"""What the installed torch says of the allocator settings in the environment, asked of torch's
own parser without initialising CUDA (standard library and Python 3.7 syntax only).

A CUDA build of torch parses ``PYTORCH_CUDA_ALLOC_CONF`` / ``PYTORCH_ALLOC_CONF`` when CUDA
starts and raises for a key it does not know; handing the same text to the parser it exposes
(``torch._C._accelerator_setAllocatorSettings`` from 2.9, before that
``torch._C._cuda_cudaCachingAllocator_set_allocator_settings``) raises the same error now, and
leaves the settings as the environment would have set them.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

#: The variables torch reads, the CUDA allocator's first choice first (c10/cuda/CUDAAllocatorConfig.h).
VARIABLES = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF")
#: torch's parsers of the settings, newest first.
PARSERS = ("_accelerator_setAllocatorSettings", "_cuda_cudaCachingAllocator_set_allocator_settings")


def settings_in(environ: Mapping[str, str]) -> dict[str, str]:
    return {name: environ[name] for name in VARIABLES if name in environ}


def first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return type(exc).__name__ + (": " + lines[0] if lines else "")


def check_settings(torch: Any, environ: Mapping[str, str]) -> dict[str, Any]:
    """``{"variables": {name: value}, "parser": name or None, "variable": the one rejected or None,
    "error": torch's words or None, "warnings": [torch's warnings]}``; never raises."""
    found = settings_in(environ)
    answer: dict[str, Any] = {"variables": found, "parser": None, "variable": None, "error": None, "warnings": []}
    parser = None
    for name in PARSERS:
        parser = getattr(getattr(torch, "_C", None), name, None)
        if callable(parser):
            answer["parser"] = name
            break
    if parser is None or not found:
        return answer
    said: list[str] = []
    # the CUDA allocator's own choice last, so that the settings end as the environment sets them
    for name in sorted(found, key=VARIABLES.index, reverse=True):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                parser(found[name])
            except BaseException as exc:  # torch raises ValueError or RuntimeError; the text is the finding
                answer["variable"] = name
                answer["error"] = first_line(exc)
        for item in caught:
            text = str(getattr(item, "message", item)).strip().splitlines()
            if text and text[0] not in said:
                said.append(text[0])
        if answer["error"] is not None:
            break
    answer["warnings"] = said
    return answer


def rejection(answer: Mapping[str, Any]) -> str | None:
    """A failure in words when torch rejected the settings, else None."""
    if answer.get("error") is None:
        return None
    name = answer.get("variable")
    value = (answer.get("variables") or {}).get(name, "")
    return "torch rejects {}={}: {}".format(name, value, answer["error"])
