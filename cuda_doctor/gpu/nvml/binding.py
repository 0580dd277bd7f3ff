"""The one way into NVML, for every caller: load nvidia-ml-py, open and close NVML, name its
errors, decode its strings, ask it questions.  ``pynvml`` is imported only when a caller asks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

# NVML return codes (nvml.h); the numbers are stable across releases.
SUCCESS = 0
NOT_SUPPORTED = 3
NOT_FOUND = 6
DRIVER_NOT_LOADED = 9
LIBRARY_NOT_FOUND = 12
FUNCTION_NOT_FOUND = 13
LIB_RM_VERSION_MISMATCH = 18

# nvmlDeviceGetTotalEccErrors arguments and nvmlDeviceGetTemperature's sensor (nvml.h).
MEMORY_ERROR_TYPE_UNCORRECTED = 1
VOLATILE_ECC = 0
TEMPERATURE_GPU = 0

VERSION_MISMATCH_MESSAGE = "Failed to initialize NVML: Driver/library version mismatch"
#: nvidia-ml-py's words for LIBRARY_NOT_FOUND, which it says without a library to ask.
LIBRARY_NOT_FOUND_MESSAGE = "NVML Shared Library Not Found"
LIBRARY = "libnvidia-ml.so.1"


class NvmlUnavailable(Exception):
    """NVML cannot be used here.  ``str()`` is the reason in words, ``status`` the
    ``driver.status`` it means, ``detail`` what the binding or NVML itself said."""

    def __init__(self, status: str, reason: str, detail: str) -> None:
        super().__init__(reason)
        self.status = status
        self.detail = detail


def load() -> Any:
    """The ``pynvml`` module; NvmlUnavailable when it is missing or fails to import."""
    try:
        import pynvml
    except Exception as exc:  # not installed, or a broken build raising anything at import
        reason = f"nvidia-ml-py (module pynvml) cannot be imported: {exc}"
        raise NvmlUnavailable("library_not_found", reason, reason) from exc
    return pynvml


def init(nvml: Any) -> None:
    """``nvmlInit``; NvmlUnavailable saying, in the facts' words, why it failed."""
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        raise NvmlUnavailable(*_init_failure(exc), str(exc)) from exc
    except OSError as exc:  # some bindings let the loader's error through
        raise NvmlUnavailable(*_library_failure(str(exc), str(exc)), str(exc)) from exc


def _init_failure(exc: BaseException) -> tuple[str, str]:
    code = error_code(exc)
    if code == LIBRARY_NOT_FOUND:
        return _library_failure(str(exc), loader_error(LIBRARY))
    if code == DRIVER_NOT_LOADED:
        return "not_loaded", f"NVIDIA kernel driver not loaded ({exc})"
    if code == LIB_RM_VERSION_MISMATCH:
        return "version_mismatch", VERSION_MISMATCH_MESSAGE
    return "error", f"Failed to initialize NVML: {exc}"


def loader_error(name: str) -> str | None:
    """What the dynamic loader says when asked for ``name`` in this process (None: it loads);
    unlike pynvml's message, it tells a missing file from one that cannot be loaded."""
    import ctypes

    try:
        ctypes.CDLL(name)
    except OSError as exc:
        return str(exc)
    return None


def library_missing() -> NvmlUnavailable | None:
    """Why NVML cannot be used when the loader finds no ``libnvidia-ml.so.1`` at all (so importing
    pynvml is not needed to know it); None otherwise, and when there is no ``pynvml`` to import."""
    import importlib.util

    if _listed_for_loader(LIBRARY):
        return None  # the usual case with a driver: no need to open it on this thread to know
    loader = loader_error(LIBRARY)
    if loader is None or not loader.startswith(f"{LIBRARY}: cannot open shared object file"):
        return None
    if importlib.util.find_spec("pynvml") is None:
        return None
    return NvmlUnavailable(*_library_failure(LIBRARY_NOT_FOUND_MESSAGE, loader), LIBRARY_NOT_FOUND_MESSAGE)


#: The dynamic loader's cache of library names (glibc's ldconfig writes it); a larger one is not read.
LOADER_CACHE = "/etc/ld.so.cache"
LOADER_CACHE_BYTES = 16 << 20


def _listed_for_loader(name: str) -> bool:
    """Whether the loader would likely find ``name`` (in LD_LIBRARY_PATH or its cache): a shortcut."""
    from cuda_doctor.base.reading import read_bytes

    if _on_library_path(name) is not None:
        return True
    try:  # a FIFO or a device there is refused at once, not waited on
        return name.encode() in read_bytes(LOADER_CACHE, LOADER_CACHE_BYTES, "the loader's cache")
    except OSError:
        return False


