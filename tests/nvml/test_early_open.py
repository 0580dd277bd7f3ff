"""The slow first asks made through the C library before pynvml is imported."""

from __future__ import annotations

from typing import Any

import pynvml
import pytest

from cuda_doctor.nvml import early_open, fields

#: The questions asked of each GPU ahead of pynvml, with their arguments after the handle.
EARLY_ASKS = {
    "nvmlDeviceGetFieldValues": ("count", "out"),
    "nvmlDeviceGetPowerUsage": ("out",),
    "nvmlDeviceGetCurrentClocksEventReasons": ("out",),
    "nvmlDeviceGetGpuFabricInfoV": ("out",),
}


class FakeLibrary:
    """libnvidia-ml.so.1 as ctypes sees it: functions taking pointers, returning NVML codes."""

    def __init__(self, gpus: int = 2, init_code: int = 0, missing: str | None = None, links: int = 0) -> None:
        self.gpus = gpus
        self.init_code = init_code
        self.missing = missing  # a function this (older) library lacks
        self.links = links  # NVLinks per GPU
        self.calls: list[tuple[str, int | None]] = []
        self.fields_asked: list[list[tuple[int, int]]] = []

    def nvmlInit_v2(self) -> int:
        self.calls.append(("nvmlInit_v2", None))
        return self.init_code

    def nvmlDeviceGetCount_v2(self, count: Any) -> int:
        count.contents.value = self.gpus
        self.calls.append(("nvmlDeviceGetCount_v2", None))
        return 0

    def nvmlDeviceGetHandleByIndex_v2(self, index: int, handle: Any) -> int:
        handle.contents.value = 1000 + index
        self.calls.append(("nvmlDeviceGetHandleByIndex_v2", index))
        return 0

    def __getattr__(self, name: str) -> Any:
        if name not in EARLY_ASKS or name == self.missing:
            raise AttributeError(f"undefined symbol: {name}")

        def ask(handle: Any, *args: Any) -> int:
            expected = EARLY_ASKS[name]
            for arg, want in zip(args, expected, strict=True):
                if want == "count":
                    assert isinstance(arg, int)
                elif name == "nvmlDeviceGetFieldValues":  # the array itself, filled in place
                    self._answer_fields(arg)
                else:
                    assert hasattr(arg, "contents")  # outputs are pointers
            if name == "nvmlDeviceGetGpuFabricInfoV":
                assert args[0].contents.version == pynvml.nvmlGpuFabricInfo_v2
            self.calls.append((name, handle.value))
            return 0

        return ask

    def _answer_fields(self, entries: Any) -> None:
        self.fields_asked.append([(int(e.fieldId), int(e.scopeId)) for e in entries])
        for entry in entries:
            if entry.fieldId == fields.NVLINK_LINK_COUNT:
                entry.value.uiVal = self.links
            else:
                entry.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED


def ask_early(library: FakeLibrary) -> None:
    opened: list[str] = []

    def load(name: str) -> FakeLibrary:
        opened.append(name)
        return library

    early_open.open_driver_early(load).join(10)
    assert opened == ["libnvidia-ml.so.1"]


def test_the_slow_first_asks_are_made_for_every_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(early_open, "early_errors", [])
    library = FakeLibrary(gpus=2)
    ask_early(library)
    per_gpu = list(EARLY_ASKS)
    assert library.fields_asked == [[(field, 0) for field in fields.GPU_BATCH]] * 2  # what the probe asks
    assert library.calls == [
        ("nvmlInit_v2", None),
        ("nvmlDeviceGetCount_v2", None),
        ("nvmlDeviceGetHandleByIndex_v2", 0),
        *[(name, 1000) for name in per_gpu],
        ("nvmlDeviceGetHandleByIndex_v2", 1),
        *[(name, 1001) for name in per_gpu],
    ]
    assert early_open.early_errors == []


def test_nothing_more_is_asked_when_init_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(early_open, "early_errors", [])
    library = FakeLibrary(init_code=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    ask_early(library)
    assert library.calls == [("nvmlInit_v2", None)]
    assert early_open.early_errors == []  # pynvml's own nvmlInit names the failure


def test_an_older_library_stops_the_early_asks_quietly(monkeypatch: pytest.MonkeyPatch) -> None:
    errors: list[str] = []
    monkeypatch.setattr(early_open, "early_errors", errors)
    library = FakeLibrary(gpus=2, missing="nvmlDeviceGetCurrentClocksEventReasons")
    ask_early(library)
    assert ("nvmlDeviceGetPowerUsage", 1000) in library.calls
    assert ("nvmlDeviceGetHandleByIndex_v2", 1) not in library.calls  # stopped at the first gap
    assert errors == ["undefined symbol: nvmlDeviceGetCurrentClocksEventReasons"]


def test_a_library_without_the_fabric_state_is_asked_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    errors: list[str] = []
    monkeypatch.setattr(early_open, "early_errors", errors)
    library = FakeLibrary(gpus=2, missing="nvmlDeviceGetGpuFabricInfoV")
    ask_early(library)
    assert ("nvmlDeviceGetCurrentClocksEventReasons", 1001) in library.calls
    assert errors == ["undefined symbol: nvmlDeviceGetGpuFabricInfoV"] * 2


def test_a_gpu_with_nvlinks_is_asked_its_links_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(early_open, "early_errors", [])
    library = FakeLibrary(gpus=1, links=18)
    ask_early(library)
    assert library.fields_asked == [[(field, 0) for field in fields.GPU_BATCH], fields.link_batch(18)]


def test_no_driver_library(monkeypatch: pytest.MonkeyPatch) -> None:
    errors: list[str] = []
    monkeypatch.setattr(early_open, "early_errors", errors)

    def load(name: str) -> Any:
        raise OSError(f"{name}: cannot open shared object file")

    early_open.open_driver_early(load).join(10)
    assert errors == ["libnvidia-ml.so.1: cannot open shared object file"]