def _library_failure(said: str, loader: str | None) -> tuple[str, str]:
    """(status, reason) for a library that did not load: not found, or found but unloadable."""
    if loader is None or loader.startswith(f"{LIBRARY}: cannot open shared object file"):
        return "library_not_found", f"{LIBRARY} not found ({said})"
    path = loader.split(":", 1)[0] if loader.startswith("/") else _on_library_path(LIBRARY)
    where = f" at {path}" if path else ""
    words = loader.removeprefix(f"{path}: ") if path else loader
    return "library_unloadable", f"{LIBRARY} was found{where} but cannot be loaded: {words}"


def _on_library_path(name: str) -> str | None:
    """The first ``name`` in this process's LD_LIBRARY_PATH folders, where the loader looks first."""
    import os

    for folder in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
        candidate = os.path.join(folder or ".", name)
        if os.path.isfile(candidate):
            return candidate
    return None


def shutdown(nvml: Any) -> str | None:
    """``nvmlShutdown``; why it failed, or None.  Whatever was read stands either way."""
    try:
        nvml.nvmlShutdown()
    except Exception as exc:
        return describe(exc)
    return None


def error_code(exc: BaseException) -> int | None:
    """NVML's return code carried by an ``NVMLError``; None for any other exception."""
    value = getattr(exc, "value", None)
    return value if isinstance(value, int) else None


def describe(exc: BaseException) -> str:
    """NVML's own message for its errors; the exception's type and message for anything else."""
    if error_code(exc) is not None or isinstance(exc, NvmlUnavailable):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def text(value: object) -> str:
    """Older bindings return ``bytes`` for names and UUIDs, newer ones ``str``."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class Refusal(NamedTuple):
    """Why NVML gave no answer: ``code`` is its return code (None when the binding failed)."""

    code: int | None
    reason: str

    @property
    def not_supported(self) -> bool:
        return self.code == NOT_SUPPORTED


def ask(nvml: Any, functions: Sequence[str], *args: Any) -> Any:
    """The answer of the first of ``functions`` (newest first) that this binding and driver
    have, or a Refusal; FUNCTION_NOT_FOUND from the driver moves on to the next one."""
    present = [name for name in functions if hasattr(nvml, name)]
    if not present:
        return Refusal(None, f"this nvidia-ml-py has no {functions[0]}")
    for position, name in enumerate(present):
        try:
            return getattr(nvml, name)(*args)
        except Exception as exc:
            code = error_code(exc)
            if code == FUNCTION_NOT_FOUND and position + 1 < len(present):
                continue
            return Refusal(code, f"NVML {name}: {describe(exc)}")
    raise AssertionError("unreachable: the last function answers or refuses")


#: c_nvmlValue_t's members in nvmlValueType_t order (DOUBLE, UNSIGNED_INT, …, UNSIGNED_SHORT).
_VALUE_MEMBERS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")


def field_values(nvml: Any, handle: Any, fields: Sequence[int | tuple[int, int]]) -> list[Any]:
    """One GPU's field values (``NVML_FI_*`` ids, or (id, scope) pairs) in one round trip, in
    the order asked: each a number, or a Refusal saying why it went unanswered."""
    answer = ask(nvml, ("nvmlDeviceGetFieldValues",), handle, list(fields))
    if isinstance(answer, Refusal):
        return [answer] * len(fields)
    values: list[Any] = []
    for field, entry in zip(fields, answer, strict=False):
        code = int(entry.nvmlReturn)
        kind = int(entry.valueType)
        if code != SUCCESS:
            values.append(Refusal(code, f"NVML field {field}: {error_text(nvml, code)}"))
        elif 0 <= kind < len(_VALUE_MEMBERS):
            values.append(getattr(entry.value, _VALUE_MEMBERS[kind]))
        else:
            values.append(Refusal(None, f"NVML field {field}: value of unknown type {kind}"))
    return values


def error_text(nvml: Any, code: int) -> str:
    """NVML's own message for a return code."""
    try:
        return str(nvml.NVMLError(code))
    except Exception as exc:  # the message itself comes from the library; a number still says something
        return f"NVML error {code} ({describe(exc)})"


def mig_parents(nvml: Any, handles: Sequence[Any]) -> dict[str, int] | None:
    """Each MIG instance's UUID → the index of its GPU; None when they cannot be listed."""
    parents: dict[str, int] = {}
    for index, handle in enumerate(handles):
        most = ask(nvml, ("nvmlDeviceGetMaxMigDeviceCount",), handle)
        if isinstance(most, Refusal):
            if most.not_supported:
                continue  # a board without MIG
            return None
        for slot in range(int(most)):
            mig = ask(nvml, ("nvmlDeviceGetMigDeviceHandleByIndex",), handle, slot)
            if isinstance(mig, Refusal):
                if mig.code == NOT_FOUND:
                    continue  # an empty slot
                return None
            uuid = ask(nvml, ("nvmlDeviceGetUUID",), mig)
            if isinstance(uuid, Refusal):
                return None
            parents[text(uuid)] = index
    return parents
